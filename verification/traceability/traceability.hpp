#pragma once

/// \file
/// The traceability table from one source (docs/traceability.md, "How the table is kept honest"):
/// the requirement tags of the tests (`PFX_PROPERTY(Suite, Name, "IDs", ...)` and
/// `pfx::test::verifies("IDs")` in proptest/**/*.cpp, `@verifies("IDs")` in proptest/python/*.py),
/// the catalogue and spec::requirements, and enforcement.txt (where core enforces each ID). The tests'
/// build runs generate_traceability.cpp over them; these are its parts, so that the tests can check
/// them.

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pfx::traceability {

/// A test and the IDs its tag names, in the tag's order.
struct Tag {
  std::string test;              ///< "Suite.Name", as the test's report names it
  std::vector<std::string> ids;  ///< "INV-1", "CLI-3", ...
  std::string where;             ///< "file:line" of the tag, for messages
};

/// The tags of a C++ test file: each `TEST(Suite, Name)` whose body calls `verifies("...")`, and each
/// `PFX_PROPERTY(Suite, Name, "...", ...)`, in the file's order.
[[nodiscard]] std::vector<Tag> cpp_tags(std::string_view text, std::string_view file);

/// The tags of a Python test module: `@verifies("...")` before `def test_name` in `class Suite`, named
/// as proptest/python/run_tests.py names them in its report ("Suite.Name" in the C++ style).
[[nodiscard]] std::vector<Tag> python_tags(std::string_view text, std::string_view file);

/// A document of docs/, its path in the tree ("docs/spec.md") and its text.
struct Doc {
  std::string path;
  std::string text;
};

/// "docs/spec.md#section" for each section of `docs` that names `id` itself ("INV-1" is not named by
/// "INV-10" or "INV-1..5"), outside code blocks, in the documents' order.
[[nodiscard]] std::vector<std::string> sections_naming(std::string_view id, std::span<const Doc> docs);

/// Where one ID is enforced and proved, and what else verifies it (enforcement.txt).
struct Note {
  std::string enforced;
  std::string evidence;  ///< may be empty
  std::string proofs;
};

/// enforcement.txt: blocks of "ID: X", "enforced: ...", "evidence: ..." (optional), "proofs: ...";
/// lines that start with # are comments. Throws std::runtime_error naming the line of a malformed one.
[[nodiscard]] std::map<std::string, Note, std::less<>> read_notes(std::string_view text);

/// A requirement: an INV of the catalogue or an entry of spec::requirements.
struct Requirement {
  std::string id;
  std::string statement;
};

/// The "Requirements" table of docs/traceability.md: one row per requirement, with its note and the
/// tests whose tags name it. A requirement without a note or without a test says so in its row.
[[nodiscard]] std::string requirements_table(std::span<const Requirement> requirements,
                                             const std::map<std::string, Note, std::less<>>& notes,
                                             std::span<const Tag> tags);

/// The "Test index" table: each tagged test and its IDs.
[[nodiscard]] std::string test_index(std::span<const Tag> tags);

/// The same index for the requirements check: "Suite.Name<TAB>ID ID\n" per test
/// (spec/refinement/include/pfx/refinement/test_index.hpp reads it).
[[nodiscard]] std::string index_lines(std::span<const Tag> tags);

/// The "format" of the table traced_json writes; `pfx audit --traceability` refuses a file without it
/// (tools/pfx/include/pfx/cli/audit_table.hpp, which cannot include this header, says it too).
inline constexpr std::string_view traced_format = "pfx traceability 1";

/// The table `pfx audit --traceability FILE` reads at run time (traceability/traced.json in the build
/// tree): {"format": traced_format, "requirements": [{"id", "has_row", "enforced_in_core", "tests",
/// "docs"}, ...]}, one requirement per line, with each note's text as plain text.
[[nodiscard]] std::string traced_json(std::span<const Requirement> requirements,
                                      const std::map<std::string, Note, std::less<>>& notes,
                                      std::span<const Tag> tags, std::span<const Doc> docs);

/// A Markdown cell as plain text for a terminal: no backticks, "<br>" as "; ".
[[nodiscard]] std::string plain(std::string_view cell);

}  // namespace pfx::traceability
