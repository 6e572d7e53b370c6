// Honest verdicts (docs/cli.md, "Interrupting a run" and "A check that compared nothing fails"): a run
// stopped by SIGINT or SIGTERM exits 130/143 and never says ok or passed; a check that compared
// nothing, or whose every request failed, fails; and the behaviours a seeded mistake would otherwise
// break unseen (each test names the mutant of verification/mutation/mutants.toml it kills).

#include "cli/in_process.hpp"
#include "support/requirement.hpp"

#include <pfx/cli/command.hpp>
#include <pfx/cli/progress.hpp>
#include <pfx/replay/replay.hpp>
#include <pfx/replay/soak.hpp>
#include <pfx/refinement/bridge.hpp>
#include <pfx/refinement/random_runs.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/engines/decisions_only_engine.hpp>
#include <pfx/engines/host_reference_engine.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using pfx::test::PfxRun;
using pfx::test::run_pfx;
using pfx::test::run_pfx_signalled;
using std::chrono::milliseconds;

constexpr milliseconds before_the_run{0};
constexpr milliseconds into_the_run{300};

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ---- 1. Every command stops between two units of work on SIGINT or SIGTERM ---------------------

TEST(Interrupt, EveryCommandStopsBeforeItsNextUnitOfWorkAndExitsWithTheSignal) {
  pfx::test::verifies("CLI-1 CLI-3 SOAK-1 CONF-2");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // A signal that arrived before the run: each command does no unit of work and says so.
  EXPECT_EXIT(run_pfx_signalled("conform --budget quick --no-progress", SIGINT, before_the_run),
              ::testing::ExitedWithCode(130), "1 of [0-9]+ prompts checked; no verdict\nINTERRUPTED by SIGINT after 1 prompt:");
  EXPECT_EXIT(run_pfx_signalled("conform --budget quick --json", SIGTERM, before_the_run), ::testing::ExitedWithCode(143),
              "\\{\"type\":\"interrupted\",\"signal\":15,\"prompts\":1,\"of\":[0-9]+,\"verdict\":null,\"ok\":false\\}");
  EXPECT_EXIT(run_pfx_signalled("audit --seed 1 --cases 10 --protocol-length 1", SIGINT, before_the_run, "every check passed"),
              ::testing::ExitedWithCode(130), "pfx audit: 0 of 5 checks ran; not passed\nINTERRUPTED by SIGINT after 0 checks");
  EXPECT_EXIT(run_pfx_signalled("audit --seed 1 --cases 10 --protocol-length 1 --json", SIGTERM, before_the_run),
              ::testing::ExitedWithCode(143), "\"interrupted\": 15,\n  \"ok\": false");
  EXPECT_EXIT(run_pfx_signalled("workload --requests 50", SIGINT, before_the_run), ::testing::ExitedWithCode(130),
              "^pfx workload: INTERRUPTED by SIGINT after 0 lines");
  EXPECT_EXIT(run_pfx_signalled("replay --requests 40 --engine none --vocab 512 --capacity 1024 --json", SIGTERM,
                                before_the_run),
              ::testing::ExitedWithCode(143), "\"interrupted\":true,\"ok\":false");
  // explain has no loop: its output is whole, yet a signal that came during it is not a success.
  EXPECT_EXIT(run_pfx_signalled("explain --record [1,2,3] --prompt [1,2,4]", SIGINT, before_the_run),
              ::testing::ExitedWithCode(130), "offset [0-9]+(.|\n)*pfx explain: INTERRUPTED by SIGINT: what was printed is whole");
}

TEST(Interrupt, AnInterruptedSummaryNeverSaysOkOrPassed) {
  // Stopped in the middle: what ran passed every check, yet the run did not pass.
  pfx::test::verifies("CLI-1 SOAK-1");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string soak = "soak --requests 100000000 --verify-every 1 --faults 0 --vocab 512 --capacity 1024 --no-progress";
  EXPECT_EXIT(run_pfx_signalled(soak, SIGTERM, into_the_run, "every check passed"), ::testing::ExitedWithCode(143),
              "verify: [1-9][0-9]* responses? compared with a cold run, 0 mismatches\n(.|\n)*INTERRUPTED by SIGTERM after "
              "[1-9][0-9]* requests?:");
  EXPECT_EXIT(run_pfx_signalled(soak + " --json", SIGINT, into_the_run), ::testing::ExitedWithCode(130),
              "\"verified\":[1-9][0-9]*,(.|\n)*\"interrupted\":true,\"ok\":false(.|\n)*\\{\"type\":\"interrupted\"");
  EXPECT_EXIT(run_pfx_signalled("replay --requests 200000 --engine none --vocab 512 --capacity 1024 --json", SIGINT,
                                into_the_run),
              ::testing::ExitedWithCode(130), "\"interrupted\":true,\"ok\":false(.|\n)*\\{\"type\":\"interrupted\"");
}

// Mutants soak-interruption-told-twice and replay-interrupted-status-left-to-run: a replay or soak
// stopped by a signal says so once, in its own line or record after the summary, and exits with the
// signal's status itself. A summary that judged the run stopped would say it twice; a run that
// returned its summary's status would get 130/143 from run()'s line for a success after a signal, a
// second one, on standard error (run_pfx_signalled exits 98 when the two streams together tell the
// interruption more than once).
TEST(Interrupt, AReplayOrSoakStoppedByASignalSaysSoOnce) {
  pfx::test::verifies("CLI-1 SOAK-1");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string soak = "soak --requests 100000000 --verify-every 1 --faults 0 --vocab 512 --capacity 1024 --no-progress";
  const std::string replay = "replay --requests 200000 --engine none --vocab 512 --capacity 1024 --no-progress";
  for (const std::string& json : {std::string(), std::string(" --json")}) {
    EXPECT_EXIT(run_pfx_signalled(soak + json, SIGINT, into_the_run), ::testing::ExitedWithCode(130),
                json.empty() ? "INTERRUPTED by SIGINT after [1-9][0-9]* requests?:" : "\\{\"type\":\"interrupted\"");
    EXPECT_EXIT(run_pfx_signalled(replay + json, SIGTERM, into_the_run), ::testing::ExitedWithCode(143),
                json.empty() ? "INTERRUPTED by SIGTERM after [0-9]+ requests?:" : "\\{\"type\":\"interrupted\"");
  }
}

TEST(Interrupt, TheAuditsRandomRunsStopBetweenTwoCasesWhenAsked) {
  pfx::test::verifies("CLI-3");
  std::size_t asked = 0;
  const pfx::refinement::RandomRunsReport r =
      pfx::refinement::run_random_cases(7, 50, 24, pfx::refinement::step_both, [&](std::size_t done) {
        EXPECT_EQ(done, asked++);
        return done < 3;
      });
  EXPECT_EQ(r.cases, 3U);
  EXPECT_EQ(r.steps, 3U * 24U);
  EXPECT_TRUE(r.stopped);
  const pfx::refinement::RandomRunsReport all = pfx::refinement::run_random_cases(7, 5, 24, pfx::refinement::step_both, {});
  EXPECT_EQ(all.cases, 5U);
  EXPECT_FALSE(all.stopped);
}

// ---- 2. A check that compared nothing fails -----------------------------------------------------

TEST(NothingCompared, ASoakShorterThanVerifyEveryStillComparesItsLastRequest) {
  pfx::test::verifies("SOAK-1");
  const PfxRun ran = run_pfx("soak --requests 50 --faults 0 --no-progress");
  EXPECT_EQ(ran.status, pfx::cli::exit_ok) << ran.out << ran.err;
  EXPECT_TRUE(has(ran.out, "verify: 1 response compared with a cold run, 0 mismatches")) << ran.out;

  pfx::engines::HostReferenceEngine engine(pfx::engines::ReferenceModelShape{.vocab = 512, .chunk = 16});
  pfx::replay::SoakSettings settings;
  settings.workload = {.seed = 5, .vocab = 512, .requests = 30, .capacity = 1024, .sessions = 4};
  settings.replay.lane.capacity = 1024;
  settings.replay.fault_rate = 0;
  settings.replay.verify_every = 1000;
  settings.warmup = 10;
  settings.memory_every = 10;
  std::size_t last_verified = 0;
  const pfx::replay::OnRequest listener = [&](const pfx::replay::RequestReport& r) {
    if (r.bitexact) last_verified = r.number;
  };
  const pfx::replay::SoakSummary s = pfx::replay::soak(engine, settings, listener);
  EXPECT_EQ(s.replay.verified, 1U);
  EXPECT_EQ(last_verified, 30U);
  EXPECT_TRUE(s.ok());
}

TEST(NothingCompared, EveryRequestFailedOrNoneComparedFailsReplayVerifyAndSoak) {
  pfx::test::verifies("CLI-1 SOAK-1");
  const PfxRun soak = run_pfx("soak --requests 50 --faults 1 --no-progress");
  EXPECT_EQ(soak.status, pfx::cli::exit_mismatch) << soak.out;
  EXPECT_TRUE(has(soak.out, "FAILED: every request failed (50 of 50)")) << soak.out;
  EXPECT_FALSE(has(soak.out, "every check passed")) << soak.out;
  const PfxRun soak_json = run_pfx("soak --requests 50 --faults 1 --json");
  EXPECT_EQ(soak_json.status, pfx::cli::exit_mismatch);
  const nlohmann::json j = nlohmann::json::parse(soak_json.out);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["verified"], 0);
  EXPECT_TRUE(has(j["unchecked"].get<std::string>(), "every request failed"));

  const PfxRun replay = run_pfx("replay --verify --faults 1 --requests 5 --vocab 512 --capacity 1024 --no-progress");
  EXPECT_EQ(replay.status, pfx::cli::exit_mismatch) << replay.out;
  EXPECT_TRUE(has(replay.out, "verify: 0 responses compared")) << replay.out;
  EXPECT_TRUE(has(replay.out, "FAILED: every request failed (5 of 5)")) << replay.out;

  // The summary's own judgement, request by request.
  pfx::replay::ReplaySummary s;
  s.requests = 3;
  s.verified = 0;
  EXPECT_FALSE(s.passed(true));
  EXPECT_TRUE(has(s.unchecked(true), "no response was compared"));
  EXPECT_TRUE(s.passed(false));  // without --verify nothing was asked to be compared
  s.verified = 1;
  EXPECT_TRUE(s.passed(true));
  s.failures = 3;
  EXPECT_FALSE(s.passed(false));
  s.requests = 0;
  s.failures = 0;
  EXPECT_TRUE(s.unchecked(false).empty());
}

TEST(NothingCompared, ConformStatesHowManyRunsItComparedAndAuditRefusesABoundThatChecksNothing) {
  pfx::test::verifies("CONF-2 CLI-3");
  const PfxRun text = run_pfx("conform --budget quick");
  EXPECT_EQ(text.status, 0) << text.out << text.err;
  EXPECT_TRUE(has(text.out, "\ncompared: ")) << text.out;
  const PfxRun json = run_pfx("conform --budget quick --json");
  const nlohmann::json j = nlohmann::json::parse(json.out);
  std::size_t resumes = 0;
  for (const auto& g : j["grids"]) resumes += g["resumes"].get<std::size_t>();
  EXPECT_EQ(j["comparisons"].get<std::size_t>(), resumes + j["cold_runs"].get<std::size_t>() - j["prompts"].get<std::size_t>());
  EXPECT_TRUE(has(text.out, "compared: " + std::to_string(j["comparisons"].get<std::size_t>()) + " runs")) << text.out;

  for (const char* line : {"audit --protocol-length 0", "audit --cases 0 --protocol-length 1"}) {
    const PfxRun audit = run_pfx(line);
    EXPECT_EQ(audit.status, pfx::cli::exit_bad_input) << line << audit.out;
    EXPECT_TRUE(has(audit.err, "pfx audit: --")) << audit.err;
    EXPECT_EQ(audit.out, "") << line;
  }
}

// ---- 5. What a new user trips over ----------------------------------------------------------------

TEST(NewUser, MessagesNameTheMistake) {
  pfx::test::verifies("CLI-2");
  const PfxRun unknown = run_pfx("frobnicate");
  EXPECT_EQ(unknown.status, pfx::cli::exit_bad_input);
  EXPECT_TRUE(has(unknown.err, "pfx: unknown command 'frobnicate'; the commands are replay, workload, audit, explain, "
                               "soak, conform"))
      << unknown.err;
  const PfxRun explain = run_pfx("explain --record 1,2,3 --prompt [1]");
  EXPECT_EQ(explain.status, pfx::cli::exit_bad_input);
  EXPECT_TRUE(has(explain.err, "inline JSON starts with [ or {")) << explain.err;
  for (const char* vocab : {"0", "1"}) {
    const PfxRun small = run_pfx(std::string("replay --requests 2 --vocab ") + vocab);
    EXPECT_EQ(small.status, pfx::cli::exit_bad_input) << vocab;
    EXPECT_TRUE(has(small.err, "--vocab")) << small.err;
  }
  const PfxRun help = run_pfx("replay --help");
  EXPECT_TRUE(has(help.out, "[2 - ")) << help.out;  // the range --vocab takes begins at 2
  EXPECT_FALSE(has(help.out, "[1 - 4294967")) << help.out;
}

TEST(NewUser, TheProgressBarCountsWhatTheRunCounts) {
  pfx::test::verifies("CLI-1 CONF-2");
  std::ostringstream terminal;
  {
    pfx::cli::ProgressBar bar(terminal, true, 10, "prompts", milliseconds(0));
    bar.update(3);
    EXPECT_TRUE(has(terminal.str(), "3/10 prompts")) << terminal.str();
    bar.restart(5, "checks", "audit: rule (1/5)");
    bar.update(0);
    EXPECT_TRUE(has(terminal.str(), "audit: rule (1/5) [")) << terminal.str();
    EXPECT_TRUE(has(terminal.str(), "0/5 checks")) << terminal.str();
  }
  std::ostringstream off;
  pfx::cli::ProgressBar disabled(off, false, 10, "prompts", milliseconds(0));
  disabled.update(3);
  EXPECT_EQ(off.str(), "");
}

TEST(NewUser, TheAuditDrawsAProgressLineOnATerminalOnly) {
  pfx::test::verifies("CLI-3");
  const std::vector<std::string> arguments = {"audit", "--seed", "1", "--cases", "20", "--protocol-length", "1"};
  std::ostringstream out;
  std::ostringstream terminal;
  EXPECT_EQ(pfx::cli::run(arguments, out, terminal, true), pfx::cli::exit_ok) << out.str();
  for (const char* phase : {"audit: rule (1/5)", "audit: protocol (2/5)", "audit: configure (3/5)",
                            "audit: random runs (4/5)", "audit: model checker (5/5)"}) {
    EXPECT_TRUE(has(terminal.str(), phase)) << phase << ": " << terminal.str();
  }
  EXPECT_TRUE(terminal.str().ends_with("\r\033[K")) << "the line is erased before the report";
  EXPECT_FALSE(has(out.str(), "\033[K"));
  std::ostringstream quiet;
  std::vector<std::string> no_progress = arguments;
  no_progress.emplace_back("--no-progress");
  EXPECT_EQ(pfx::cli::run(no_progress, out, quiet, true), pfx::cli::exit_ok);
  EXPECT_EQ(quiet.str(), "");
  std::ostringstream piped;
  EXPECT_EQ(pfx::cli::run(arguments, out, piped, false), pfx::cli::exit_ok);
  EXPECT_EQ(piped.str(), "");
}

// ---- 6. Behaviours a seeded mistake would break unseen ---------------------------------------------

TEST(Pinned, AMalformedEnvironmentVariableIsBadInputNotAnInternalError) {
  // Mutant cli-config-error-is-bad-input.
  pfx::test::verifies("CLI-2");
  for (const char* variable : {"TF_GLM53_PREFIX_CACHE", "TF_GLM53_PREFIX_CACHE_MIN"}) {
    ASSERT_EQ(::setenv(variable, "maybe", 1), 0);
    const PfxRun ran = run_pfx("replay --requests 2 --engine none --vocab 512 --capacity 1024");
    ::unsetenv(variable);
    EXPECT_EQ(ran.status, pfx::cli::exit_bad_input) << variable << ": " << ran.err;
    EXPECT_TRUE(has(ran.err, variable)) << ran.err;
  }
}

TEST(Pinned, EngineNoneRefusesAVocabularyOfZero) {
  // Mutant engines-decisions-only-vocab-zero.
  pfx::test::verifies("CLI-5");
  EXPECT_THROW(pfx::engines::DecisionsOnlyEngine(64, 0), std::invalid_argument);
  EXPECT_THROW(pfx::engines::DecisionsOnlyEngine(0, 64), std::invalid_argument);
  EXPECT_NO_THROW(pfx::engines::DecisionsOnlyEngine(1, 1));
  const PfxRun ran = run_pfx("replay --requests 2 --engine none --vocab 0");
  EXPECT_EQ(ran.status, pfx::cli::exit_bad_input) << ran.err;
}

}  // namespace
