#pragma once

/// \file
/// The traceability table `pfx audit --traceability FILE` checks and prints: for each requirement ID,
/// where core/ enforces it, which tests verify it and which sections of docs/ name it. The program
/// is built without it: the tests' build generates it from the tests' tags, the catalogue and
/// verification/traceability/enforcement.txt, the same source as docs/traceability.md, and writes it to
/// build/<preset>/traceability/traced.json, which the audit reads at run time.

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
/// verification/traceability/traceability.hpp, writes the same).
inline constexpr std::string_view traced_format = "pfx traceability 1";

/// One requirement ID: its row as the tests' build traced it, and its statement as code states it.
struct TracedRequirement {
  std::string id;
  bool has_row = false;             ///< enforcement.txt has its block
  std::string enforced_in_core;     ///< that block's "enforced", as plain text
  std::vector<std::string> tests;   ///< "Suite.Name" of each test whose tag names it
  std::vector<std::string> docs;    ///< "docs/spec.md#invariants" for each section that names it
  std::string statement;            ///< not in the file: the program's own (audited_ids)

  /// What is missing ("no row in ...", "no test in ..."); empty when the row is complete.
  [[nodiscard]] std::vector<std::string> problems() const;
};

/// The rows in `text`, the content of a traced.json; `label` names it in messages ("--traceability
/// FILE"). Throws InputError naming the label and the problem: malformed JSON, not a traceability
/// table (no "format" of traced_format), a row without an ID or a field of the wrong type, an ID
/// twice.
[[nodiscard]] std::vector<TracedRequirement> parse_traced(std::string_view text, std::string_view label);

/// The rows of the file at `path`. Throws InputError ("--traceability PATH: ...") for a file that
/// cannot be read, is empty or a directory, and for what parse_traced refuses.
[[nodiscard]] std::vector<TracedRequirement> read_traced(const std::string& path);

/// `ids` (id and statement), in their order, each with its row of `traced`. An ID that `traced`
/// lacks has no row and no test; IDs named in no doc get no docs entry, which is not a problem.
[[nodiscard]] std::vector<TracedRequirement> traceability_table(std::vector<TracedRequirement> ids,
                                                                std::span<const TracedRequirement> traced);

}  // namespace pfx::cli
