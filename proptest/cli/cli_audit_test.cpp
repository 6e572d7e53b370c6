// pfx audit, run in-process: the report names every ID, the table is the one the tests' build traced
// from the tests' tags (PFX_TRACED_FILE, read at run time), a broken machine or an incomplete table
// fails the audit, and an audit without a table says that it was not checked (CLI-3).

#include <pfx/refinement/bridge.hpp>
#include <pfx/refinement/model_checker.hpp>
#include <pfx/refinement/random_runs.hpp>
#include "support/requirement.hpp"

#include <pfx/cli/audit.hpp>
#include <pfx/refinement/describe.hpp>
#include <pfx/spec/catalogue.hpp>
#include <pfx/spec/requirements.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace {

using pfx::cli::AuditOptions;
using pfx::cli::TracedRequirement;

/// An audit small enough to run often: the exhaustive rule domain, the compile-time protocol domain,
/// and a few random runs. Under AddressSanitizer (about 30 times slower) the rule proof and the model
/// checker take smaller domains, as in model_checker_test; the documented ones are checked by
/// exhaustive_test, model_checker_test and cli.audit_passes.
AuditOptions quick(std::uint64_t seed) {
  AuditOptions options;
  options.seed = seed;
  options.cases = 200;
  options.protocol_length = 2;
  options.model.max_requests = 2;
  options.traceability = PFX_TRACED_FILE;
#if defined(__SANITIZE_ADDRESS__)
  options.rule = {3, 3, 3};
  options.model.max_prompt = 3;
  options.model.max_keep_min = 3;
  options.model.max_chunk = 3;
#endif
  return options;
}

/// For the tests of the table alone: the checks still all run, on small domains.
AuditOptions small(std::uint64_t seed) {
  AuditOptions options = quick(seed);
  options.cases = 50;
  options.protocol_length = 1;
  options.model.max_requests = 1;
  options.rule = {3, 3, 3};
  options.model.max_prompt = 3;
  options.model.max_keep_min = 3;
  options.model.max_chunk = 3;
  return options;
}

struct Result {
  int status = 0;
  std::string out;
};

Result audit(const AuditOptions& options) {
  std::ostringstream out;
  std::ostringstream err;
  const int status = pfx::cli::run_audit(options, {out, err, false});
  return {status, out.str()};
}

/// A traced table with a row and a test for every ID except those in `without_row` and
/// `without_test`.
std::vector<TracedRequirement> traced_rows(const std::vector<std::string>& without_row,
                                           const std::vector<std::string>& without_test) {
  const auto absent = [](const std::vector<std::string>& list, const std::string& id) {
    return std::find(list.begin(), list.end(), id) != list.end();
  };
  std::vector<TracedRequirement> rows = pfx::cli::audited_ids();
  for (TracedRequirement& r : rows) {
    r.has_row = !absent(without_row, r.id);
    r.enforced_in_core = "core/x.hpp";
    if (!absent(without_test, r.id)) r.tests = {"Suite.Checks"};
  }
  return rows;
}

/// A machine that offers the whole prompt on every query: the audit must catch it.
pfx::refinement::Comparison greedy_step(pfx::Machine& machine, pfx::spec::State& model, const pfx::spec::Event& event) {
  const pfx::spec::State before = pfx::refinement::to_spec(machine);
  pfx::refinement::Comparison c = pfx::refinement::step_both(machine, model, event);
  if (const auto* q = std::get_if<pfx::spec::Query>(&event); q != nullptr && c.machine.has_decision) {
    c.machine.offset = q->prompt.size();
    const pfx::spec::State after = pfx::refinement::to_spec(machine);
    c.violated = pfx::spec::first_violation({before.config, before, event, c.machine, after});
  }
  return c;
}

/// A machine that forgets a record it accepted: its state then differs from the model's.
pfx::refinement::Comparison forgetful_step(pfx::Machine& machine, pfx::spec::State& model, const pfx::spec::Event& event) {
  pfx::refinement::Comparison c = pfx::refinement::step_both(machine, model, event);
  if (std::holds_alternative<pfx::spec::Record>(event) && c.machine.accepted()) {
    (void)machine.clear();
    c.states_agree = pfx::refinement::to_spec(machine) == model;
  }
  return c;
}

}  // namespace

TEST(CliAudit, TheReportNamesEveryIdOfTheCatalogueAndTheRequirementsWithItsStatement) {
  pfx::test::verifies("CLI-3");
  const Result r = audit(quick(1));
  std::size_t ids = 0;
  pfx::spec::for_each_invariant([&](const auto& inv) {
    ++ids;
    EXPECT_NE(r.out.find(fmt::format("\n{}  {}", inv.id, inv.statement)), std::string::npos) << inv.id;
  });
  for (const pfx::spec::Requirement& req : pfx::spec::requirements) {
    ++ids;
    EXPECT_NE(r.out.find(fmt::format("\n{}  {}", req.id, req.statement)), std::string::npos) << req.id;
  }
  EXPECT_EQ(pfx::cli::audited_ids().size(), ids);
  for (const char* check : {"rule", "protocol", "configure", "random"}) {
    EXPECT_NE(r.out.find(fmt::format("\n  {} ", check)), std::string::npos) << check;
  }
  // The table is the one generated from the tags: INV-8's row and one of its tests.
  EXPECT_NE(r.out.find("enforced in core: core/include/pfx/machine.hpp Machine::begin"), std::string::npos);
  EXPECT_NE(r.out.find("SeedAudit253.AfterBeginAndAbortNoRewrittenRowIsOfferedAgain"), std::string::npos);
}

TEST(CliAudit, PassesWhenEveryCheckHoldsAndEveryIdHasARowAndATest) {
  pfx::test::verifies("CLI-3");
  AuditOptions options = quick(2);
  options.traced = traced_rows({}, {});
  const Result r = audit(options);
  EXPECT_EQ(r.status, pfx::cli::exit_ok) << r.out;
  EXPECT_NE(r.out.find("pfx audit: every check passed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
}

TEST(CliAudit, AnIdWithoutARowOrWithoutATestFailsTheAuditAndIsNamed) {
  pfx::test::verifies("CLI-3");
  AuditOptions options = quick(3);
  options.traced = traced_rows({"CLI-3"}, {"INV-8"});
  const Result r = audit(options);
  EXPECT_EQ(r.status, pfx::cli::exit_mismatch) << r.out;
  EXPECT_NE(r.out.find("CLI-3: no row in the \"Requirements\" table of docs/traceability.md"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("INV-8: no test in the \"Test index\" of docs/traceability.md"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("INV-1: no"), std::string::npos) << r.out;

  // With no traced table at all, every ID is missing.
  options.traced = std::vector<TracedRequirement>{};
  EXPECT_EQ(audit(options).status, pfx::cli::exit_mismatch);
}

TEST(CliAudit, ABrokenMachineFailsWithTheSeedToReplayAndTheFirstCounterexample) {
  pfx::test::verifies("CLI-3");
  AuditOptions options = quick(4242);
  options.cases = 50;
  options.step = greedy_step;
  const Result r = audit(options);
  EXPECT_EQ(r.status, pfx::cli::exit_mismatch) << r.out;
  EXPECT_NE(r.out.find("random runs: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("replay: pfx audit --seed 4242 --cases 50"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("First counterexample of random:\n  case "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("<- fails"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("violates INV-"), std::string::npos) << r.out;

  options.json = true;
  const nlohmann::json report = nlohmann::json::parse(audit(options).out);
  EXPECT_FALSE(report["ok"].get<bool>());
  const nlohmann::json& random = report["checks"][3];
  EXPECT_EQ(random["name"], "random");
  EXPECT_GT(random["failed"].get<std::size_t>(), 0U);
  EXPECT_EQ(random["counterexample"]["replay"], "pfx audit --seed 4242 --cases 50");
  EXPECT_NE(random["counterexample"]["violated"].get<std::string>(), "");
}

// A step after which the machine's state differs from the model's shows both states, in text and JSON.
TEST(CliAudit, AStateThatDiffersFromTheModelsIsShownWithBoth) {
  pfx::test::verifies("CLI-3");
  AuditOptions options = small(4243);
  options.step = forgetful_step;
  options.json = true;
  const Result json = audit(options);
  EXPECT_EQ(json.status, pfx::cli::exit_mismatch) << json.out;
  const nlohmann::json x = nlohmann::json::parse(json.out)["checks"][3]["counterexample"];
  ASSERT_FALSE(x["states_agree"].get<bool>()) << x.dump();
  const std::string machine = x["machine_state_after"].get<std::string>();
  EXPECT_NE(machine.find("ids=[] "), std::string::npos) << machine;  // it forgot
  EXPECT_NE(machine, x["reference_state_after"].get<std::string>());

  options.json = false;
  const Result text = audit(options);
  EXPECT_NE(text.out.find("\n  state after, machine:   " + machine + "\n  state after, reference: " +
                          x["reference_state_after"].get<std::string>() + "\n  replay: "),
            std::string::npos)
      << text.out;
}

// The model checker's counts by depth and whether its reachable set is closed reach the user, in text
// and JSON, and are the checker's own: a search that explores less, or an audit that drops a depth or
// claims a fixpoint the checker did not find, fails here.
TEST(CliAudit, TheModelCheckerPrintsItsCountsByDepthAndWhetherItsReachableSetIsClosed) {
  pfx::test::verifies("CLI-3");
  AuditOptions options = quick(6);
  pfx::refinement::ModelDomain domain = options.model;
  const pfx::refinement::ModelReport expected = pfx::refinement::check_model(domain);
  ASSERT_EQ(expected.depths.size(), options.model.max_requests + 1);

  const Result text = audit(options);
  for (std::size_t depth = 0; depth < expected.depths.size(); ++depth) {
    const pfx::refinement::DepthCount& c = expected.depths[depth];
    EXPECT_NE(text.out.find(fmt::format("depth {}: {} new states, {} transitions, {} offers ({} non-zero)\n", depth,
                                        c.states, c.transitions, c.offers, c.nonzero_offers)),
              std::string::npos)
        << text.out;
  }
  EXPECT_EQ(text.out.find(fmt::format("depth {}: ", expected.depths.size())), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(fmt::format("reachable set {} at depth {}", expected.closed ? "closed" : "not closed",
                                      options.model.max_requests)),
            std::string::npos)
      << text.out;

  options.json = true;
  const nlohmann::json report = nlohmann::json::parse(audit(options).out);
  const nlohmann::json& model = report["checks"][4];
  ASSERT_EQ(model["name"], "model");
  EXPECT_EQ(model["closed"].get<bool>(), expected.closed);
  ASSERT_EQ(model["depths"].size(), expected.depths.size());
  std::size_t states = 0;
  std::size_t transitions = 0;
  for (std::size_t depth = 0; depth < expected.depths.size(); ++depth) {
    const nlohmann::json& row = model["depths"][depth];
    EXPECT_EQ(row["depth"].get<std::size_t>(), depth);
    const pfx::refinement::DepthCount got{row["states"].get<std::size_t>(), row["transitions"].get<std::size_t>(),
                                     row["offers"].get<std::size_t>(), row["nonzero_offers"].get<std::size_t>()};
    EXPECT_EQ(got, expected.depths[depth]) << depth;
    states += got.states;
    transitions += got.transitions;
  }
  // The depths add up to the totals the audit reports.
  EXPECT_EQ(states, expected.states);
  EXPECT_EQ(transitions, model["checked"].get<std::size_t>());
  for (std::size_t i = 0; i < 4; ++i) EXPECT_FALSE(report["checks"][i].contains("depths")) << i;
}

TEST(CliAudit, TheSameSeedReplaysTheSameEventsAndADifferentSeedDoesNot) {
  pfx::test::verifies("CLI-3");
  const auto first_failure = [](std::uint64_t seed) {
    const pfx::refinement::RandomRunsReport r = pfx::refinement::run_random_cases(seed, 20, 24, greedy_step);
    std::string events;
    if (r.first) {
      for (const pfx::spec::Event& e : r.first->events) events += pfx::refinement::describe(e) + "\n";
    }
    return events;
  };
  EXPECT_NE(first_failure(7), "");
  EXPECT_EQ(first_failure(7), first_failure(7));
  EXPECT_NE(first_failure(7), first_failure(8));

  // The real machine passes the same runs: every step agrees with the model.
  const pfx::refinement::RandomRunsReport ok = pfx::refinement::run_random_cases(7, 20, 24, pfx::refinement::step_both);
  EXPECT_EQ(ok.failed, 0U);
  EXPECT_EQ(ok.steps, 20U * 24U);
}

TEST(CliAudit, TheJsonReportHasEveryCheckAndEveryIdOfTheTable) {
  pfx::test::verifies("CLI-3");
  AuditOptions options = quick(5);
  options.json = true;
  const Result r = audit(options);
  const nlohmann::json report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report["seed"], 5);
  EXPECT_EQ(report["checks"].size(), 5U);  // rule, protocol, configure, random runs, model checker
  for (const nlohmann::json& check : report["checks"]) {
    EXPECT_EQ(check["failed"], 0) << check.dump();
    EXPECT_GT(check["checked"].get<std::size_t>(), 0U) << check.dump();
  }
  const std::vector<TracedRequirement> ids = pfx::cli::audited_ids();
  ASSERT_EQ(report["table"].size(), ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(report["table"][i]["id"], ids[i].id);
  EXPECT_EQ(report["ok"].get<bool>(), r.status == pfx::cli::exit_ok);
}

TEST(CliAudit, TheTableIsTheTracedOneLookedUpById) {
  pfx::test::verifies("CLI-3");
  // The traced row's statement is not the program's: the table keeps the ID's own.
  const TracedRequirement traced[] = {
      {"INV-10", true, "decide; common_prefix", {"Rule.A", "Rule.B"}, {"docs/spec.md#the-rule"}, "from the file"}};
  const std::vector<TracedRequirement> t =
      pfx::cli::traceability_table({{"INV-1", false, "", {}, {}, "one"}, {"INV-10", false, "", {}, {}, "ten"}}, traced);
  ASSERT_EQ(t.size(), 2U);
  EXPECT_EQ(t[0].id, "INV-1");
  EXPECT_FALSE(t[0].has_row);
  EXPECT_EQ(t[0].problems().size(), 2U);
  EXPECT_EQ(t[1].statement, "ten");
  EXPECT_TRUE(t[1].has_row);
  EXPECT_EQ(t[1].enforced_in_core, "decide; common_prefix");
  EXPECT_EQ(t[1].tests, (std::vector<std::string>{"Rule.A", "Rule.B"}));
  EXPECT_EQ(t[1].docs, std::vector<std::string>{"docs/spec.md#the-rule"});
  EXPECT_TRUE(t[1].problems().empty());
  // The program's own table has every audited ID, each with a row and a test.
  const std::vector<TracedRequirement> built =
      pfx::cli::traceability_table(pfx::cli::audited_ids(), pfx::cli::read_traced(PFX_TRACED_FILE));
  for (const TracedRequirement& e : built) EXPECT_TRUE(e.problems().empty()) << e.id;
}

// With the suite's reports, the audit says which tests ran and passed for each ID (CLI-3).
namespace {
std::string fixture(const char* name) { return std::string(PFX_REQUIREMENTS_CASES) + "/" + name; }
}  // namespace

TEST(CliAudit, WithTheSuitesResultsItSaysWhichTestsRanAndPassedForEachId) {
  pfx::test::verifies("CLI-3");
  AuditOptions options = quick(6);
  options.json = true;
  options.results = fixture("stale_index");  // one passing test, Case.CoversAll, that records every ID
  const Result r = audit(options);
  EXPECT_EQ(r.status, pfx::cli::exit_ok) << r.out;
  const nlohmann::json report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report["results"], options.results);
  for (const nlohmann::json& row : report["table"]) {
    EXPECT_EQ(row["ran"]["passed"], nlohmann::json::array({"Case.CoversAll"})) << row["id"];
    EXPECT_TRUE(row["ran"]["failed"].empty()) << row["id"];
  }
}

TEST(CliAudit, ATestThatFailedInTheResultsFailsTheAuditAndIsNamed) {
  pfx::test::verifies("CLI-3");
  AuditOptions options = quick(7);
  options.results = fixture("failed_test");  // Case.Broken failed; it records INV-3
  const Result r = audit(options);
  EXPECT_EQ(r.status, pfx::cli::exit_mismatch) << r.out;
  EXPECT_NE(r.out.find("INV-3: failed in the results: Case.Broken"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ran: 1 passed, 1 failed, 0 skipped (failed: Case.Broken)"), std::string::npos) << r.out;

  options.results = fixture("missing_inv_8");  // no test records INV-8
  const Result missing = audit(options);
  EXPECT_EQ(missing.status, pfx::cli::exit_mismatch);
  EXPECT_NE(missing.out.find("INV-8: no test of the results passed"), std::string::npos) << missing.out;

  options.results = fixture("skipped_inv_8");  // INV-8's only test was skipped: it vouches for nothing
  const Result skipped = audit(options);
  EXPECT_EQ(skipped.status, pfx::cli::exit_mismatch) << skipped.out;
  EXPECT_NE(skipped.out.find("INV-8: no test of the results passed"), std::string::npos) << skipped.out;
  EXPECT_NE(skipped.out.find("ran: 0 passed, 0 failed, 1 skipped"), std::string::npos) << skipped.out;

  // Mutant test-report-skipped-element-ignored: pytest's JUnit report marks a skip with a <skipped/>
  // element alone, no result="skipped"; such a test is skipped too, and vouches for nothing.
  options.results = fixture("skipped_element_inv_8");
  const Result element = audit(options);
  EXPECT_EQ(element.status, pfx::cli::exit_mismatch) << element.out;
  EXPECT_NE(element.out.find("INV-8: no test of the results passed"), std::string::npos) << element.out;
  EXPECT_NE(element.out.find("ran: 0 passed, 0 failed, 1 skipped"), std::string::npos) << element.out;

  options.results = fixture("no_such_folder");
  EXPECT_THROW((void)audit(options), pfx::cli::InputError);
}

// Without a table the audit runs every check and says that the table was not checked, how to give it,
// and never that every check passed; its exit status is that of the checks that ran.
TEST(CliAudit, WithoutATableItSaysTheTableWasNotCheckedAndNeverThatEveryCheckPassed) {
  pfx::test::verifies("CLI-3");
  AuditOptions options = small(8);
  options.traceability.clear();
  const Result r = audit(options);
  EXPECT_EQ(r.status, pfx::cli::exit_ok) << r.out;
  EXPECT_NE(r.out.find("\nTraceability: not checked, no table given (give --traceability FILE: the tests' build "
                       "writes it to build/default/traceability/traced.json)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\npfx audit: the 5 invariant checks passed; traceability: not checked (give --traceability "
                       "FILE: the tests' build writes it to build/default/traceability/traced.json)\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("every check passed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("enforced in core:"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("MISSING"), std::string::npos) << r.out;
  for (const TracedRequirement& id : pfx::cli::audited_ids()) {
    EXPECT_NE(r.out.find(fmt::format("\n{}  {}\n", id.id, id.statement)), std::string::npos) << id.id;
  }

  options.json = true;
  const nlohmann::json report = nlohmann::json::parse(audit(options).out);
  EXPECT_EQ(report["traceability"], nlohmann::json({{"checked", false}, {"file", nullptr}}));
  EXPECT_EQ(report["checks"].size(), 5U);
  for (const nlohmann::json& row : report["table"]) {
    EXPECT_TRUE(row["has_row"].is_null()) << row.dump();
    EXPECT_TRUE(row["tests"].is_null()) << row.dump();
    EXPECT_TRUE(row["problems"].empty()) << row.dump();
  }
  EXPECT_TRUE(report["ok"].get<bool>());

  // A failed check still fails, and the table is still said not to be checked.
  options.json = false;
  options.cases = 50;
  options.step = greedy_step;
  const Result broken = audit(options);
  EXPECT_EQ(broken.status, pfx::cli::exit_mismatch) << broken.out;
  EXPECT_NE(broken.out.find("\npfx audit: FAILED\n  random runs: "), std::string::npos) << broken.out;
  EXPECT_NE(broken.out.find("\n  traceability: not checked (give --traceability FILE"), std::string::npos) << broken.out;
}

TEST(CliAudit, WithTheTestsBuildsTableItNamesTheFileAndChecksEveryId) {
  pfx::test::verifies("CLI-3");
  AuditOptions options = small(9);
  options.json = true;
  const Result r = audit(options);
  EXPECT_EQ(r.status, pfx::cli::exit_ok) << r.out;
  const nlohmann::json report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report["traceability"], nlohmann::json({{"checked", true}, {"file", PFX_TRACED_FILE}}));
  for (const nlohmann::json& row : report["table"]) {
    EXPECT_TRUE(row["has_row"].get<bool>()) << row.dump();
    EXPECT_FALSE(row["tests"].empty()) << row.dump();
  }
  options.json = false;
  EXPECT_NE(audit(options).out.find(fmt::format("\nTraceability ({}, as the tests' build traced it;", PFX_TRACED_FILE)),
            std::string::npos);
}

TEST(CliAudit, ARowForAnIdThisProgramDoesNotAuditFailsTheAuditAndIsNamed) {
  pfx::test::verifies("CLI-3");
  AuditOptions options = small(10);
  options.traced = traced_rows({}, {});
  options.traced->push_back({"INV-99", true, "core/x.hpp", {"Suite.Checks"}, {}, ""});
  const Result r = audit(options);
  EXPECT_EQ(r.status, pfx::cli::exit_mismatch) << r.out;
  EXPECT_NE(r.out.find("INV-99: a row in the table given, but this program audits no such ID"), std::string::npos)
      << r.out;
}

// A table that cannot be read is bad input: the message names the file and the problem, and no check
// runs (CLI-2).
TEST(CliAudit, AMissingUnreadableOrMalformedTableIsBadInputNamingTheFileAndTheProblem) {
  pfx::test::verifies("CLI-2 CLI-3");
  const auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const pfx::cli::InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no InputError)");
  };
  const auto parsed = [&](const std::string& text) {
    return message([&] { (void)pfx::cli::parse_traced(text, "--traceability t.json"); });
  };
  EXPECT_TRUE(parsed("[1,").starts_with("--traceability t.json: malformed JSON: ")) << parsed("[1,");
  EXPECT_TRUE(parsed("{\"ids\": [1]}").starts_with("--traceability t.json: not a traceability table: expected "
                                                   "{\"format\": \"pfx traceability 1\""))
      << parsed("{\"ids\": [1]}");
  EXPECT_TRUE(parsed("{\"format\": \"pfx traceability 2\", \"requirements\": []}")
                  .starts_with("--traceability t.json: not a traceability table of this program: \"format\" is the "
                               "string \"pfx traceability 2\""));
  EXPECT_EQ(parsed("{\"format\": \"pfx traceability 1\"}"),
            "--traceability t.json: field \"requirements\": expected an array, got nothing");
  const auto row = [](const std::string& fields) {
    return "{\"format\": \"pfx traceability 1\", \"requirements\": [" + fields + "]}";
  };
  const std::string good = R"({"id": "INV-1", "has_row": true, "enforced_in_core": "x", "tests": ["A.B"], "docs": []})";
  EXPECT_EQ(pfx::cli::parse_traced(row(good), "t").size(), 1U);
  EXPECT_EQ(parsed(row(R"({"id": "INV-1", "has_row": "yes", "enforced_in_core": "x", "tests": [], "docs": []})")),
            "--traceability t.json: requirements[0] (INV-1): field \"has_row\": expected true or false, got the "
            "string \"yes\"");
  EXPECT_EQ(parsed(row(R"({"id": "INV-1", "has_row": true, "enforced_in_core": "x", "tests": ["A.B", 2], "docs": []})")),
            "--traceability t.json: requirements[0] (INV-1): field \"tests\": element 1 is 2, expected a string");
  EXPECT_EQ(parsed(row(R"({"has_row": true, "enforced_in_core": "x", "tests": [], "docs": []})")),
            "--traceability t.json: requirements[0]: field \"id\": expected a requirement ID, got nothing");
  EXPECT_EQ(parsed(row(R"({"id": "INV-1", "has_row": true, "enforced_in_core": "x", "tests": [], "docs": [], "x": 1})")),
            "--traceability t.json: requirements[0] (INV-1): unknown field \"x\"");
  EXPECT_EQ(parsed(row(good + ", " + good)), "--traceability t.json: requirements[1] (INV-1): INV-1 has a second row");

  // Through the audit: a missing file, a folder, an empty file; nothing is printed, no check runs.
  AuditOptions options = small(11);
  for (const auto& [file, problem] : std::vector<std::pair<std::string, std::string>>{
           {"no-such-table.json", "cannot read the file (No such file or directory)"},
           {PFX_REQUIREMENTS_CASES, "cannot read the file: it is a directory"},
           {std::string(PFX_REQUIREMENTS_CASES) + "/stale_index/index.tsv", "malformed JSON: "}}) {
    options.traceability = file;
    std::ostringstream out;
    std::ostringstream err;
    const std::string what = message([&] { (void)pfx::cli::run_audit(options, {out, err, false}); });
    EXPECT_TRUE(what.starts_with(fmt::format("--traceability {}: {}", file, problem))) << what;
    EXPECT_EQ(out.str(), "") << file;
  }
}
