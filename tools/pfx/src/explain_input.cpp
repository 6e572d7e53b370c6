#include <pfx/cli/explain_input.hpp>

#include <pfx/cli/command.hpp>
#include <pfx/cli/json_kind.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

namespace pfx::cli {
namespace {

using nlohmann::json;

/// Where an input came from, for messages: "--record" (inline) or "--record record.json".
struct Source {
  std::string label;

  [[noreturn]] void fail(std::string_view field, std::string_view message) const {
    if (field.empty()) throw InputError(fmt::format("{}: {}", label, message));
    throw InputError(fmt::format("{}: field \"{}\": {}", label, field, message));
  }
};

/// Inline JSON starts with `[` or `{` (after blanks); anything else names a file.
bool is_inline(std::string_view argument) {
  const std::size_t first = argument.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && (argument[first] == '[' || argument[first] == '{');
}

/// The argument's JSON, read from the file it names unless it is inline.
json parse(std::string_view option, std::string_view argument, Source& source) {
  std::string text;
  if (is_inline(argument)) {
    source.label = std::string(option);
    text = std::string(argument);
  } else {
    source.label = fmt::format("{} {}", option, argument);
    std::error_code ec;
    // A directory opens as a stream on Linux and reads as empty text: say what it is instead.
    if (std::filesystem::is_directory(std::string(argument), ec)) source.fail("", "cannot read the file: it is a directory");
    std::ifstream in{std::string(argument)};
    if (!in) {
      source.fail("", fmt::format("cannot read the file ({}); inline JSON starts with [ or {{, such as [1,2,3]",
                                  std::strerror(errno)));
    }
    std::ostringstream all;
    all << in.rdbuf();
    if (in.bad()) source.fail("", fmt::format("cannot read the file ({})", std::strerror(errno)));
    text = all.str();
  }
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    // parse_error for bad syntax; out_of_range for a number past a double's range, such as 1e500.
    // "[json.exception.parse_error.101] parse error at line 1, ...": the bracketed tag says nothing.
    std::string_view what = e.what();
    if (const std::size_t tag = what.find("] "); tag != std::string_view::npos) what.remove_prefix(tag + 2);
    source.fail("", fmt::format("malformed JSON: {}", what));
  }
}

/// A JSON integer >= 0 that fits std::uint64_t, else nullopt (negative, float, string, ...).
std::optional<std::uint64_t> count(const json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  // A signed integer is negative, or -0, which is 0 (as `pfx replay`'s trace reads it).
  if (value.is_number_integer() && value.get<std::int64_t>() == 0) return 0;
  return std::nullopt;
}

std::vector<token> token_ids(const json& array, const Source& source, std::string_view field) {
  if (!array.is_array()) source.fail(field, fmt::format("expected an array of token ids, got {}", kind_of(array)));
  std::vector<token> ids;
  ids.reserve(array.size());
  constexpr auto most = static_cast<std::uint64_t>(std::numeric_limits<token>::max());
  for (std::size_t i = 0; i < array.size(); ++i) {
    const std::optional<std::uint64_t> id = count(array[i]);
    if (!id || *id > most) {
      source.fail(field, fmt::format("element {}: expected a token id (an integer in 0..{}), got {}", i, most,
                                     kind_of(array[i])));
    }
    ids.push_back(static_cast<token>(*id));
  }
  return ids;
}

}  // namespace

HeldRecord read_record(std::string_view option, std::string_view argument, std::optional<std::size_t> canonical_end) {
  Source source;
  const json value = parse(option, argument, source);
  HeldRecord record;
  if (value.is_array()) {
    record.ids = token_ids(value, source, "");
    record.canonical_end = canonical_end.value_or(record.ids.size());
    return record;
  }
  if (!value.is_object()) {
    source.fail("", fmt::format("expected an array of token ids or an object {{\"ids\": [...], \"canonical_end\": n}}, "
                                "got {}",
                                kind_of(value)));
  }
  const auto ids = value.find("ids");
  if (ids == value.end()) source.fail("ids", "missing");
  record.ids = token_ids(*ids, source, "ids");
  const auto end = value.find("canonical_end");
  if (end != value.end()) {
    const std::optional<std::uint64_t> n = count(*end);
    if (!n) source.fail("canonical_end", fmt::format("expected a non-negative integer, got {}", kind_of(*end)));
    record.canonical_end = *n;
  } else if (!canonical_end) {
    source.fail("canonical_end", "missing (give it here, or with --canonical-end)");
  }
  if (canonical_end) record.canonical_end = *canonical_end;  // the option wins
  return record;
}

std::vector<token> read_prompt(std::string_view option, std::string_view argument) {
  Source source;
  const json value = parse(option, argument, source);
  if (value.is_array()) return token_ids(value, source, "");
  if (!value.is_object()) {
    source.fail("", fmt::format("expected an array of token ids or an object {{\"prompt\": [...]}}, got {}",
                                kind_of(value)));
  }
  const auto prompt = value.find("prompt");
  if (prompt == value.end()) source.fail("prompt", "missing");
  return token_ids(*prompt, source, "prompt");
}

}  // namespace pfx::cli
