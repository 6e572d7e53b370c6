// fuzz_environment: the parsing of TF_GLM53_PREFIX_CACHE and TF_GLM53_PREFIX_CACHE_MIN
// (driver/src/environment.cpp), which the Python PromptPrefix goes through too. The first byte says
// which variables are set (and the base reuse flag); the rest is the two values, split at the first
// NUL. Each value is judged independently of the code under test:
//   TF_GLM53_PREFIX_CACHE      valid iff, without surrounding blanks, it is "0" or "1"
//   TF_GLM53_PREFIX_CACHE_MIN  valid iff, without surrounding blanks, it is a non-empty run of
//                              decimal digits whose value fits std::size_t
// A finding is: an exception other than ConfigError; a ConfigError for valid values, or one that
// does not name the (first) bad variable; accepted bad values; accepted values that do not mean what
// they say (reuse other than the flag, keep_min other than the digits' value); or a change to any
// option the variables do not set.

#include "byte_reader.hpp"
#include "finding.hpp"

#include <pfx/driver/environment.hpp>
#include <pfx/driver/errors.hpp>

#include <algorithm>
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

using pfx::driver::LaneOptions;

template <class... Parts>
[[noreturn]] void finding(const Parts&... parts) {
  pfx::fuzz::report_finding("fuzz_environment", parts...);
}

/// The value without the blanks the documentation allows around it (space, tab, CR, LF).
std::string_view without_blanks(std::string_view value) {
  const std::size_t first = value.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return value.substr(first, value.find_last_not_of(" \t\r\n") - first + 1);
}

/// The count the value names, when it is a valid TF_GLM53_PREFIX_CACHE_MIN.
std::optional<std::size_t> expected_keep_min(std::string_view value) {
  const std::string_view digits = without_blanks(value);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  std::string significant(digits.substr(std::min(digits.find_first_not_of('0'), digits.size())));
  if (significant.empty()) return 0;
  const std::string most = std::to_string(std::numeric_limits<std::size_t>::max());
  if (significant.size() > most.size() || (significant.size() == most.size() && significant > most)) {
    return std::nullopt;
  }
  return std::stoull(significant);  // at most 20 digits, checked to fit above
}

/// The flag the value names, when it is a valid TF_GLM53_PREFIX_CACHE.
std::optional<bool> expected_reuse(std::string_view value) {
  const std::string_view flag = without_blanks(value);
  if (flag == "0") return false;
  if (flag == "1") return true;
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

  LaneOptions base;
  base.capacity = 12345;
  base.enabled = (which & 4) != 0;
  base.keep_min = 777;
  base.poison = (which & 8) != 0;

  const std::optional<bool> reuse = prefix_cache ? expected_reuse(*prefix_cache) : std::optional<bool>(base.enabled);
  const std::optional<std::size_t> keep_min =
      prefix_cache_min ? expected_keep_min(*prefix_cache_min) : std::optional<std::size_t>(base.keep_min);
  const std::string given = shown(pfx::driver::prefix_cache_variable, prefix_cache) + ", " +
                            shown(pfx::driver::prefix_cache_min_variable, prefix_cache_min);

  LaneOptions options;
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
  if (options.enabled != *reuse) finding(given, ": reuse is ", options.enabled ? "on" : "off");
  if (options.keep_min != *keep_min) finding(given, ": keep_min is ", options.keep_min);
  if (options.capacity != base.capacity || options.poison != base.poison) {
    finding(given, ": changed an option the variables do not set");
  }
  return 0;
}
