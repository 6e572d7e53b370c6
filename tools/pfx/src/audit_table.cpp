#include <pfx/cli/audit_table.hpp>
#include <pfx/cli/command.hpp>
#include <pfx/cli/json_kind.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <tuple>

namespace pfx::cli {

using nlohmann::json;

std::vector<TracedRequirement> parse_traced(std::string_view text, std::string_view label) {
  const auto fail = [&](std::string_view message) { throw InputError(fmt::format("{}: {}", label, message)); };
  json document;
  try {
    document = json::parse(text);
  } catch (const json::exception& e) {
    fail(malformed(e));
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

  // A row's fields, in the order they are checked, with the type each must have.
  const std::array<std::tuple<std::string_view, json::value_t, std::string_view>, 5> fields{
      {{"id", json::value_t::string, "a requirement ID"},
       {"has_row", json::value_t::boolean, "true or false"},
       {"enforced_in_core", json::value_t::string, "a string"},
       {"tests", json::value_t::array, "an array of strings"},
       {"docs", json::value_t::array, "an array of strings"}}};
  std::vector<TracedRequirement> rows;
  for (const json& row : document["requirements"]) {
    const json id = row.is_object() ? row.value("id", json()) : json();
    const std::string where =
        fmt::format("requirements[{}]{}", rows.size(), id.is_string() ? fmt::format(" ({})", id.get<std::string>()) : "");
    if (!row.is_object()) fail(fmt::format("{}: expected an object, got {}", where, kind_of(row)));
    for (const auto& item : row.items()) {
      if (std::none_of(fields.begin(), fields.end(), [&](const auto& f) { return std::get<0>(f) == item.key(); })) {
        fail(fmt::format("{}: unknown field \"{}\"", where, item.key()));
      }
    }
    for (const auto& [name, type, wanted] : fields) {
      const auto found = row.find(name);
      if (found == row.end() || found->type() != type || (name == "id" && id == "")) {
        fail(fmt::format("{}: field \"{}\": expected {}, got {}", where, name, wanted,
                         found == row.end() ? "nothing" : kind_of(*found)));
      }
      for (std::size_t i = 0; type == json::value_t::array && i < found->size(); ++i) {
        if (!(*found)[i].is_string()) {
          fail(fmt::format("{}: field \"{}\": element {} is {}, expected a string", where, name, i, kind_of((*found)[i])));
        }
      }
    }
    if (std::any_of(rows.begin(), rows.end(), [&](const TracedRequirement& r) { return r.id == id; })) {
      fail(fmt::format("{}: {} has a second row", where, id.get<std::string>()));
    }
    rows.push_back({id.get<std::string>(), row["has_row"].get<bool>(), row["enforced_in_core"].get<std::string>(),
                    row["tests"].get<std::vector<std::string>>(), row["docs"].get<std::vector<std::string>>(), ""});
  }
  return rows;
}

std::vector<TracedRequirement> read_traced(const std::string& path) {
  const std::string label = fmt::format("--traceability {}", path);
  const std::string text =
      read_file(label, path, fmt::format("; the tests' build writes the table to {}", traced_file_example));
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
