// pfx audit: the invariant catalogue checked at run time, and the traceability table the tests' build
// writes, read at run time when given. The report is one JSON value; the text is rendered from it.

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

/// A report field in text: a string without its quotes, anything else as JSON (3, true, [1,2]).
template <>
struct fmt::formatter<nlohmann::json> : fmt::formatter<std::string_view> {
  auto format(const nlohmann::json& value, format_context& ctx) const {
    return formatter<std::string_view>::format(value.is_string() ? value.get<std::string>() : value.dump(), ctx);
  }
};

namespace pfx::cli {
namespace {

using nlohmann::json;
using refinement::describe;  // the one describe() of events, states and answers

constexpr std::size_t check_count = 5;  // rule, protocol, configure, random, model

/// One check as the report holds it; "counterexample" is its first failure's, null when none failed.
json check(std::string_view name, const std::string& domain, std::size_t checked, std::size_t failed,
           const std::string& coverage) {
  return {{"name", name}, {"domain", domain}, {"checked", checked}, {"failed", failed}, {"coverage", coverage},
          {"counterexample", nullptr}};
}

json described(const std::vector<spec::Event>& events) {
  json out = json::array();
  for (const spec::Event& e : events) out.push_back(describe(e));
  return out;
}

/// A bounded exhaustive proof's result (pfx/refinement/exhaustive_proof.hpp), every step of which was
/// compared with the reference model and checked against INV-1..12.
json exhaustive(std::string_view name, const std::string& domain, const refinement::Tally& t) {
  json c = check(name, domain, t.checked, t.failed, fmt::format("{} decisions granted a non-zero offset", t.granted));
  if (t.failed == 0) return c;
  c["counterexample"] = {
      {"config",
       {{"enabled", t.config.enabled},
        {"keep_min", t.config.keep_min},
        {"chunk", t.config.chunk},
        {"prefill_step", t.config.prefill_step},
        {"admission_padding", t.config.admission_padding},
        {"decode_rows_exact", t.config.decode_rows_exact}}},
      {"ids", t.ids}, {"canonical_end", t.canonical_end}, {"prompt", t.prompt}, {"event", t.event}};
  return c;
}

/// A domain's prefill steps in words: "prefill_step 0" or "prefill_step 0..3 and 2^64-1".
std::string prefill_steps(std::size_t max_prefill_step) {
  if (max_prefill_step == 0) return "prefill_step 0";
  return fmt::format("prefill_step 0..{} and 2^64-1", max_prefill_step);
}

/// A domain's admission paddings in words, after its prefill steps: "" (none but 0), or
/// ", admission_padding 0, 1 and 2^64-1" (refinement::admission_paddings).
std::string admission_paddings(std::size_t max_admission_padding) {
  std::string words;
  for (const std::size_t padding : refinement::admission_paddings(max_admission_padding)) {
    if (!words.empty()) words += padding == max_admission_padding ? " and " : ", ";
    words += padding == SIZE_MAX ? std::string("2^64-1") : std::to_string(padding);
  }
  return max_admission_padding == 0 ? std::string() : ", admission_padding " + words;
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
json random_runs(const AuditOptions& options, const refinement::CaseHook& before_case) {
  const refinement::RandomRunsReport r =
      refinement::run_random_cases(options.seed, options.cases, audit_events_per_case, options.step, before_case);
  json c = check("random",
                 fmt::format("{}{} runs of {} events, seed {}{}", r.stopped ? fmt::format("{} of ", r.cases) : "",
                             options.cases, audit_events_per_case, options.seed, r.stopped ? " (interrupted)" : ""),
                 r.steps, r.failed, refinement::random_ranges());
  if (!r.first) return c;
  const refinement::RandomRunFailure& f = *r.first;
  c["counterexample"] = {{"case", f.case_index + 1}, {"event", f.step_index + 1}, {"events", described(f.events)},
                         {"state_before", describe(f.before)}, {"machine", describe(f.comparison.machine)},
                         {"reference", describe(f.comparison.reference)},
                         {"violated", std::string(f.comparison.violated)},
                         {"states_agree", f.comparison.states_agree}, {"replay", replay_command(options)}};
  if (!f.comparison.states_agree) {
    c["counterexample"].update({{"machine_state_after", describe(f.machine_after)},
                                {"reference_state_after", describe(f.model_after)}});
  }
  return c;
}

/// The bounded model checker (model_checker.hpp): SAFE against the ghost state on every reachable
/// state, the reference and every invariant on every step. Its counts by depth and whether its
/// reachable set is closed are reported: a search that silently explores less shows there.
json model_check(const refinement::ModelDomain& d) {
  const refinement::ModelReport r = refinement::check_model(d);
  json c = check("model",
                 fmt::format("alphabet {}, prompts 0..{} tokens, 0..{} generated, {} requests deep, keep_min 0..{}, "
                             "chunk 0..{}; decode rows exact with keep_min 0, chunk 0..{}",
                             d.alphabet, d.max_prompt, d.max_generated, d.max_requests, d.max_keep_min, d.max_chunk,
                             std::min(d.max_chunk, d.max_prompt == 0 ? 0 : d.max_prompt - 1)),
                 r.transitions, r.failed,
                 fmt::format("{} states, {} transitions, {} offers checked by SAFE ({} non-zero)", r.states,
                             r.transitions, r.offers, r.nonzero_offers));
  c["closed"] = r.closed;
  c["depths"] = json::array();
  for (const refinement::DepthCount& n : r.depths) {
    c["depths"].push_back({{"depth", c["depths"].size()}, {"states", n.states}, {"transitions", n.transitions},
                           {"offers", n.offers}, {"nonzero_offers", n.nonzero_offers}});
  }
  if (r.failed > 0) c["counterexample"] = {{"violated", r.violation}, {"events", described(r.path)}};
  return c;
}

/// The compiler and the flags it reveals to the preprocessor.
std::string build_description() {
#if defined(__clang__)
  std::string out = "clang " __clang_version__;
#elif defined(__GNUC__)
  std::string out = "g++ " __VERSION__;
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
json run_checks(const AuditOptions& options, ProgressBar& progress) {
  json checks = json::array();
  // Before each check: draw which one runs, and stop if a signal arrived.
  const auto next = [&](const char* name) {
    progress.restart(check_count, "checks", fmt::format("audit: {} ({}/{})", name, checks.size() + 1, check_count));
    progress.update(checks.size());
    return interrupted_by() == 0;
  };
  refinement::Domain protocol = refinement::run_time_protocol_domain;
  protocol.max_length = options.protocol_length;
  const auto domain = [](const refinement::Domain& d) {
    return fmt::format("alphabet {{0,1}}, length <= {}, keep_min 0..{}, chunk 1..{}, {}{}{}, enabled and not",
                       d.max_length, d.max_keep_min, d.max_chunk, prefill_steps(d.max_prefill_step),
                       admission_paddings(d.max_admission_padding),
                       d.decode_facts ? ", decode rows exact and not" : "");
  };
  if (!next("rule")) return checks;
  checks.push_back(exhaustive("rule", domain(options.rule), refinement::prove_rule_over(options.rule)));
  if (!next("protocol")) return checks;
  checks.push_back(exhaustive("protocol", domain(protocol), refinement::prove_protocol_over(protocol)));
  if (!next("configure")) return checks;
  checks.push_back(exhaustive("configure",
                              fmt::format("keep_min 0..2, chunk 0..4, {}{}, decode rows exact and not, held "
                                          "under either, enabled and not",
                                          prefill_steps(2), admission_paddings(SIZE_MAX)),
                              refinement::prove_configure(4, 2)));
  if (!next("random runs")) return checks;
  progress.restart(options.cases, "cases", fmt::format("audit: random runs (4/{})", check_count));
  checks.push_back(random_runs(options, [&progress](std::size_t done) {
    progress.update(done);
    return interrupted_by() == 0;
  }));
  if (!next("model checker")) return checks;
  checks.push_back(model_check(options.model));
  return checks;
}

json no_runs() { return {{"passed", json::array()}, {"failed", json::array()}, {"skipped", json::array()}}; }

/// For each ID the suite's reports in `folder` record, its tests by outcome (no_runs' fields).
std::map<std::string, json> read_results(const std::string& folder) {
  std::map<std::string, json> by_id;
  if (folder.empty()) return by_id;
  std::map<std::string, refinement::TestReport> reports;
  try {
    reports = refinement::read_test_reports(folder);
  } catch (const std::runtime_error& e) {
    throw InputError(fmt::format("--results: {}", e.what()));
  }
  for (const auto& [test, report] : reports) {
    const char* outcome = report.outcome == refinement::TestOutcome::passed   ? "passed"
                          : report.outcome == refinement::TestOutcome::failed ? "failed"
                                                                              : "skipped";
    for (const std::string& id : report.ids) by_id.try_emplace(id, no_runs()).first->second[outcome].push_back(test);
  }
  return by_id;
}

/// A failed check's first counterexample, in words.
void print_counterexample(std::ostream& out, const json& c, const json& seed) {
  const json& x = c["counterexample"];
  const auto events = [&](std::string_view last) {
    for (std::size_t i = 0; i < x["events"].size(); ++i) {
      out << fmt::format("    {:>2}. {}{}\n", i + 1, x["events"][i], i + 1 == x["events"].size() ? last : "");
    }
  };
  out << fmt::format("\nFirst counterexample of {}:\n", c["name"]);
  if (c["name"] == "model") {
    out << fmt::format("  {} fails after:\n", x["violated"]);
    events("");
  } else if (c["name"] == "random") {
    out << fmt::format("  case {}, event {} of seed {}:\n", x["case"], x["event"], seed);
    events("   <- fails");
    out << fmt::format("  state before: {}\n  machine answered:   {}\n  reference answered: {}\n", x["state_before"],
                       x["machine"], x["reference"]);
    if (x["violated"] != "") {
      out << fmt::format("  violates {}: {}\n", x["violated"], statement_of(x["violated"].get<std::string>()));
    }
    if (x["states_agree"] == false) {
      out << fmt::format("  state after, machine:   {}\n  state after, reference: {}\n", x["machine_state_after"],
                         x["reference_state_after"]);
    }
    out << fmt::format("  replay: {}\n", x["replay"]);
  } else {
    out << fmt::format("  config enabled={} keep_min={} chunk={} prefill_step={}; record ids={} canonical_end={}; "
                       "prompt={}; event #{} of the case\n",
                       x["config"]["enabled"], x["config"]["keep_min"], x["config"]["chunk"], x["config"]["prefill_step"],
                       describe(x["ids"].get<spec::Tokens>()), x["canonical_end"],
                       describe(x["prompt"].get<spec::Tokens>()), x["event"]);
  }
}

/// The report as text: the JSON's fields, in the order a reader checks them.
void print_text(std::ostream& out, const json& report) {
  const json& checks = report["checks"];
  out << fmt::format("pfx audit, seed {} (replay: {})\nbuilt with {}\n\n", report["seed"], report["replay"],
                     report["build"]);
  out << "Invariant checks: every step compared with the reference model and checked against INV-1..12;\n"
         "the model checker also checks SAFE against the ghost state on every reachable state\n";
  for (const json& c : checks) {
    out << fmt::format("  {:<10} {:<62} {:>9} steps  {}\n  {:<10} {}\n", c["name"], c["domain"], c["checked"],
                       c["failed"] == 0 ? "ok" : fmt::format("FAILED {}", c["failed"]), "", c["coverage"]);
    if (!c.contains("depths")) continue;
    for (const json& d : c["depths"]) {
      out << fmt::format("  {:<10} depth {}: {} new states, {} transitions, {} offers ({} non-zero)\n", "", d["depth"],
                         d["states"], d["transitions"], d["offers"], d["nonzero_offers"]);
    }
    const std::size_t deepest = c["depths"].size() - 1;  // depths 0..max_requests
    out << fmt::format("  {:<10} ", "")
        << (c["closed"] == true
                ? fmt::format("reachable set closed at depth {}: no request from its deepest level reaches a new "
                              "state, so SAFE holds after any number of requests in this domain\n",
                              deepest)
                : fmt::format("reachable set not closed at depth {}: the deepest level still reaches new states; "
                              "checked up to {} requests\n",
                              deepest, deepest));
  }
  for (const json& c : checks) {
    if (c["failed"] != 0) print_counterexample(out, c, report["seed"]);
  }

  const std::string how = fmt::format("give --traceability FILE: the tests' build writes it to {}", traced_file_example);
  const bool traced = report["traceability"]["checked"] == true;
  const json& file = report["traceability"]["file"];
  out << (traced ? fmt::format("\nTraceability ({}, as the tests' build traced it; docs/ sections that name each ID)\n",
                               file.is_null() ? json("the table given") : file)
                 : fmt::format("\nTraceability: not checked, no table given ({})\n", how));
  out << (report["results"].is_null()
              ? std::string("Test results: not read (pfx audit --results build/default/proptest/results, after ctest)\n")
              : fmt::format("Test results: {} (the tests each ID's reports say ran, and how)\n", report["results"]));
  // `head`, then each item under the one before.
  const auto list = [&](std::string_view head, const json& items, std::string_view none) {
    out << head << (items.empty() ? std::string(none) + "\n" : "");
    for (std::size_t i = 0; i < items.size(); ++i) out << fmt::format("{:{}}{}\n", "", i == 0 ? 0 : head.size(), items[i]);
  };
  for (const json& e : report["table"]) {
    out << fmt::format("\n{}  {}\n", e["id"], e["statement"]);
    if (traced) {
      out << fmt::format("  enforced in core: {}\n", e["has_row"] == true ? e["enforced_in_core"] : json("(no row)"));
      list("  tests: ", e["tests"], "(none)");
      list("  docs: ", e["docs"], "(not named in docs/ outside the table)");
    }
    if (e.contains("ran")) {
      const json& failed = e["ran"]["failed"];
      out << fmt::format("  ran: {} passed, {} failed, {} skipped{}\n", e["ran"]["passed"].size(), failed.size(),
                         e["ran"]["skipped"].size(),
                         failed.empty() ? "" : fmt::format(" (failed: {})", fmt::join(failed, ", ")));
    }
    for (const json& p : e["problems"]) out << fmt::format("  MISSING: {}\n", p);
  }

  const std::string not_traced = fmt::format("traceability: not checked ({})", how);
  const json& problems = report["problems"];
  if (!report["interrupted"].is_null()) {
    out << fmt::format("\npfx audit: {} of {} checks ran; not passed\n{}\n", checks.size(), check_count,
                       describe_interruption(report["interrupted"].get<int>(), checks.size(), "check"));
  } else if (problems.empty() && traced) {
    out << fmt::format("\npfx audit: every check passed; {} IDs, each with a row and a test\n", report["table"].size());
  } else if (problems.empty()) {
    // The table compared nothing, so the audit does not say that every check passed.
    out << fmt::format("\npfx audit: the {} invariant checks passed; {}\n", checks.size(), not_traced);
  } else {
    out << "\npfx audit: FAILED\n";
  }
  for (const json& p : problems) out << fmt::format("  {}\n", p);
  if (report["interrupted"].is_null() && !problems.empty() && !traced) out << "  " << not_traced << '\n';
}

}  // namespace

std::vector<TracedRequirement> audited_ids() {
  std::vector<TracedRequirement> ids;
  spec::for_each_invariant(
      [&](const auto& inv) { ids.push_back({std::string(inv.id), false, "", {}, {}, statement_of(inv.id)}); });
  for (const spec::Requirement& r : spec::requirements) {
    ids.push_back({std::string(r.id), false, "", {}, {}, std::string(r.statement)});
  }
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
  std::optional<std::vector<TracedRequirement>> traced = options.traced;
  if (!traced && !options.traceability.empty()) traced = read_traced(options.traceability);
  const std::map<std::string, json> ran = read_results(options.results);
  ProgressBar progress(streams.err, streams.err_is_terminal && !options.no_progress && !options.json, check_count,
                       "checks", std::chrono::milliseconds(0));
  json report = {{"checks", run_checks(options, progress)}};
  progress.erase();
  const int interrupted = interrupted_by();
  const bool from_file = traced && !options.traced;  // a table given in-process has no file
  report.update({{"seed", options.seed}, {"cases", options.cases}, {"events_per_case", audit_events_per_case},
                 {"replay", replay_command(options)}, {"build", build_description()},
                 {"traceability",
                  {{"checked", traced.has_value()}, {"file", from_file ? json(options.traceability) : json()}}},
                 {"results", options.results.empty() ? json() : json(options.results)},
                 {"interrupted", interrupted != 0 ? json(interrupted) : json()}});  // the signal, or null

  json& problems = report["problems"] = json::array();
  for (const json& c : report["checks"]) {
    if (c["failed"] == 0) continue;
    problems.push_back(c["name"] == "random"
                           ? fmt::format("random runs: {} failed (replay: {})", c["failed"], report["replay"])
                           : fmt::format("{} (exhaustive): {} of {} steps failed", c["name"], c["failed"], c["checked"]));
  }
  const std::vector<TracedRequirement> rows = traced.value_or(std::vector<TracedRequirement>{});
  json& table = report["table"] = json::array();
  json unrun = json::array();  // the results' problems, told after the table's
  for (const TracedRequirement& e : traceability_table(audited_ids(), rows)) {
    // Not checked: the table's fields are null, as nothing says what they are.
    json& row = table.emplace_back(json{{"id", e.id}, {"statement", e.statement}, {"has_row", nullptr},
                                        {"enforced_in_core", nullptr}, {"tests", nullptr}, {"docs", nullptr},
                                        {"problems", json::array()}});
    if (traced) {
      row.update({{"has_row", e.has_row}, {"enforced_in_core", e.enforced_in_core}, {"tests", e.tests},
                  {"docs", e.docs}, {"problems", e.problems()}});
      for (const std::string& p : e.problems()) problems.push_back(fmt::format("{}: {}", e.id, p));
    }
    if (options.results.empty()) continue;
    const json& r = row["ran"] = ran.contains(e.id) ? ran.at(e.id) : no_runs();
    if (r["passed"].empty()) {
      unrun.push_back(fmt::format("{}: no test of the results passed", e.id));
    } else if (!r["failed"].empty()) {
      unrun.push_back(fmt::format("{}: failed in the results: {}", e.id, fmt::join(r["failed"], ", ")));
    }
  }
  // A row for an ID this program does not audit: the table was traced from other tests than its own.
  for (const TracedRequirement& r : rows) {
    const bool known = std::any_of(table.begin(), table.end(), [&](const json& e) { return e["id"] == r.id; });
    if (!known) {
      problems.push_back(fmt::format("{}: a row in {}, but this program audits no such ID (a table of another version?)",
                                     r.id, from_file ? options.traceability : "the table given"));
    }
  }
  problems.insert(problems.end(), unrun.begin(), unrun.end());
  report["ok"] = problems.empty() && interrupted == 0;

  if (options.json) {
    streams.out << report.dump(2) << '\n';
  } else {
    print_text(streams.out, report);
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
                    "Longest sequence of the exhaustive protocol domain (2 is the compile-time proofs' domain)")
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
