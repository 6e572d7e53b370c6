// pfx audit: the invariant catalogue checked at run time, and the traceability table the tests' build
// writes, read at run time when given.

#include <pfx/cli/audit.hpp>
#include <pfx/cli/interrupt.hpp>
#include <pfx/cli/command.hpp>
#include <pfx/cli/progress.hpp>

#include <pfx/refinement/describe.hpp>
#include <pfx/refinement/exhaustive_proof.hpp>
#include <pfx/refinement/model_checker.hpp>
#include <pfx/refinement/test_reports.hpp>

#include <pfx/spec/catalogue.hpp>
#include <pfx/spec/requirements.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace pfx::cli {
namespace {

using nlohmann::json;
using refinement::describe;  // the one describe() of events, states and answers

/// One check of the catalogue: what it covered, how many steps it checked, how many failed, and the
/// first counterexample in words (empty when none failed).
struct Check {
  std::string name;
  std::string domain;
  std::size_t checked = 0;
  std::size_t failed = 0;
  std::string coverage;  ///< what the checked steps reached, beyond their number
  std::vector<std::string> counterexample;
  json counterexample_json;  ///< null when none failed
  /// The model checker's counts by depth and whether its reachable set is closed (only it has them):
  /// a search that silently explores less, or a fixpoint that is not one, shows here.
  std::vector<std::string> details;
  json details_json;  ///< null but for the model checker
};

/// A bounded exhaustive proof's result (spec/refinement/include/pfx/refinement/exhaustive_proof.hpp), every step of which was
/// compared with the reference model and checked against INV-1..10.
Check exhaustive(std::string name, std::string domain, const refinement::Tally& t) {
  Check check{std::move(name), std::move(domain), t.checked, t.failed,
              fmt::format("{} decisions granted a non-zero offset", t.granted), {}, nullptr, {}, nullptr};
  if (t.failed == 0) return check;
  check.counterexample.push_back(fmt::format(
      "config enabled={} keep_min={} chunk={}; record ids={} canonical_end={}; prompt={}; event #{} of the case",
      t.config.enabled, t.config.keep_min, t.config.chunk, describe(t.ids), t.canonical_end, describe(t.prompt),
      t.event));
  check.counterexample_json = {{"config", {{"enabled", t.config.enabled}, {"keep_min", t.config.keep_min},
                                           {"chunk", t.config.chunk}}},
                               {"ids", t.ids},
                               {"canonical_end", t.canonical_end},
                               {"prompt", t.prompt},
                               {"event", t.event}};
  return check;
}

std::string statement_of(std::string_view id) {
  std::string out;
  spec::for_each_invariant([&](const auto& inv) {
    if (inv.id == id) out = fmt::format("{} ({})", inv.statement, inv.name);
  });
  return out;
}

std::string replay_command(const AuditOptions& options) {
  std::string command = fmt::format("pfx audit --seed {}", options.seed);
  if (options.cases != default_audit_cases) command += fmt::format(" --cases {}", options.cases);
  return command;
}

/// The random runs' result; a failure is told with the events of its case, so that it can be read
/// without replaying. `before_case` may stop the runs between two cases (a signal).
Check random_runs(const AuditOptions& options, const refinement::CaseHook& before_case) {
  const refinement::RandomRunsReport r =
      refinement::run_random_cases(options.seed, options.cases, audit_events_per_case, options.step, before_case);
  Check check{"random",
              r.stopped ? fmt::format("{} of {} runs of {} events, seed {} (interrupted)", r.cases, options.cases,
                                      audit_events_per_case, options.seed)
                        : fmt::format("{} runs of {} events, seed {}", options.cases, audit_events_per_case, options.seed),
              r.steps,
              r.failed,
              refinement::random_ranges(),
              {},
              nullptr,
              {},
              nullptr};
  if (!r.first) return check;
  const refinement::RandomRunFailure& f = *r.first;
  const refinement::Comparison& c = f.comparison;
  std::vector<std::string>& lines = check.counterexample;
  lines.push_back(fmt::format("case {}, event {} of seed {}:", f.case_index + 1, f.step_index + 1, options.seed));
  std::vector<std::string> events;
  for (std::size_t i = 0; i < f.events.size(); ++i) {
    events.push_back(describe(f.events[i]));
    lines.push_back(fmt::format("  {:>2}. {}{}", i + 1, events.back(), i + 1 == f.events.size() ? "   <- fails" : ""));
  }
  lines.push_back(fmt::format("state before: {}", describe(f.before)));
  lines.push_back(fmt::format("machine answered:   {}", describe(c.machine)));
  lines.push_back(fmt::format("reference answered: {}", describe(c.reference)));
  if (!c.violated.empty()) {
    lines.push_back(fmt::format("violates {}: {}", c.violated, statement_of(c.violated)));
  }
  if (!c.states_agree) {
    lines.push_back(fmt::format("state after, machine:   {}", describe(f.machine_after)));
    lines.push_back(fmt::format("state after, reference: {}", describe(f.model_after)));
  }
  lines.push_back(fmt::format("replay: {}", replay_command(options)));
  check.counterexample_json = {{"case", f.case_index + 1},
                               {"event", f.step_index + 1},
                               {"events", events},
                               {"state_before", describe(f.before)},
                               {"machine", describe(c.machine)},
                               {"reference", describe(c.reference)},
                               {"violated", std::string(c.violated)},
                               {"states_agree", c.states_agree},
                               {"replay", replay_command(options)}};
  return check;
}

/// The bounded model checker (model_checker.hpp): SAFE against the ghost state on every reachable
/// state, and the reference and every invariant on every step.
Check model_check(const refinement::ModelDomain& d) {
  const refinement::ModelReport r = refinement::check_model(d);
  Check check{"model",
              fmt::format("alphabet {}, prompts 0..{} tokens, 0..{} generated, {} requests deep, keep_min 0..{}, "
                          "chunk 0..{}",
                          d.alphabet, d.max_prompt, d.max_generated, d.max_requests, d.max_keep_min, d.max_chunk),
              r.transitions,
              r.failed,
              fmt::format("{} states, {} transitions, {} offers checked by SAFE ({} non-zero)", r.states,
                          r.transitions, r.offers, r.nonzero_offers),
              {},
              nullptr,
              {},
              nullptr};
  json depths = json::array();
  for (std::size_t depth = 0; depth < r.depths.size(); ++depth) {
    const refinement::DepthCount& c = r.depths[depth];
    check.details.push_back(fmt::format("depth {}: {} new states, {} transitions, {} offers ({} non-zero)", depth,
                                        c.states, c.transitions, c.offers, c.nonzero_offers));
    depths.push_back({{"depth", depth}, {"states", c.states}, {"transitions", c.transitions}, {"offers", c.offers},
                      {"nonzero_offers", c.nonzero_offers}});
  }
  check.details.push_back(
      r.closed ? fmt::format("reachable set closed at depth {}: no request from its deepest level reaches a new state, "
                             "so SAFE holds after any number of requests in this domain",
                             d.max_requests)
               : fmt::format("reachable set not closed at depth {}: the deepest level still reaches new states; "
                             "checked up to {} requests",
                             d.max_requests, d.max_requests));
  check.details_json = {{"depths", depths}, {"closed", r.closed}};
  if (r.failed == 0) return check;
  std::vector<std::string> events;
  for (const spec::Event& e : r.path) events.push_back(describe(e));
  check.counterexample.push_back(fmt::format("{} fails after:", r.violation));
  for (std::size_t i = 0; i < events.size(); ++i) check.counterexample.push_back(fmt::format("  {:>2}. {}", i + 1, events[i]));
  check.counterexample_json = {{"violated", r.violation}, {"events", events}};
  return check;
}

/// The compiler and the flags it reveals to the preprocessor.
std::string build_description() {
#if defined(__clang__)
  std::string out = fmt::format("clang {}", __clang_version__);
#elif defined(__GNUC__)
  std::string out = fmt::format("g++ {}", __VERSION__);
#else
  std::string out = "an unknown compiler";
#endif
  out += fmt::format(", C++ {}", __cplusplus);
#if defined(__OPTIMIZE__)
  out += ", optimized";
#else
  out += ", not optimized (-O0)";
#endif
#if defined(NDEBUG)
  out += ", NDEBUG";
#endif
#if defined(__SANITIZE_ADDRESS__)
  out += ", -fsanitize=address";
#endif
  return out;
}

/// The checks that ran; fewer than all five when a signal stopped the audit between two of them (or
/// between two random cases: that check is then the last, and partial).
std::vector<Check> run_checks(const AuditOptions& options, ProgressBar& progress) {
  std::vector<Check> checks;
  constexpr std::size_t phases = 5;
  // Before each check: draw which one runs, and stop if a signal arrived.
  const auto next = [&](const char* name) {
    progress.restart(phases, "checks", fmt::format("audit: {} ({}/{})", name, checks.size() + 1, phases));
    progress.update(checks.size());
    return interrupted_by() == 0;
  };
  const refinement::Domain& rule = options.rule;
  const refinement::Domain protocol{options.protocol_length, refinement::run_time_protocol_domain.max_keep_min,
                               refinement::run_time_protocol_domain.max_chunk};
  const auto domain = [](const refinement::Domain& d) {
    return fmt::format("alphabet {{0,1}}, length <= {}, keep_min 0..{}, chunk 1..{}, enabled and not", d.max_length,
                       d.max_keep_min, d.max_chunk);
  };
  if (!next("rule")) return checks;
  checks.push_back(exhaustive("rule", domain(rule), refinement::prove_rule_over(rule)));
  if (!next("protocol")) return checks;
  checks.push_back(exhaustive("protocol", domain(protocol), refinement::prove_protocol_over(protocol)));
  if (!next("configure")) return checks;
  checks.push_back(exhaustive("configure", "keep_min 0..2, chunk 0..4, enabled and not", refinement::prove_configure(4)));
  if (!next("random runs")) return checks;
  progress.restart(options.cases, "cases", fmt::format("audit: random runs (4/{})", phases));
  checks.push_back(random_runs(options, [&progress](std::size_t done) {
    progress.update(done);
    return interrupted_by() == 0;
  }));
  if (!next("model checker")) return checks;
  refinement::ModelDomain model = options.model;
  model.max_requests = options.protocol_length;
  checks.push_back(model_check(model));
  progress.erase();
  return checks;
}

/// Which tests of the suite's reports ran for one ID, by outcome.
struct Ran {
  std::vector<std::string> passed, failed, skipped;
};
using RanById = std::map<std::string, Ran>;

/// The suite's reports, by the IDs each test records; empty when options.results is empty.
RanById read_results(const AuditOptions& options) {
  RanById by_id;
  if (options.results.empty()) return by_id;
  std::map<std::string, refinement::TestReport> reports;
  try {
    reports = refinement::read_test_reports(options.results);
  } catch (const std::runtime_error& e) {
    throw InputError(fmt::format("--results: {}", e.what()));
  }
  for (const auto& [test, report] : reports) {
    for (const std::string& id : report.ids) {
      Ran& ran = by_id[id];
      switch (report.outcome) {
        case refinement::TestOutcome::passed: ran.passed.push_back(test); break;
        case refinement::TestOutcome::failed: ran.failed.push_back(test); break;
        case refinement::TestOutcome::skipped: ran.skipped.push_back(test); break;
      }
    }
  }
  return by_id;
}

/// The traceability table the audit checks, if any: the one tests substitute, else the file's.
struct Traced {
  bool checked = false;      ///< false: no table was given, and none was checked
  std::string file;          ///< the file it was read from; empty for a table given in-process
  TracedTable read;          ///< holds the file's text
  std::span<const TracedRequirement> rows;
};

/// Reads the table the options name; throws InputError for a file that cannot be read.
Traced read_traced_table(const AuditOptions& options) {
  Traced traced;
  if (options.traced) {
    traced.checked = true;
    traced.rows = *options.traced;
  } else if (!options.traceability.empty()) {
    traced.checked = true;
    traced.file = options.traceability;
    traced.read = read_traced(options.traceability);
    traced.rows = traced.read.rows();
  }
  return traced;
}

/// How to give the table, for the reports of an audit without one.
std::string how_to_trace() {
  return fmt::format("give --traceability FILE: the tests' build writes it to {}", traced_file_example);
}

/// `interrupted`: the signal that stopped the audit before its last check, or 0.
void print_text(std::ostream& out, const AuditOptions& options, const std::vector<Check>& checks,
                const Traced& traced, const std::vector<TraceabilityEntry>& table, const RanById& ran,
                const std::vector<std::string>& problems, int interrupted) {
  out << fmt::format("pfx audit, seed {} (replay: {})\n", options.seed, replay_command(options));
  out << fmt::format("built with {}\n\n", build_description());
  out << "Invariant checks: every step compared with the reference model and checked against INV-1..11;\n"
         "the model checker also checks SAFE against the ghost state on every reachable state\n";
  for (const Check& c : checks) {
    out << fmt::format("  {:<10} {:<62} {:>9} steps  {}\n", c.name, c.domain, c.checked,
                       c.failed == 0 ? "ok" : fmt::format("FAILED {}", c.failed));
    if (!c.coverage.empty()) out << fmt::format("  {:<10} {}\n", "", c.coverage);
    for (const std::string& line : c.details) out << fmt::format("  {:<10} {}\n", "", line);
  }
  for (const Check& c : checks) {
    if (c.failed == 0) continue;
    out << fmt::format("\nFirst counterexample of {}:\n", c.name);
    for (const std::string& line : c.counterexample) out << "  " << line << '\n';
  }

  if (traced.checked) {
    out << fmt::format("\nTraceability ({}, as the tests' build traced it; docs/ sections that name each ID)\n",
                       traced.file.empty() ? "the table given" : traced.file);
  } else {
    out << fmt::format("\nTraceability: not checked, no table given ({})\n", how_to_trace());
  }
  out << (options.results.empty()
              ? std::string("Test results: not read (pfx audit --results build/default/proptest/results, after ctest)\n")
              : fmt::format("Test results: {} (the tests each ID's reports say ran, and how)\n", options.results));
  for (const TraceabilityEntry& e : table) {
    out << fmt::format("\n{}  {}\n", e.id, e.statement);
    if (traced.checked) {
      out << fmt::format("  enforced in core: {}\n", e.has_row ? e.enforced_in_core : "(no row)");
      out << "  tests:";
      if (e.tests.empty()) out << " (none)\n";
      for (std::size_t i = 0; i < e.tests.size(); ++i) out << (i == 0 ? " " : "         ") << e.tests[i] << '\n';
      out << "  docs: ";
      if (e.docs.empty()) out << "(not named in docs/ outside the table)\n";
      for (std::size_t i = 0; i < e.docs.size(); ++i) out << (i == 0 ? "" : "        ") << e.docs[i] << '\n';
    }
    if (!options.results.empty()) {
      const auto found = ran.find(e.id);
      const Ran none;
      const Ran& r = found == ran.end() ? none : found->second;
      out << fmt::format("  ran: {} passed, {} failed, {} skipped{}\n", r.passed.size(), r.failed.size(),
                         r.skipped.size(), r.failed.empty() ? "" : fmt::format(" (failed: {})", fmt::join(r.failed, ", ")));
    }
    if (traced.checked) {
      for (const std::string& p : e.problems()) out << fmt::format("  MISSING: {}\n", p);
    }
  }

  const std::string not_traced = fmt::format("traceability: not checked ({})", how_to_trace());
  if (interrupted != 0) {
    out << fmt::format("\npfx audit: {} of 5 checks ran; not passed\n{}\n", checks.size(),
                       describe_interruption(interrupted, checks.size(), "checks"));
    for (const std::string& p : problems) out << "  " << p << '\n';
  } else if (problems.empty() && traced.checked) {
    out << fmt::format("\npfx audit: every check passed; {} IDs, each with a row and a test\n", table.size());
  } else if (problems.empty()) {
    // The table compared nothing, so the audit does not say that every check passed.
    out << fmt::format("\npfx audit: the {} invariant checks passed; {}\n", checks.size(), not_traced);
  } else {
    out << "\npfx audit: FAILED\n";
    for (const std::string& p : problems) out << "  " << p << '\n';
    if (!traced.checked) out << "  " << not_traced << '\n';
  }
}

void print_json(std::ostream& out, const AuditOptions& options, const std::vector<Check>& checks,
                const Traced& traced, const std::vector<TraceabilityEntry>& table, const RanById& ran,
                const std::vector<std::string>& problems, int interrupted) {
  json report;
  report["seed"] = options.seed;
  report["cases"] = options.cases;
  report["events_per_case"] = audit_events_per_case;
  report["replay"] = replay_command(options);
  report["build"] = build_description();
  report["checks"] = json::array();
  for (const Check& c : checks) {
    report["checks"].push_back({{"name", c.name},
                                {"domain", c.domain},
                                {"checked", c.checked},
                                {"failed", c.failed},
                                {"coverage", c.coverage},
                                {"counterexample", c.counterexample_json}});
    if (!c.details_json.is_null()) report["checks"].back().update(c.details_json);
  }
  // Not checked: the table's fields are null, as nothing says what they are.
  report["traceability"] = {{"checked", traced.checked},
                            {"file", traced.file.empty() ? json(nullptr) : json(traced.file)}};
  report["table"] = json::array();
  for (const TraceabilityEntry& e : table) {
    report["table"].push_back({{"id", e.id},
                               {"statement", e.statement},
                               {"has_row", traced.checked ? json(e.has_row) : json(nullptr)},
                               {"enforced_in_core", traced.checked ? json(e.enforced_in_core) : json(nullptr)},
                               {"tests", traced.checked ? json(e.tests) : json(nullptr)},
                               {"docs", traced.checked ? json(e.docs) : json(nullptr)},
                               {"problems", traced.checked ? json(e.problems()) : json::array()}});
    if (!options.results.empty()) {
      const auto found = ran.find(e.id);
      const Ran none;
      const Ran& r = found == ran.end() ? none : found->second;
      report["table"].back()["ran"] = {{"passed", r.passed}, {"failed", r.failed}, {"skipped", r.skipped}};
    }
  }
  report["results"] = options.results.empty() ? json(nullptr) : json(options.results);
  report["problems"] = problems;
  report["interrupted"] = interrupted != 0 ? json(interrupted) : json(nullptr);  // the signal, or null
  report["ok"] = problems.empty() && interrupted == 0;
  out << report.dump(2) << '\n';
}

}  // namespace

std::vector<RequirementId> audited_ids() {
  std::vector<RequirementId> ids;
  spec::for_each_invariant([&](const auto& inv) { ids.push_back({std::string(inv.id), statement_of(inv.id)}); });
  for (const spec::Requirement& r : spec::requirements) ids.push_back({std::string(r.id), std::string(r.statement)});
  return ids;
}

int run_audit(const AuditOptions& options, const Streams& streams) {
  // A bound that checks nothing would report ok having checked nothing.
  if (options.protocol_length == 0) {
    throw InputError("--protocol-length 0 checks no protocol state (the exhaustive protocol proof and the model "
                     "checker would run no request): give 1..3");
  }
  if (options.cases == 0) {
    throw InputError("--cases 0 runs no random case, so that check would compare nothing: give at least 1");
  }
  // Bad input ends the audit before any check runs.
  const Traced traced = read_traced_table(options);
  const RanById ran = read_results(options);
  ProgressBar progress(streams.err, streams.err_is_terminal && !options.no_progress && !options.json, 5, "checks",
                       std::chrono::milliseconds(0));
  const std::vector<Check> checks = run_checks(options, progress);
  progress.erase();
  const int interrupted = interrupted_by();
  const std::vector<RequirementId> ids = audited_ids();
  const std::vector<TraceabilityEntry> table = traceability_table(ids, traced.rows);

  std::vector<std::string> problems;
  for (const Check& c : checks) {
    if (c.failed == 0) continue;
    problems.push_back(c.name == "random"
                           ? fmt::format("random runs: {} failed (replay: {})", c.failed, replay_command(options))
                           : fmt::format("{} (exhaustive): {} of {} steps failed", c.name, c.failed, c.checked));
  }
  if (traced.checked) {
    for (const TraceabilityEntry& e : table) {
      for (const std::string& p : e.problems()) problems.push_back(fmt::format("{}: {}", e.id, p));
    }
    // A row for an ID this program does not audit: the table was traced from other tests than its own.
    for (const TracedRequirement& row : traced.rows) {
      const bool known = std::any_of(ids.begin(), ids.end(), [&](const RequirementId& r) { return r.id == row.id; });
      if (!known) {
        problems.push_back(fmt::format("{}: a row in {}, but this program audits no such ID (a table of another version?)",
                                       row.id, traced.file.empty() ? "the table given" : traced.file));
      }
    }
  }
  if (!options.results.empty()) {
    for (const TraceabilityEntry& e : table) {
      const auto found = ran.find(e.id);
      if (found == ran.end() || found->second.passed.empty()) {
        problems.push_back(fmt::format("{}: no test of the results passed", e.id));
      } else if (!found->second.failed.empty()) {
        problems.push_back(fmt::format("{}: failed in the results: {}", e.id, fmt::join(found->second.failed, ", ")));
      }
    }
  }

  if (options.json) {
    print_json(streams.out, options, checks, traced, table, ran, problems, interrupted);
  } else {
    print_text(streams.out, options, checks, traced, table, ran, problems, interrupted);
  }
  if (interrupted != 0) return interrupted_status(interrupted);
  return problems.empty() ? exit_ok : exit_mismatch;
}

void add_audit_command(CLI::App& app, const Streams& streams, int& status) {
  CLI::App* audit = app.add_subcommand(
      "audit", "Check the invariant catalogue at run time, and the traceability table given with --traceability");
  auto options = std::make_shared<AuditOptions>();
  CLI::Option* seed = audit->add_option("--seed", options->seed,
                                        "Seed of the random runs (default: drawn at random, and printed)")
                         ->check(non_negative());  // CLI11 would wrap -1 round to 2^64 - 1
  audit->add_option("--cases", options->cases, "Random protocol runs, of 24 events each")
      ->capture_default_str()
      ->check(non_negative());
  audit->add_option("--protocol-length", options->protocol_length,
                    "Longest sequence of the exhaustive protocol domain (2 is the compile-time proofs' domain), "
                    "and requests deep of the model checker")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{0}, std::size_t{3}));  // 0 is refused by run_audit, with why
  audit->add_flag("--json", options->json, "Write the report as JSON");
  audit->add_flag("--no-progress", options->no_progress, "No progress line, even on a terminal");
  audit->add_option("--traceability", options->traceability,
                    "The traceability table the tests' build writes (build/default/traceability/traced.json): print "
                    "it, and fail when an ID has no row or no test. Without it the table is not checked, and the "
                    "audit says so");
  audit->add_option("--results", options->results,
                    "Folder of the suite's test reports (build/default/proptest/results after ctest): say which tests "
                    "ran and passed for each ID, and fail when one failed or none passed");
  audit->callback([&streams, &status, options, seed] {
    if (seed->count() == 0) {
      std::random_device device;
      options->seed = (std::uint64_t{device()} << 32U) | device();
    }
    status = run_audit(*options, streams);
  });
}

}  // namespace pfx::cli
