#pragma once

/// \file
/// The words and checks every reader of a JSON input shares (explain's record and prompt, replay's
/// trace, the audit's traceability table): reading the file, what a value is ("got an array", "got
/// the string "x"", "got 3.5"), what a malformed text is, and the one reader of an array of token ids.

#include <pfx/cli/command.hpp>
#include <pfx/token.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace pfx::cli {

/// The file at `path`, open. Throws InputError "<label>: cannot read the file ..." with the reason,
/// and `hint` after it when the file cannot be opened.
[[nodiscard]] inline std::ifstream open_file(const std::string& label, const std::string& path, std::string_view hint) {
  std::error_code ec;
  // A directory opens as a stream on Linux and reads as empty text: say what it is instead.
  if (std::filesystem::is_directory(path, ec)) throw InputError(label + ": cannot read the file: it is a directory");
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot read the file ({}){}", label, std::strerror(errno), hint));
  return in;
}

/// Throws InputError "<label>: cannot read the file (<reason>)" when reading `in` failed part way.
inline void check_read(const std::ifstream& in, const std::string& label) {
  if (in.bad()) throw InputError(fmt::format("{}: cannot read the file ({})", label, std::strerror(errno)));
}

/// The text of the file at `path`, as open_file opens it.
[[nodiscard]] inline std::string read_file(const std::string& label, const std::string& path, std::string_view hint) {
  std::ifstream in = open_file(label, path, hint);
  std::ostringstream all;
  all << in.rdbuf();
  check_read(in, label);
  return all.str();
}

[[nodiscard]] inline std::string kind_of(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::string: return fmt::format("the string {}", value.dump());
    default: return value.dump();
  }
}

/// "malformed JSON: <the parser's words>", without the bracketed tag that says nothing to a user.
[[nodiscard]] inline std::string malformed(const nlohmann::json::exception& e) {
  std::string_view what = e.what();
  if (const std::size_t tag = what.find("] "); tag != std::string_view::npos) what.remove_prefix(tag + 2);
  return fmt::format("malformed JSON: {}", what);
}

/// A JSON integer >= 0, else nullopt (negative, float, string, ...). A signed integer is negative,
/// or -0, which is 0.
[[nodiscard]] inline std::optional<std::uint64_t> as_count(const nlohmann::json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer() && value.get<std::int64_t>() == 0) return 0;
  return std::nullopt;
}

/// Reads `array`, a JSON array of token ids, into `ids`. Returns "" or what is wrong, in core's
/// words for an id outside the one range: "element 3: expected a token id (...), got -1".
[[nodiscard]] inline std::string read_token_ids(const nlohmann::json& array, std::vector<token>& ids) {
  if (!array.is_array()) return fmt::format("expected an array of token ids, got {}", kind_of(array));
  ids.clear();
  for (std::size_t i = 0; i < array.size(); ++i) {
    const std::optional<std::uint64_t> id = as_count(array[i]);
    if (!id || *id > static_cast<std::uint64_t>(max_token_id)) {
      return fmt::format("element {}: {}, got {}", i, token_id_expected, kind_of(array[i]));
    }
    ids.push_back(static_cast<token>(*id));
  }
  return "";
}

}  // namespace pfx::cli
