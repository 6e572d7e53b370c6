#pragma once

/// \file
/// The seed's environment variables, read the seed's way but strictly: same names, meanings and
/// defaults; a value the seed would misread is a ConfigError that names the variable.
///
///   TF_GLM53_PREFIX_CACHE      "1" reuse on (the default when unset), "0" off
///   TF_GLM53_PREFIX_CACHE_MIN  keep_min, a decimal count of tokens (default 64)

#include <pfx/driver/lane.hpp>

#include <optional>
#include <string_view>

namespace pfx::driver {

inline constexpr std::string_view prefix_cache_variable = "TF_GLM53_PREFIX_CACHE";
inline constexpr std::string_view prefix_cache_min_variable = "TF_GLM53_PREFIX_CACHE_MIN";

/// `base` with reuse and keep_min taken from the two values (std::nullopt: the variable is unset).
/// Surrounding blanks are ignored; anything else malformed throws ConfigError.
[[nodiscard]] LaneOptions apply_environment(LaneOptions base, std::optional<std::string_view> prefix_cache,
                                            std::optional<std::string_view> prefix_cache_min);

/// `base` with the process environment applied.
[[nodiscard]] LaneOptions lane_options_from_environment(LaneOptions base = {});

}  // namespace pfx::driver
