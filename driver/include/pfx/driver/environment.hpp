#pragma once

/// \file
/// The two environment variables of the original Python class, one parser for C++ and Python alike
/// (the Python module compiles this file too). Values are trimmed of blanks; letters are
/// case-insensitive; anything else is a ConfigError that names the variable (docs/python.md lists
/// where pfx differs from the original class).
///
///   TF_GLM53_PREFIX_CACHE      1, true, on, yes: reuse on; 0, false, off, no: reuse off;
///                              empty: the default (on). Unset: the base's value (default on).
///   TF_GLM53_PREFIX_CACHE_MIN  keep_min: a base-10 integer as Python's int() writes it ("64", "+8",
///                              " 8 ", "1_000", "007"), >= 0 and fitting 64 bits. Unset: the base's.
///
/// This header does not depend on the Lane: it reads into a pfx::Config (enabled and keep_min).

#include <pfx/config.hpp>

#include <optional>
#include <string_view>

namespace pfx::driver {

inline constexpr std::string_view prefix_cache_variable = "TF_GLM53_PREFIX_CACHE";
inline constexpr std::string_view prefix_cache_min_variable = "TF_GLM53_PREFIX_CACHE_MIN";

/// `base` with enabled and keep_min taken from the two values (std::nullopt: the variable is unset);
/// chunk is left as it is. A malformed value throws ConfigError, whose message starts with
/// VARIABLE="value".
[[nodiscard]] Config apply_environment(Config base, std::optional<std::string_view> prefix_cache,
                                       std::optional<std::string_view> prefix_cache_min);

/// `base` with the process environment applied. A lane's: `options.config =
/// config_from_environment(options.config)`.
[[nodiscard]] Config config_from_environment(Config base = {});

}  // namespace pfx::driver
