#pragma once

/// \file
/// The per-test index of docs/traceability.md ("The same information by test"): one row
/// "| `Suite.Name` | INV-1 INV-2 |" per test. The requirements check compares it with what the tests
/// record, and `pfx audit` prints it by ID, so both read it through this one parser.

#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace pfx::test {

struct IndexRow {
  std::string test;              ///< "Suite.Name"
  std::vector<std::string> ids;  ///< as listed
};

/// Every index row of `markdown`, in the document's order; other lines are skipped.
inline std::vector<IndexRow> test_index_rows(std::string_view markdown) {
  const std::regex row(R"(^\| `([A-Za-z0-9_]+\.[A-Za-z0-9_]+)` \| ([A-Z0-9 -]+) \|$)");
  std::vector<IndexRow> rows;
  std::istringstream lines{std::string(markdown)};
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    IndexRow r{m[1].str(), {}};
    std::istringstream words(m[2].str());
    for (std::string id; words >> id;) r.ids.push_back(id);
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace pfx::test
