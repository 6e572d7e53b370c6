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
/// The same two readings serve any other variable of pfx's (the vLLM plugin's PFX_VLLM,
/// PFX_VLLM_CHUNK and PFX_VLLM_KEEP_MIN): read_flag and read_count, whose errors name that variable.
///
/// This header does not depend on the Lane: it reads into a pfx::Config (enabled and keep_min).

#include <pfx/config.hpp>

#include <cstddef>
#include <optional>
#include <string_view>

namespace pfx::driver {

inline constexpr std::string_view prefix_cache_variable = "TF_GLM53_PREFIX_CACHE";
inline constexpr std::string_view prefix_cache_min_variable = "TF_GLM53_PREFIX_CACHE_MIN";

/// `value` of `variable` as a flag: 1, true, on, yes: true; 0, false, off, no: false; empty: true (the
/// original class: any value but "0" is on). Anything else throws ConfigError, whose message starts
/// with VARIABLE="value".
[[nodiscard]] bool read_flag(std::string_view variable, std::string_view value);

/// `value` of `variable` as a count of tokens: a base-10 integer >= 0 as Python's int() writes it,
/// fitting 64 bits. Anything else throws ConfigError, whose message starts with VARIABLE="value".
[[nodiscard]] std::size_t read_count(std::string_view variable, std::string_view value);

/// `base` with enabled and keep_min taken from the two values (std::nullopt: the variable is unset);
/// chunk is left as it is. A malformed value throws ConfigError, whose message starts with
/// VARIABLE="value".
[[nodiscard]] Config apply_environment(Config base, std::optional<std::string_view> prefix_cache,
                                       std::optional<std::string_view> prefix_cache_min);

/// `base` with the process environment applied. A lane's: `options.config =
/// config_from_environment(options.config)`.
[[nodiscard]] Config config_from_environment(Config base = {});

}  // namespace pfx::driver
