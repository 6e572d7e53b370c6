#pragma once

/// \file
/// `pfx audit` (docs/cli.md, "pfx audit"): checks the invariant catalogue INV-1..12 at run time, on
/// the bounded exhaustive domains (pfx/refinement/exhaustive_proof.hpp), on seeded random protocol
/// runs and with the bounded model checker (SAFE against the ghost state); then, given the table the
/// tests' build writes (--traceability FILE, audit_table.hpp), prints it and checks that every
/// requirement ID has a row and a test. Without it the audit says "traceability: not checked" and
/// never "every check passed"; its exit status then covers the checks that ran.

#include <pfx/cli/audit_table.hpp>
#include <pfx/cli/command.hpp>

#include <pfx/refinement/exhaustive_proof.hpp>
#include <pfx/refinement/model_checker.hpp>
#include <pfx/refinement/random_runs.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pfx::cli {

/// Random cases run by default: 2.4 million steps, about as many as the exhaustive part; the whole
/// audit then takes about a second in an optimized build.
inline constexpr std::size_t default_audit_cases = 100000;
/// Events per random case.
inline constexpr std::size_t audit_events_per_case = 24;

struct AuditOptions {
  std::uint64_t seed = 0;
  std::size_t cases = default_audit_cases;
  /// Longest sequence of the exhaustive protocol domain; 2 is the compile-time proofs' domain and
  /// much faster. The model checker's depth is model.max_requests.
  std::size_t protocol_length = 3;
  /// The command line checks the documented domains; tests under the sanitizers, where the rule
  /// proof alone takes 40 s, take smaller ones (and a shallower model).
  refinement::Domain rule = refinement::run_time_rule_domain;
  refinement::ModelDomain model = refinement::model_domain;
  bool json = false;
  bool no_progress = false;  ///< no progress line on a terminal
  /// The suite's test reports (build/<preset>/proptest/results after ctest); empty: not read.
  std::string results;
  /// The table the tests' build writes (build/<preset>/traceability/traced.json); empty: not read.
  std::string traceability;
  /// How each random step is taken; tests substitute a broken one.
  refinement::Stepper step = refinement::step_both;
  /// A table to check instead of the file's (which is then not read); tests substitute an incomplete
  /// one. Unset: the table of `traceability`, if any.
  std::optional<std::vector<TracedRequirement>> traced;
};

/// Runs the audit and writes its report to `streams.out` (text, or JSON with options.json).
/// Returns exit_ok when every check that ran passed (with a table: and every ID has a row and a
/// test), else exit_mismatch. Throws InputError, before any check runs, for a table or results
/// folder that cannot be read.
[[nodiscard]] int run_audit(const AuditOptions& options, const Streams& streams);

/// Every ID the audit traces: INV-1..12 of the catalogue, then spec::requirements; each with its
/// id and statement only, which traceability_table completes.
[[nodiscard]] std::vector<TracedRequirement> audited_ids();

}  // namespace pfx::cli
