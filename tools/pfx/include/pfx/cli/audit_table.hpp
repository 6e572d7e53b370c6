#pragma once

/// \file
/// The traceability table `pfx audit --traceability FILE` checks and prints: for each requirement ID,
/// where core/ enforces it, which tests verify it and which sections of docs/ name it. The program
/// is built without it: the tests' build generates it from the tests' tags, the catalogue and
/// proptest/traceability/enforcement.txt, the same source as docs/traceability.md, and writes it to
/// build/<preset>/traceability/traced.json, which the audit reads at run time.

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pfx::cli {

/// The document the table is generated with, as messages name it.
inline constexpr std::string_view traceability_doc = "docs/traceability.md";
/// Where the tests' build of the default preset writes the table, as messages suggest it.
inline constexpr std::string_view traced_file_example = "build/default/traceability/traced.json";
/// The "format" of the file: {"format": "pfx traceability 1", "requirements": [{"id", "has_row",
/// "enforced_in_core", "tests", "docs"}, ...]} (docs/cli.md, "pfx audit"; the generator,
/// proptest/traceability/traceability.hpp, writes the same).
inline constexpr std::string_view traced_format = "pfx traceability 1";

/// One ID as the tests' build traced it.
struct TracedRequirement {
  std::string_view id;
  bool has_row = false;                    ///< enforcement.txt has its block
  std::string_view enforced_in_core;       ///< that block's "enforced", as plain text
  std::span<const std::string_view> tests; ///< "Suite.Name" of each test whose tag names it
  std::span<const std::string_view> docs;  ///< "docs/spec.md#invariants" for each section that names it
};

/// A traceability table read from a file; it holds the text its rows view, so copies share it.
class TracedTable {
 public:
  [[nodiscard]] std::span<const TracedRequirement> rows() const noexcept;

 private:
  struct Storage;
  friend TracedTable parse_traced(std::string_view text, std::string_view label);
  std::shared_ptr<const Storage> storage_;
};

/// The table in `text`, the content of a traced.json; `label` names it in messages ("--traceability
/// FILE"). Throws InputError naming the label and the problem: malformed JSON, not a traceability
/// table (no "format" of traced_format), a row without an ID or a field of the wrong type, an ID
/// twice.
[[nodiscard]] TracedTable parse_traced(std::string_view text, std::string_view label);

/// The table in the file at `path`. Throws InputError ("--traceability PATH: ...") for a file that
/// cannot be read, is empty or a directory, and for what parse_traced refuses.
[[nodiscard]] TracedTable read_traced(const std::string& path);

/// A requirement as code states it: an INV of the catalogue, or an entry of spec::requirements.
struct RequirementId {
  std::string id;
  std::string statement;
};

/// One ID's row of the table.
struct TraceabilityEntry {
  std::string id;
  std::string statement;
  bool has_row = false;            ///< the generated "Requirements" table has a row for it
  std::string enforced_in_core;    ///< that row's "enforced in core" cell, as plain text
  std::vector<std::string> tests;  ///< "Suite.Name" of each test the "Test index" lists for it
  std::vector<std::string> docs;   ///< "docs/spec.md#invariants" for each section that names it

  /// What is missing ("no row in ...", "no test in ..."); empty when the row is complete.
  [[nodiscard]] std::vector<std::string> problems() const;
};

/// The table for `ids`, in their order, from `traced`. An ID that `traced` lacks has no row and no
/// test; IDs named in no doc get no docs entry, which is not a problem: the table says so.
[[nodiscard]] std::vector<TraceabilityEntry> traceability_table(std::span<const RequirementId> ids,
                                                                std::span<const TracedRequirement> traced);

}  // namespace pfx::cli
