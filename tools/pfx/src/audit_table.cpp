#include <pfx/cli/audit_table.hpp>
#include <pfx/cli/command.hpp>
#include <pfx/cli/json_kind.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pfx::cli {

using nlohmann::json;

std::vector<TracedRequirement> parse_traced(std::string_view text, std::string_view label) {
  const auto fail = [&](std::string_view message) { throw InputError(fmt::format("{}: {}", label, message)); };
  json document;
  try {
    document = json::parse(text);
  } catch (const json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, ...": the bracketed tag says nothing.
    std::string_view what = e.what();
    if (const std::size_t tag = what.find("] "); tag != std::string_view::npos) what.remove_prefix(tag + 2);
    fail(fmt::format("malformed JSON: {}", what));
  }
  const std::string expected = fmt::format(
      "expected {{\"format\": \"{}\", \"requirements\": [...]}}, the table the tests' build writes ({})", traced_format,
      traced_file_example);
  if (!document.is_object() || !document.contains("format")) fail(fmt::format("not a traceability table: {}", expected));
  if (document["format"] != json(traced_format)) {
    fail(fmt::format("not a traceability table of this program: \"format\" is {}; {}", kind_of(document["format"]),
                     expected));
  }
  if (!document.contains("requirements") || !document["requirements"].is_array()) {
    fail(fmt::format("field \"requirements\": expected an array, got {}",
                     document.contains("requirements") ? kind_of(document["requirements"]) : "nothing"));
  }

  std::vector<TracedRequirement> rows;
  for (const json& row : document["requirements"]) {
    const std::string where = row.is_object() && row.contains("id") && row["id"].is_string()
                                  ? fmt::format("requirements[{}] ({})", rows.size(), row["id"].get<std::string>())
                                  : fmt::format("requirements[{}]", rows.size());
    if (!row.is_object()) fail(fmt::format("{}: expected an object, got {}", where, kind_of(row)));
    for (const auto& [key, value] : row.items()) {
      if (key != "id" && key != "has_row" && key != "enforced_in_core" && key != "tests" && key != "docs") {
        fail(fmt::format("{}: unknown field \"{}\"", where, key));
      }
    }
    // The field `name`, which `ok` accepts; else the message says what was `wanted`.
    const auto field = [&](const char* name, bool (*ok)(const json&), std::string_view wanted) -> const json& {
      const auto found = row.find(name);
      if (found == row.end() || !ok(*found)) {
        fail(fmt::format("{}: field \"{}\": expected {}, got {}", where, name, wanted,
                         found == row.end() ? "nothing" : kind_of(*found)));
      }
      return *found;
    };
    const auto strings = [&](const char* name) {
      const json& list = field(name, [](const json& v) { return v.is_array(); }, "an array of strings");
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (!list[i].is_string()) {
          fail(fmt::format("{}: field \"{}\": element {} is {}, expected a string", where, name, i, kind_of(list[i])));
        }
      }
      return list.get<std::vector<std::string>>();
    };
    TracedRequirement traced;
    traced.id = field("id", [](const json& v) { return v.is_string() && !v.get_ref<const std::string&>().empty(); },
                      "a requirement ID").get<std::string>();
    traced.has_row = field("has_row", [](const json& v) { return v.is_boolean(); }, "true or false").get<bool>();
    traced.enforced_in_core = field("enforced_in_core", [](const json& v) { return v.is_string(); }, "a string").get<std::string>();
    if (std::any_of(rows.begin(), rows.end(), [&](const TracedRequirement& r) { return r.id == traced.id; })) {
      fail(fmt::format("{}: {} has a second row", where, traced.id));
    }
    traced.tests = strings("tests");
    traced.docs = strings("docs");
    rows.push_back(std::move(traced));
  }
  return rows;
}

std::vector<TracedRequirement> read_traced(const std::string& path) {
  const std::string label = fmt::format("--traceability {}", path);
  std::error_code ec;
  // A directory opens as a stream on Linux and reads as empty text: say what it is instead.
  if (std::filesystem::is_directory(path, ec)) throw InputError(label + ": cannot read the file: it is a directory");
  std::ifstream in(path);
  if (!in) {
    throw InputError(fmt::format("{}: cannot read the file ({}); the tests' build writes the table to {}", label,
                                 std::strerror(errno), traced_file_example));
  }
  std::ostringstream all;
  all << in.rdbuf();
  if (in.bad()) throw InputError(fmt::format("{}: cannot read the file ({})", label, std::strerror(errno)));
  const std::string text = all.str();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw InputError(label + ": the file is empty");
  return parse_traced(text, label);
}

std::vector<std::string> TracedRequirement::problems() const {
  std::vector<std::string> out;
  if (!has_row) out.push_back(fmt::format("no row in the \"Requirements\" table of {}", traceability_doc));
  if (tests.empty()) out.push_back(fmt::format("no test in the \"Test index\" of {}", traceability_doc));
  return out;
}

std::vector<TracedRequirement> traceability_table(std::vector<TracedRequirement> ids,
                                                  std::span<const TracedRequirement> traced) {
  for (TracedRequirement& row : ids) {
    const auto found =
        std::find_if(traced.begin(), traced.end(), [&](const TracedRequirement& t) { return t.id == row.id; });
    if (found == traced.end()) continue;
    row.has_row = found->has_row;
    row.enforced_in_core = found->enforced_in_core;
    row.tests = found->tests;
    row.docs = found->docs;
  }
  return ids;
}

}  // namespace pfx::cli
