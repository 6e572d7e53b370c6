// `pfx soak` (docs/cli.md): the workload is a fixed function of its options that fits them, and stays
// within capacity for ever; through injected failures every sampled response equals its cold run,
// the request after each failure among them; a drifting engine is a mismatch; memory that grows
// after the warm-up fails the run; bad options exit 2.

#include "support/lanes.hpp"
#include "support/requirement.hpp"
#include "cli/in_process.hpp"

#include <pfx/cli/command.hpp>
#include <pfx/cli/trace.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/replay/soak.hpp>
#include <pfx/replay/workload.hpp>
#include <pfx/engines/drifting_engine.hpp>
#include <pfx/engines/host_reference_engine.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

using pfx::replay::RequestReport;
using pfx::replay::SoakSettings;
using pfx::replay::SoakSummary;
using pfx::replay::TraceItem;
using pfx::replay::TraceRequest;

// The workload is a fixed function of its options, over their whole range (seeds up to 2^64 - 1,
// vocabularies past the 32000 it draws from): the same options give the same lines; it holds exactly
// --requests requests, numbered as the lines of `pfx workload`, each fitting the vocabulary and the
// capacity; and the embedded workload is that stream.
PFX_PROPERTY(Soak, TheWorkloadIsAFixedFunctionOfItsOptionsAndFitsThem, "SOAK-1", ()) {
  const pfx::replay::WorkloadOptions options{
      .seed = *rc::gen::oneOf(rc::gen::arbitrary<std::uint64_t>(), rc::gen::element<std::uint64_t>(0, 1U << 31, UINT64_MAX)),
      .vocab = *rc::gen::oneOf(rc::gen::inRange<std::size_t>(2, 70000), rc::gen::element<std::size_t>(2, 32000, 32001, 1U << 24)),
      .requests = *rc::gen::inRange<std::size_t>(1, 80),
      .capacity = *rc::gen::inRange<std::size_t>(256, 4097),
      .sessions = *rc::gen::inRange<std::size_t>(0, 9)};
  const pfx::replay::ItemSource first = pfx::replay::workload_stream(options);
  const std::vector<TraceItem> whole = pfx::replay::embedded_workload(options);  // a second run of the same options
  std::size_t items = 0;
  std::size_t requests = 0;
  while (const std::optional<TraceItem> item = first()) {
    RC_ASSERT(items < whole.size());
    RC_ASSERT(pfx::cli::to_trace_line(*item) == pfx::cli::to_trace_line(whole[items]));
    ++items;
    RC_ASSERT(std::visit([](const auto& i) { return i.line; }, *item) == items);  // line n of `pfx workload`
    const auto* request = std::get_if<TraceRequest>(&*item);
    if (request == nullptr) continue;
    ++requests;
    RC_ASSERT(!request->prompt.empty());
    RC_ASSERT(request->prompt.size() + request->max_new_tokens <= options.capacity);
    for (const pfx::token t : request->prompt) RC_ASSERT(static_cast<std::size_t>(t) < std::min<std::size_t>(options.vocab, 32000));
  }
  RC_ASSERT(items == whole.size());
  RC_ASSERT(requests == options.requests);
}

TEST(Soak, ALongStreamWithBoundedSessionsKeepsEveryRequestWithinCapacity) {
  pfx::test::verifies("SOAK-1");
  const std::size_t capacity = 300;
  const pfx::replay::ItemSource next =
      pfx::replay::workload_stream({.seed = 3, .vocab = 64, .requests = 20000, .capacity = capacity, .sessions = 8});
  std::size_t requests = 0;
  std::size_t new_sessions = 0;
  while (const std::optional<TraceItem> item = next()) {
    const auto* request = std::get_if<TraceRequest>(&*item);
    if (request == nullptr) continue;
    ++requests;
    new_sessions += request->label == "new session" ? 1 : 0;
    ASSERT_FALSE(request->prompt.empty());
    ASSERT_LE(request->prompt.size() + request->max_new_tokens, capacity) << "request " << requests;
  }
  EXPECT_EQ(requests, 20000u);
  EXPECT_GT(new_sessions, 100u) << "sessions end and new ones start";
}

struct Soaked {
  SoakSummary summary;
  std::vector<RequestReport> reports;
};

/// A small model and a short run, so that each test takes about a second.
SoakSettings small_soak(std::size_t requests) {
  SoakSettings settings;
  settings.workload = {.seed = 11, .vocab = 64, .requests = requests, .capacity = 600, .sessions = 8};
  settings.replay.lane = {.capacity = 600, .config = {.keep_min = 16}, .poison = true};
  settings.replay.fault_rate = 0.003;  // per call: with chunk 8, about one request in ten fails
  settings.replay.seed = 11;
  settings.replay.verify_every = 10;
  settings.warmup = requests / 4;
  settings.memory_every = 50;
  settings.check_memory = false;  // a second's run in a test process: the tests below say when
  return settings;
}

Soaked run_soak(pfx::driver::Engine& engine, const SoakSettings& settings, const pfx::replay::OnRequest& also = {}) {
  Soaked out;
  out.summary = pfx::replay::soak(engine, settings, [&](const RequestReport& r) {
    out.reports.push_back(r);
    if (also) also(r);
  });
  return out;
}

TEST(Soak, ThroughInjectedFailuresEverySampledResponseEqualsItsColdRunAndSoDoesTheOneAfterEachFailure) {
  pfx::test::verifies("SOAK-1 DRV-4");
  pfx::engines::HostReferenceEngine engine({.vocab = 64, .chunk = 8});
  const SoakSettings settings = small_soak(400);
  const Soaked r = run_soak(engine, settings);
  const pfx::replay::ReplaySummary& s = r.summary.replay;
  EXPECT_EQ(s.requests, 400u);
  EXPECT_GT(s.failures, 0u);
  EXPECT_EQ(r.summary.injected, s.failures);
  EXPECT_EQ(s.stale_reads, 0u);
  EXPECT_EQ(s.mismatches, 0u);
  EXPECT_GE(s.verified + s.failures, 400u / settings.replay.verify_every);
  EXPECT_TRUE(r.summary.ok());
  ASSERT_EQ(r.reports.size(), 400u);
  std::size_t after_failure = 0;
  for (std::size_t i = 0; i < r.reports.size(); ++i) {
    const RequestReport& report = r.reports[i];
    if (!report.error.empty()) {
      EXPECT_TRUE(report.injected) << report.error;
      continue;
    }
    const bool sampled = report.number % settings.replay.verify_every == 0;
    const bool follows_failure = i > 0 && !r.reports[i - 1].error.empty();
    after_failure += follows_failure ? 1 : 0;
    EXPECT_EQ(report.bitexact.has_value(), sampled || follows_failure) << "request " << report.number;
    if (report.bitexact) {
      EXPECT_TRUE(*report.bitexact) << report.mismatch;
    }
  }
  EXPECT_GT(after_failure, 0u);
  // The baseline after the warm-up, a sample every 50 requests, and the end.
  ASSERT_TRUE(r.summary.baseline.has_value());
  EXPECT_EQ(r.summary.baseline->requests, 100u);
  EXPECT_EQ(r.summary.samples.size(), 1u + 300u / 50u);
  EXPECT_EQ(r.summary.samples.back().requests, 400u);
}

using pfx::engines::DriftingEngine;

TEST(Soak, AnEngineThatIsNotDeterministicFailsTheSoakAsAMismatch) {
  pfx::test::verifies("SOAK-1");
  pfx::engines::HostReferenceEngine inner({.vocab = 64, .chunk = 8});
  DriftingEngine engine(inner);
  const Soaked r = run_soak(engine, small_soak(100));
  EXPECT_GT(r.summary.replay.verified, 0u);
  EXPECT_GT(r.summary.replay.mismatches, 0u);
  EXPECT_FALSE(r.summary.ok());
}

TEST(Soak, MemoryThatGrowsAfterTheWarmUpFailsTheRun) {
  pfx::test::verifies("SOAK-1");
  ASSERT_GT(pfx::replay::resident_memory_kib(), 0u);
  pfx::engines::HostReferenceEngine engine({.vocab = 64, .chunk = 8});
  SoakSettings settings = small_soak(200);
  settings.replay.fault_rate = 0;
  settings.check_memory = true;
  settings.tolerance = pfx::replay::RssTolerance::parse("4096", "--rss-tolerance");
  // A leak of 256 KiB a request after the warm-up, touched so that it is resident: 37.5 MiB in all.
  std::vector<std::vector<char>> leaked;
  const pfx::replay::OnRequest leak = [&](const RequestReport& report) {
    if (report.number <= settings.warmup) return;
    leaked.emplace_back(std::size_t{256} << 10);
    std::memset(leaked.back().data(), 1, leaked.back().size());
  };
  const Soaked r = run_soak(engine, settings, leak);
  ASSERT_TRUE(r.summary.baseline.has_value());
  EXPECT_GT(r.summary.growth_kib(), 4096u);
  EXPECT_EQ(r.summary.allowed_kib, 4096u);
  EXPECT_FALSE(r.summary.memory_flat());
  EXPECT_FALSE(r.summary.ok());
  EXPECT_EQ(r.summary.replay.mismatches, 0u) << "only memory failed";
}

TEST(Soak, TheToleranceIsKibOrAPercentageOfTheBaseline) {
  pfx::test::verifies("SOAK-1");
  EXPECT_EQ(pfx::replay::RssTolerance::parse("8192", "--rss-tolerance").allowed_kib(100000), 8192u);
  EXPECT_EQ(pfx::replay::RssTolerance::parse("5%", "--rss-tolerance").allowed_kib(100000), 5000u);
  EXPECT_EQ(pfx::replay::RssTolerance::parse("5%", "--rss-tolerance").describe(), "5% of the baseline");
  for (const char* bad : {"", "%", "-5", "5 KiB", "5.5%", "lots"}) {
    EXPECT_THROW((void)pfx::replay::RssTolerance::parse(bad, "--rss-tolerance"), pfx::driver::ConfigError) << bad;
  }
}

using pfx::test::PfxRun;
using pfx::test::run_pfx;

TEST(SoakCommand, TheJsonSummaryCountsEveryCheckAndBadOptionsRunNothing) {
  pfx::test::verifies("SOAK-1 CLI-2");
  const PfxRun run = run_pfx(
      "soak --json --requests 300 --warmup 100 --verify-every 10 --faults 0.003 --vocab 64 --chunk 8 --capacity 600 "
      "--keep-min 16 --rss-tolerance 1000%");
  ASSERT_EQ(run.status, pfx::cli::exit_ok) << run.err << run.out;
  const nlohmann::json summary = nlohmann::json::parse(run.out);
  EXPECT_EQ(summary["type"], "soak");
  EXPECT_EQ(summary["requests"], 300);
  EXPECT_EQ(summary["mismatches"], 0);
  EXPECT_EQ(summary["stale_reads"], 0);
  EXPECT_GE(summary["verified"].get<std::size_t>() + summary["failures"].get<std::size_t>(), 300u / 10u);
  EXPECT_EQ(summary["failures"], summary["injected"]);
  EXPECT_EQ(summary["ok"], true);
  EXPECT_EQ(summary["memory"]["samples"].size(), 1u + 1u);  // the baseline and the end
  EXPECT_EQ(summary["memory"]["samples"][0]["requests"], 100);
  EXPECT_EQ(summary["settings"]["verify_every"], 10);

  const PfxRun bad_tolerance = run_pfx("soak --rss-tolerance lots");
  EXPECT_EQ(bad_tolerance.status, pfx::cli::exit_bad_input);
  EXPECT_NE(bad_tolerance.err.find("--rss-tolerance: expected KiB"), std::string::npos)
      << bad_tolerance.err;
  const PfxRun no_time_to_watch = run_pfx("soak --requests 100 --warmup 100");
  EXPECT_EQ(no_time_to_watch.status, pfx::cli::exit_bad_input);
  EXPECT_NE(no_time_to_watch.err.find("--warmup 100 leaves no request"), std::string::npos)
      << no_time_to_watch.err;
  EXPECT_EQ(bad_tolerance.out + no_time_to_watch.out, "") << "nothing was run";
}

TEST(SoakCommand, AnyNumberOfRequestsRunsTheDefaultWarmUpShrinksToFit) {
  pfx::test::verifies("SOAK-1 CLI-2");
  for (const std::size_t requests : {1, 2, 3, 9}) {
    const PfxRun run = run_pfx("soak --json --vocab 64 --chunk 8 --capacity 600 --rss-tolerance 1000% --requests " +
                               std::to_string(requests));
    ASSERT_EQ(run.status, pfx::cli::exit_ok) << requests << ": " << run.err;
    const nlohmann::json summary = nlohmann::json::parse(run.out);
    EXPECT_EQ(summary["requests"], requests);
    EXPECT_EQ(summary["settings"]["warmup"], requests / 2);  // the default 2000, shrunk
  }
}

TEST(SoakCommand, TheFaultSeedChangesTheFaultsAloneAndDefaultsToTheSeed) {
  pfx::test::verifies("DRV-4 CLI-1");
  const std::string base = "replay --json --requests 16 --vocab 512 --capacity 1024 --chunk 8 --faults 0.05 --seed 3 ";
  const auto failed = [](const std::string& out) {
    std::vector<std::size_t> numbers;
    std::size_t prompt_tokens = 0;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j["type"] == "request") prompt_tokens += j["prompt_tokens"].get<std::size_t>();
      if (j["type"] == "request" && j.contains("failed")) numbers.push_back(j["request"].get<std::size_t>());
    }
    return std::make_pair(numbers, prompt_tokens);
  };
  const auto by_seed = failed(run_pfx(base).out);
  EXPECT_EQ(failed(run_pfx(base + "--fault-seed 3").out), by_seed);  // the default is --seed
  bool differs = false;
  for (const char* other : {"1", "2", "4", "18446744073709551615"}) {
    const auto with_other = failed(run_pfx(base + "--fault-seed " + other).out);
    EXPECT_EQ(with_other.second, by_seed.second) << "the workload must not change with --fault-seed " << other;
    differs = differs || with_other.first != by_seed.first;
  }
  EXPECT_TRUE(differs) << "no other --fault-seed changed which requests failed";
  EXPECT_EQ(run_pfx(base + "--fault-seed 18446744073709551616").status, pfx::cli::exit_bad_input);
  EXPECT_EQ(run_pfx("soak --requests 2 --fault-seed -1").status, pfx::cli::exit_bad_input);
}

std::vector<std::string> keys(const nlohmann::ordered_json& object) {
  std::vector<std::string> out;
  for (const auto& [key, value] : object.items()) out.push_back(key);
  return out;
}

TEST(SoakCommand, ReplayAndSoakSummariesWriteTheSameCountersAndKeepTheirFields) {
  pfx::test::verifies("SOAK-1 CLI-1");
  const PfxRun soak = run_pfx("soak --json --requests 150 --warmup 100 --verify-every 10 --vocab 64 --chunk 8 "
                              "--capacity 600 --keep-min 16 --rss-tolerance 1000%");
  const PfxRun replay = run_pfx("replay --json --requests 12 --seed 5 --vocab 512 --chunk 16 --capacity 2048");
  ASSERT_EQ(soak.status, pfx::cli::exit_ok) << soak.err << soak.out;
  ASSERT_EQ(replay.status, pfx::cli::exit_ok) << replay.err;
  const auto s = nlohmann::ordered_json::parse(soak.out);
  const auto r = nlohmann::ordered_json::parse(replay.out.substr(replay.out.rfind("\n{") + 1));
  const std::vector<std::string> counters = {"requests",      "served",         "failures",       "stale_reads",
                                             "clears",        "prompt_tokens",  "reused_tokens",  "prefill_tokens",
                                             "reuse_fraction", "mismatches"};
  const auto then = [&](std::vector<std::string> head, const std::vector<std::string>& tail) {
    head.insert(head.end(), counters.begin(), counters.end());
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  // "interrupted" before "ok": the verdict is read last; "unchecked" only appears when nothing was checked.
  EXPECT_EQ(keys(s), then({"type"}, {"injected", "verified", "memory", "elapsed_s", "interrupted", "ok", "settings"}));
  EXPECT_EQ(keys(r), then({"type"}, {"divergences", "elapsed_s", "interrupted", "ok", "settings"}));  // divergences: sharded ranks
  EXPECT_EQ(keys(s["settings"]), (std::vector<std::string>{"engine", "chunk", "vocab", "capacity", "reuse", "keep_min",
                                                            "faults", "seed", "fault_seed", "verify_every", "warmup",
                                                            "rss_tolerance"}));
  EXPECT_EQ(keys(r["settings"]), (std::vector<std::string>{"trace", "engine", "chunk", "vocab", "capacity", "reuse",
                                                            "keep_min", "rule_chunk", "verify", "faults", "seed",
                                                            "fault_seed", "dcp", "interleave"}));
  for (const nlohmann::ordered_json* j : {&s, &r}) {
    EXPECT_EQ((*j)["served"].get<std::size_t>() + (*j)["failures"].get<std::size_t>(), (*j)["requests"]) << *j;
    EXPECT_EQ((*j)["reused_tokens"].get<std::size_t>() + (*j)["prefill_tokens"].get<std::size_t>(),
              (*j)["prompt_tokens"]) << *j;
    EXPECT_DOUBLE_EQ((*j)["reuse_fraction"].get<double>(),
                     (*j)["reused_tokens"].get<double>() / (*j)["prompt_tokens"].get<double>());
    EXPECT_EQ((*j)["settings"]["reuse"], true);
  }
  EXPECT_EQ(s["settings"]["engine"], "host reference engine (vocab 64, width 16, 2 layers, chunk 8)");
  EXPECT_EQ(s["settings"]["keep_min"], 16);
  EXPECT_EQ(s["requests"], 150);
  EXPECT_EQ(r["requests"], 12);
}

}  // namespace
