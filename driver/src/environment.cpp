#include <pfx/driver/environment.hpp>
#include <pfx/driver/errors.hpp>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

namespace pfx::driver {
namespace {

/// The blanks Python's str.strip() and int() ignore within ASCII: space, \t \n \v \f \r, and the
/// separators \x1c..\x1f.
constexpr bool blank(char c) noexcept { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

constexpr char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool spelled(std::string_view value, std::string_view word) {
  if (value.size() != word.size()) return false;
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (lower(value[i]) != word[i]) return false;
  }
  return true;
}

[[noreturn]] void malformed(std::string_view variable, std::string_view value, std::string_view expected) {
  throw ConfigError(std::string(variable) + "=\"" + std::string(value) + "\" is malformed: expected " +
                    std::string(expected));
}

std::optional<std::string_view> value_of(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string_view(value);
}

}  // namespace

bool read_flag(std::string_view variable, std::string_view raw) {
  const std::string_view value = trimmed(raw);
  if (value.empty()) return true;  // the original class: any value but "0" is on
  for (const std::string_view on : {"1", "true", "on", "yes"}) {
    if (spelled(value, on)) return true;
  }
  for (const std::string_view off : {"0", "false", "off", "no"}) {
    if (spelled(value, off)) return false;
  }
  malformed(variable, raw,
            "1, true, on or yes (reuse on), 0, false, off or no (reuse off), or empty (on)");
}

/// A base-10 integer as Python's int() reads it: optional sign, digits with single underscores
/// between them.
std::size_t read_count(std::string_view variable, std::string_view raw) {
  std::string_view value = trimmed(raw);
  bool negative = false;
  if (!value.empty() && (value.front() == '+' || value.front() == '-')) {
    negative = value.front() == '-';
    value.remove_prefix(1);
  }
  constexpr std::string_view expected = "an integer >= 0 such as 64 (Python's int() spellings: \"+64\", \"1_000\")";
  std::uint64_t n = 0;
  bool overflow = false;
  bool after_digit = false;
  for (const char c : value) {
    if (c == '_' && after_digit) {
      after_digit = false;
      continue;
    }
    if (c < '0' || c > '9') malformed(variable, raw, expected);
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (n > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) overflow = true;
    n = n * 10 + digit;
    after_digit = true;
  }
  if (!after_digit) malformed(variable, raw, expected);  // empty, or a trailing '_'
  if (negative && (overflow || n != 0)) malformed(variable, raw, "a count of tokens >= 0, not a negative one");
  if (overflow || n > std::numeric_limits<std::size_t>::max()) {
    malformed(variable, raw, "a count of tokens that fits in 64 bits");
  }
  return static_cast<std::size_t>(n);
}

Config apply_environment(Config base, std::optional<std::string_view> prefix_cache,
                         std::optional<std::string_view> prefix_cache_min) {
  if (prefix_cache) base.enabled = read_flag(prefix_cache_variable, *prefix_cache);
  if (prefix_cache_min) base.keep_min = read_count(prefix_cache_min_variable, *prefix_cache_min);
  return base;
}

Config config_from_environment(Config base) {
  return apply_environment(base, value_of(prefix_cache_variable), value_of(prefix_cache_min_variable));
}

}  // namespace pfx::driver
