// pfx::replay's workload and soak (replay/): the workload is a fixed function of its options that
// fits them, holds every kind of request and stays within capacity for ever; through injected
// failures every sampled response equals its cold run, the request after each failure among them; a
// drifting engine is a mismatch; memory that grows after the warm-up fails the run. The command that
// prints it is proptest/cli's.

#include "support/requirement.hpp"

#include <pfx/driver/errors.hpp>
#include <pfx/replay/soak.hpp>
#include <pfx/replay/workload.hpp>
#include <pfx/engines/drifting_engine.hpp>
#include <pfx/engines/host_reference_engine.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace {

using pfx::replay::RequestReport;
using pfx::replay::SoakSettings;
using pfx::replay::SoakSummary;
using pfx::replay::TraceItem;
using pfx::replay::TraceRequest;

// The workload is a fixed function of its options, over their whole range (seeds up to 2^64 - 1,
// vocabularies past the 32000 it draws from): the same options give the same items; it holds exactly
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
    RC_ASSERT(*item == whole[items]);
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

TEST(Workload, HasEveryKindOfRequestAndFitsItsLimits) {
  pfx::test::verifies("CLI-1");
  for (const std::uint64_t seed : {1u, 253u, 4096u}) {
    const pfx::replay::WorkloadOptions options{.seed = seed, .vocab = 300, .requests = 60, .capacity = 3000};
    const std::vector<TraceItem> items = pfx::replay::embedded_workload(options);
    std::set<std::string> kinds;
    std::size_t requests = 0;
    for (const TraceItem& item : items) {
      if (std::holds_alternative<pfx::replay::TraceClear>(item)) {
        kinds.insert("clear");
        continue;
      }
      const auto& request = std::get<TraceRequest>(item);
      ++requests;
      kinds.insert(request.label);
      ASSERT_FALSE(request.prompt.empty());
      ASSERT_LE(request.prompt.size() + request.max_new_tokens, options.capacity);
      for (const pfx::token t : request.prompt) ASSERT_TRUE(t >= 0 && t < 300) << t;
    }
    EXPECT_EQ(requests, options.requests);
    EXPECT_EQ(kinds, (std::set<std::string>{"new session", "turn", "regenerate", "edit late", "edit early",
                                            "other session", "shorter", "short", "clear"}));
    EXPECT_EQ(items, pfx::replay::embedded_workload(options)) << "the workload is a function of its options";
  }
  EXPECT_NE(pfx::replay::embedded_workload({.seed = 1}), pfx::replay::embedded_workload({.seed = 2}));
}

}  // namespace
