// fuzz_environment: the parsing of TF_GLM53_PREFIX_CACHE and TF_GLM53_PREFIX_CACHE_MIN
// (driver/src/environment.cpp), which the Python module compiles too. The first byte says which
// variables are set (and the base enabled flag); the rest is the two values, split at the first NUL.
// Each value is judged independently of the code under test (blanks: what Python's strip() removes
// within ASCII, space, \t..\r and \x1c..\x1f):
//   TF_GLM53_PREFIX_CACHE      without surrounding blanks and lower-cased: "1", "true", "on", "yes"
//                              (on), "0", "false", "off", "no" (off), "" (on); nothing else
//   TF_GLM53_PREFIX_CACHE_MIN  without surrounding blanks: an optional sign, then runs of decimal
//                              digits joined by single underscores (Python's int()), whose value is
//                              0 or positive and fits std::size_t
// A finding is: an exception other than ConfigError; a ConfigError for valid values, or one that
// does not name the (first) bad variable; accepted bad values; accepted values that do not mean what
// they say (enabled other than the flag, keep_min other than the digits' value); or a change to
// chunk, which the variables do not set.

#include "byte_reader.hpp"
#include "finding.hpp"

#include <pfx/driver/environment.hpp>
#include <pfx/driver/errors.hpp>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>

namespace {

template <class... Parts>
[[noreturn]] void finding(const Parts&... parts) {
  pfx::fuzz::report_finding("fuzz_environment", parts...);
}

constexpr std::string_view blanks = " \t\n\v\f\r\x1c\x1d\x1e\x1f";

/// The value without the blanks the documentation allows around it.
std::string_view without_blanks(std::string_view value) {
  const std::size_t first = value.find_first_not_of(blanks);
  if (first == std::string_view::npos) return {};
  return value.substr(first, value.find_last_not_of(blanks) - first + 1);
}

/// The count the value names, when it is a valid TF_GLM53_PREFIX_CACHE_MIN.
std::optional<std::size_t> expected_keep_min(std::string_view value) {
  std::string_view text = without_blanks(value);
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  // Underscores only between digits: not first, not last, never two in a row.
  if (text.empty() || text.front() == '_' || text.back() == '_' || text.find("__") != std::string_view::npos ||
      text.find_first_not_of("0123456789_") != std::string_view::npos) {
    return std::nullopt;
  }
  std::string digits;
  for (const char c : text) {
    if (c != '_') digits.push_back(c);
  }
  std::string significant = digits.substr(std::min(digits.find_first_not_of('0'), digits.size()));
  if (significant.empty()) return 0;  // -0 too
  if (negative) return std::nullopt;
  const std::string most = std::to_string(std::numeric_limits<std::size_t>::max());
  if (significant.size() > most.size() || (significant.size() == most.size() && significant > most)) {
    return std::nullopt;
  }
  return std::stoull(significant);  // at most 20 digits, checked to fit above
}

/// The flag the value names, when it is a valid TF_GLM53_PREFIX_CACHE.
std::optional<bool> expected_enabled(std::string_view value) {
  std::string flag(without_blanks(value));
  for (char& c : flag) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (flag.empty() || flag == "1" || flag == "true" || flag == "on" || flag == "yes") return true;
  if (flag == "0" || flag == "false" || flag == "off" || flag == "no") return false;
  return std::nullopt;
}

/// "VARIABLE=\"value\"", or "VARIABLE unset".
std::string shown(std::string_view variable, const std::optional<std::string_view>& value) {
  std::ostringstream out;
  out << variable;
  if (value) {
    out << "=\"" << *value << '"';
  } else {
    out << " unset";
  }
  return out.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  pfx::fuzz::ByteReader in{std::span<const std::uint8_t>(data, size)};
  const std::uint8_t which = in.byte();
  const std::string_view values = in.rest();
  const std::size_t split = values.find('\0');
  std::optional<std::string_view> prefix_cache;
  std::optional<std::string_view> prefix_cache_min;
  if ((which & 1) != 0) prefix_cache = values.substr(0, split);
  if ((which & 2) != 0) prefix_cache_min = split == std::string_view::npos ? values : values.substr(split + 1);

  const pfx::Config base{.enabled = (which & 4) != 0, .keep_min = 777, .chunk = 12345U + ((which >> 3) & 1U)};

  const std::optional<bool> reuse =
      prefix_cache ? expected_enabled(*prefix_cache) : std::optional<bool>(base.enabled);
  const std::optional<std::size_t> keep_min =
      prefix_cache_min ? expected_keep_min(*prefix_cache_min) : std::optional<std::size_t>(base.keep_min);
  const std::string given = shown(pfx::driver::prefix_cache_variable, prefix_cache) + ", " +
                            shown(pfx::driver::prefix_cache_min_variable, prefix_cache_min);

  pfx::Config options;
  try {
    options = pfx::driver::apply_environment(base, prefix_cache, prefix_cache_min);
  } catch (const pfx::driver::ConfigError& e) {
    const std::string_view message = e.what();
    if (reuse && keep_min) finding(given, ": refused valid values: ", message);
    const std::string_view bad = !reuse ? pfx::driver::prefix_cache_variable : pfx::driver::prefix_cache_min_variable;
    if (message.rfind(std::string(bad) + "=", 0) != 0) {
      finding(given, ": the message does not start with ", bad, ": ", message);
    }
    return 0;
  } catch (const std::exception& e) {
    finding(given, ": threw something other than ConfigError: ", e.what());
  }
  if (!reuse || !keep_min) finding(given, ": accepted a malformed value");
  if (options.enabled != *reuse) finding(given, ": enabled is ", options.enabled ? "on" : "off");
  if (options.keep_min != *keep_min) finding(given, ": keep_min is ", options.keep_min);
  if (options.chunk != base.chunk) {
    finding(given, ": changed chunk, which the variables do not set");
  }
  return 0;
}
