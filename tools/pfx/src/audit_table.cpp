#include <pfx/cli/audit_table.hpp>
#include <pfx/cli/command.hpp>
#include <pfx/cli/json_kind.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

namespace pfx::cli {

/// The text the rows view: deques, so that a string or list once added never moves.
struct TracedTable::Storage {
  std::deque<std::string> text;
  std::deque<std::vector<std::string_view>> lists;
  std::vector<TracedRequirement> rows;
};

std::span<const TracedRequirement> TracedTable::rows() const noexcept {
  if (!storage_) return {};
  return storage_->rows;
}

using nlohmann::json;

TracedTable parse_traced(std::string_view text, std::string_view label) {
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
  if (!document["format"].is_string() || document["format"].get<std::string>() != traced_format) {
    fail(fmt::format("not a traceability table of this program: \"format\" is {}; {}", kind_of(document["format"]),
                     expected));
  }
  if (!document.contains("requirements") || !document["requirements"].is_array()) {
    fail(fmt::format("field \"requirements\": expected an array, got {}",
                     document.contains("requirements") ? kind_of(document["requirements"]) : "nothing"));
  }

  auto storage = std::make_shared<TracedTable::Storage>();
  const auto keep = [&](std::string value) -> std::string_view { return storage->text.emplace_back(std::move(value)); };
  std::set<std::string, std::less<>> seen;
  std::size_t index = 0;
  for (const json& row : document["requirements"]) {
    const std::string where = row.is_object() && row.contains("id") && row["id"].is_string()
                                  ? fmt::format("requirements[{}] ({})", index, row["id"].get<std::string>())
                                  : fmt::format("requirements[{}]", index);
    const auto field_fail = [&](std::string_view field, std::string_view wanted) {
      fail(fmt::format("{}: field \"{}\": expected {}, got {}", where, field, wanted,
                       row.contains(field) ? kind_of(row[std::string(field)]) : "nothing"));
    };
    if (!row.is_object()) fail(fmt::format("{}: expected an object, got {}", where, kind_of(row)));
    for (const auto& [key, value] : row.items()) {
      if (key != "id" && key != "has_row" && key != "enforced_in_core" && key != "tests" && key != "docs") {
        fail(fmt::format("{}: unknown field \"{}\"", where, key));
      }
    }
    if (!row.contains("id") || !row["id"].is_string() || row["id"].get<std::string>().empty()) {
      field_fail("id", "a requirement ID");
    }
    if (!row.contains("has_row") || !row["has_row"].is_boolean()) field_fail("has_row", "true or false");
    if (!row.contains("enforced_in_core") || !row["enforced_in_core"].is_string()) field_fail("enforced_in_core", "a string");
    const auto strings = [&](const char* field) -> std::span<const std::string_view> {
      if (!row.contains(field) || !row[field].is_array()) field_fail(field, "an array of strings");
      std::vector<std::string_view>& list = storage->lists.emplace_back();
      for (std::size_t i = 0; i < row[field].size(); ++i) {
        const json& item = row[field][i];
        if (!item.is_string()) {
          fail(fmt::format("{}: field \"{}\": element {} is {}, expected a string", where, field, i, kind_of(item)));
        }
        list.push_back(keep(item.get<std::string>()));
      }
      return list;
    };
    const std::string id = row["id"].get<std::string>();
    if (!seen.insert(id).second) fail(fmt::format("{}: {} has a second row", where, id));
    TracedRequirement traced;
    traced.id = keep(id);
    traced.has_row = row["has_row"].get<bool>();
    traced.enforced_in_core = keep(row["enforced_in_core"].get<std::string>());
    traced.tests = strings("tests");
    traced.docs = strings("docs");
    storage->rows.push_back(traced);
    ++index;
  }
  TracedTable table;
  table.storage_ = std::move(storage);
  return table;
}

TracedTable read_traced(const std::string& path) {
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

std::vector<std::string> TraceabilityEntry::problems() const {
  std::vector<std::string> out;
  if (!has_row) out.push_back(fmt::format("no row in the \"Requirements\" table of {}", traceability_doc));
  if (tests.empty()) out.push_back(fmt::format("no test in the \"Test index\" of {}", traceability_doc));
  return out;
}

std::vector<TraceabilityEntry> traceability_table(std::span<const RequirementId> ids,
                                                  std::span<const TracedRequirement> traced) {
  std::vector<TraceabilityEntry> table;
  for (const RequirementId& requirement : ids) {
    TraceabilityEntry entry{requirement.id, requirement.statement, false, "", {}, {}};
    const auto found = std::find_if(traced.begin(), traced.end(),
                                    [&](const TracedRequirement& t) { return t.id == requirement.id; });
    if (found != traced.end()) {
      entry.has_row = found->has_row;
      entry.enforced_in_core = found->enforced_in_core;
      entry.tests.assign(found->tests.begin(), found->tests.end());
      entry.docs.assign(found->docs.begin(), found->docs.end());
    }
    table.push_back(std::move(entry));
  }
  return table;
}

}  // namespace pfx::cli
