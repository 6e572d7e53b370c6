#include <pfx/driver/environment.hpp>
#include <pfx/driver/errors.hpp>

#include <charconv>
#include <cstdlib>
#include <string>

namespace pfx::driver {
namespace {

std::string_view trimmed(std::string_view text) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

[[noreturn]] void malformed(std::string_view variable, std::string_view value, std::string_view expected) {
  throw ConfigError(std::string(variable) + "=\"" + std::string(value) + "\" is malformed: expected " +
                    std::string(expected));
}

std::optional<std::string_view> variable(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string_view(value);
}

}  // namespace

LaneOptions apply_environment(LaneOptions base, std::optional<std::string_view> prefix_cache,
                              std::optional<std::string_view> prefix_cache_min) {
  if (prefix_cache) {
    // The seed treats every value but "0" as on; a typo such as "off" would then turn reuse on,
    // so only the two values the seed documents are accepted.
    const std::string_view value = trimmed(*prefix_cache);
    if (value == "0") {
      base.enabled = false;
    } else if (value == "1") {
      base.enabled = true;
    } else {
      malformed(prefix_cache_variable, *prefix_cache, "\"1\" (reuse on) or \"0\" (reuse off)");
    }
  }
  if (prefix_cache_min) {
    const std::string_view value = trimmed(*prefix_cache_min);
    std::size_t keep_min = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), keep_min);
    if (value.empty() || error != std::errc{} || end != value.data() + value.size()) {
      malformed(prefix_cache_min_variable, *prefix_cache_min,
                error == std::errc::result_out_of_range ? "a count of tokens that fits in 64 bits"
                                                        : "a non-negative decimal count of tokens, such as 64");
    }
    base.keep_min = keep_min;
  }
  return base;
}

LaneOptions lane_options_from_environment(LaneOptions base) {
  return apply_environment(base, variable(prefix_cache_variable), variable(prefix_cache_min_variable));
}

}  // namespace pfx::driver
