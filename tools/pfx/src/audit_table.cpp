#include <pfx/cli/audit_table.hpp>

#include <pfx/conformance/test_index.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <map>

namespace pfx::cli {
namespace {

/// One line of a document and the heading of the section it is in.
struct Line {
  std::string heading;  ///< "" before the first heading
  std::string_view text;
};

/// The lines of `text` outside fenced code blocks, each with its section's heading (so that
/// `#include` in a code block is not taken for a heading).
std::vector<Line> lines_of(std::string_view text) {
  std::vector<Line> lines;
  std::string heading;
  bool in_code = false;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    if (line.starts_with("```")) {
      in_code = !in_code;
      continue;
    }
    if (in_code) continue;
    if (line.starts_with("#")) {
      const std::size_t start = line.find_first_not_of("# ");
      heading = start == std::string_view::npos ? "" : std::string(line.substr(start));
    }
    lines.push_back({heading, line});  // a heading is a line of its own section
  }
  return lines;
}

std::string_view trim(std::string_view s) {
  const std::size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

/// The cells of a Markdown table row ("| a | b |" -> {"a", "b"}); empty for other lines.
std::vector<std::string_view> cells_of(std::string_view row) {
  row = trim(row);
  if (!row.starts_with('|')) return {};
  row.remove_prefix(1);
  if (row.ends_with('|')) row.remove_suffix(1);
  std::vector<std::string_view> cells;
  while (true) {
    const std::size_t bar = row.find('|');
    cells.push_back(trim(row.substr(0, bar)));
    if (bar == std::string_view::npos) break;
    row.remove_prefix(bar + 1);
  }
  return cells;
}

/// A cell as plain text for a terminal: no backticks, line breaks as "; ".
std::string plain(std::string_view cell) {
  std::string out;
  while (!cell.empty()) {
    if (cell.starts_with("<br>")) {
      out += "; ";
      cell.remove_prefix(4);
      continue;
    }
    if (cell.front() != '`') out += cell.front();
    cell.remove_prefix(1);
  }
  return out;
}

/// Whether `line` names `id` itself: "INV-1" names INV-1, but "INV-10" and "INV-1..5" do not.
bool names(std::string_view line, std::string_view id) {
  for (std::size_t at = line.find(id); at != std::string_view::npos; at = line.find(id, at + 1)) {
    const bool starts = at == 0 || (std::isalnum(static_cast<unsigned char>(line[at - 1])) == 0 &&
                                    line[at - 1] != '-');
    const std::string_view rest = line.substr(at + id.size());
    const bool ends = rest.empty() || (std::isalnum(static_cast<unsigned char>(rest.front())) == 0 &&
                                       !rest.starts_with(".."));
    if (starts && ends) return true;
  }
  return false;
}

/// The anchor GitHub gives a heading: "What THM-1 requires" -> "what-thm-1-requires".
std::string anchor(std::string_view heading) {
  std::string out;
  for (const char c : heading) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '-' || c == '_') out += static_cast<char>(std::tolower(u));
    if (c == ' ') out += '-';
  }
  return out;
}

/// ID -> the "enforced in core" cell of its row in the "Requirements" table.
std::map<std::string, std::string, std::less<>> requirement_rows(const std::vector<Line>& lines) {
  std::map<std::string, std::string, std::less<>> rows;
  std::size_t id_column = 0;
  std::size_t core_column = std::string_view::npos;
  bool header_seen = false;
  for (const Line& line : lines) {
    if (line.heading != "Requirements") continue;
    const std::vector<std::string_view> cells = cells_of(line.text);
    if (cells.empty()) continue;
    if (!header_seen) {  // the first row names the columns, so a column added later is harmless
      header_seen = true;
      for (std::size_t i = 0; i < cells.size(); ++i) {
        if (cells[i] == "ID") id_column = i;
        if (cells[i] == "enforced in core") core_column = i;
      }
      continue;
    }
    if (cells.size() <= id_column || cells[id_column].starts_with("--")) continue;
    const std::string_view core = core_column < cells.size() ? cells[core_column] : "";
    rows[std::string(cells[id_column])] = plain(core);
  }
  return rows;
}

}  // namespace

std::vector<std::string> TraceabilityEntry::problems() const {
  std::vector<std::string> out;
  if (!has_row) out.push_back(fmt::format("no row in the \"Requirements\" table of {}", traceability_doc));
  if (tests.empty()) out.push_back(fmt::format("no test in the \"Test index\" of {}", traceability_doc));
  return out;
}

std::vector<TraceabilityEntry> traceability_table(std::span<const RequirementId> ids,
                                                  std::span<const EmbeddedDoc> docs) {
  std::map<std::string, std::string, std::less<>> rows;
  std::map<std::string, std::vector<std::string>, std::less<>> tests;
  std::vector<std::pair<std::string_view, std::vector<Line>>> others;
  for (const EmbeddedDoc& doc : docs) {
    std::vector<Line> lines = lines_of(doc.text);
    if (doc.path == traceability_doc) {
      rows = requirement_rows(lines);
      for (const test::IndexRow& row : test::test_index_rows(doc.text)) {  // the requirements check's parser
        for (const std::string& id : row.ids) tests[id].push_back(row.test);
      }
    } else {
      others.emplace_back(doc.path, std::move(lines));
    }
  }

  std::vector<TraceabilityEntry> table;
  for (const RequirementId& requirement : ids) {
    TraceabilityEntry entry;
    entry.id = requirement.id;
    entry.statement = requirement.statement;
    if (const auto row = rows.find(requirement.id); row != rows.end()) {
      entry.has_row = true;
      entry.enforced_in_core = row->second;
    }
    if (const auto found = tests.find(requirement.id); found != tests.end()) entry.tests = found->second;
    for (const auto& [path, lines] : others) {
      for (const Line& line : lines) {
        if (!names(line.text, requirement.id)) continue;
        const std::string where = line.heading.empty() ? std::string(path)
                                                       : fmt::format("{}#{}", path, anchor(line.heading));
        if (std::find(entry.docs.begin(), entry.docs.end(), where) == entry.docs.end()) {
          entry.docs.push_back(where);
        }
      }
    }
    table.push_back(std::move(entry));
  }
  return table;
}

}  // namespace pfx::cli
