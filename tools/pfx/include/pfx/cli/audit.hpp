#pragma once

/// \file
/// `pfx audit` (docs/cli.md, "pfx audit"): checks the invariant catalogue INV-1..11 at run time, on
/// the bounded exhaustive domain of spec/refinement/include/pfx/refinement/exhaustive_proof.hpp, on
/// seeded random protocol runs, and with the bounded model checker (model_checker.hpp: SAFE against
/// the ghost state); says what each covered, and with which compiler and flags it was built; then,
/// given the table the tests' build writes (--traceability FILE, audit_table.hpp), prints it and
/// checks that every requirement ID has a row and a test. Exits exit_mismatch on any violation, and,
/// with the table, on any ID without a row or a test. Without it the audit says "traceability: not
/// checked" and never "every check passed"; its exit status then covers the checks that ran.

#include <pfx/cli/audit_table.hpp>
#include <pfx/cli/command.hpp>

#include <pfx/refinement/exhaustive_proof.hpp>
#include <pfx/refinement/model_checker.hpp>
#include <pfx/refinement/random_runs.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace pfx::cli {

/// Random cases run by default: 2.4 million steps, about as many as the exhaustive part; the whole
/// audit then takes about a second in an optimized build.
inline constexpr std::size_t default_audit_cases = 100000;
/// Events per random case.
inline constexpr std::size_t audit_events_per_case = 24;

struct AuditOptions {
  std::uint64_t seed = 0;
  std::size_t cases = default_audit_cases;
  /// Longest sequence of the exhaustive protocol domain (the rule's is always 5), and how many
  /// requests deep the model checker goes. 3 by default, as in proptest/core/exhaustive_test.cpp and
  /// model_checker_test.cpp; 2 is the compile-time proofs' domain and much faster.
  std::size_t protocol_length = 3;
  /// The exhaustive rule proof's domain and the model checker's (whose depth is protocol_length). The
  /// command line always checks the documented ones; tests under the sanitizers, where the rule proof
  /// alone takes 40 s, take smaller ones and still see the checks' text and verdicts.
  refinement::Domain rule = refinement::run_time_rule_domain;
  refinement::ModelDomain model = refinement::model_domain;
  bool json = false;
  bool no_progress = false;  ///< no progress line on a terminal
  /// The folder of the suite's test reports (build/<preset>/proptest/results after ctest); when
  /// given, the audit says for each ID which tests ran and passed, and fails when one failed or none
  /// passed. Empty: not read.
  std::string results;
  /// The traceability table the tests' build writes (build/<preset>/traceability/traced.json); when
  /// given, the audit prints it and fails on an ID without a row or a test. Empty: not read, and the
  /// audit says the table was not checked.
  std::string traceability;
  /// How each random step is taken; tests substitute a broken one.
  refinement::Stepper step = refinement::step_both;
  /// A table to check instead of the file's (which is then not read); tests substitute an incomplete
  /// one. Unset: the table of `traceability`, if any.
  std::optional<std::span<const TracedRequirement>> traced;
};

/// Runs the audit and writes its report to `streams.out` (text, or JSON with options.json).
/// Returns exit_ok when every check that ran passed (with a table: and every ID has a row and a
/// test), else exit_mismatch; a failure of the random runs is reported with the first counterexample
/// and `pfx audit --seed S`. Throws InputError, before any check runs, for a table or results folder
/// that cannot be read.
[[nodiscard]] int run_audit(const AuditOptions& options, const Streams& streams);

/// Every ID the audit traces: INV-1..11 of the catalogue, then spec::requirements, with statements.
[[nodiscard]] std::vector<RequirementId> audited_ids();

}  // namespace pfx::cli
