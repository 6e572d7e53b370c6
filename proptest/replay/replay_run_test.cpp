// pfx::replay::run (replay/): random workloads replayed with verification are bit-exact, with and
// without injected failures; without an engine every decision is the reference engine's; an engine
// that breaks THM-1, or changes a decode row the response vouches for, is caught as a mismatch, and one
// that reads a poisoned row fails the run. The command that prints it is proptest/cli's.

#include "support/lanes.hpp"
#include "support/requirement.hpp"

#include <pfx/replay/replay.hpp>
#include <pfx/replay/workload.hpp>
#include <pfx/driver/threads_collective.hpp>
#include <pfx/engines/dcp_reference_engine.hpp>
#include <pfx/engines/decisions_only_engine.hpp>
#include <pfx/engines/drifting_engine.hpp>
#include <pfx/engines/host_reference_engine.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <optional>
#include <thread>
#include <variant>
#include <vector>

namespace {

using pfx::replay::ReplaySettings;
using pfx::replay::ReplaySummary;
using pfx::replay::RequestReport;
using pfx::replay::TraceItem;
using pfx::replay::TraceRequest;

struct Replayed {
  ReplaySummary summary;
  std::vector<RequestReport> reports;
};

Replayed replay(const std::vector<TraceItem>& items, pfx::driver::Engine& engine, const ReplaySettings& settings) {
  Replayed out;
  out.summary = pfx::replay::run(items, engine, settings, [&](const RequestReport& r) { out.reports.push_back(r); });
  return out;
}

/// The offset of every served request keeps the rule's bounds, and the totals add up.
void check_reports(const Replayed& r, const std::vector<TraceItem>& items, std::size_t chunk, std::size_t keep_min) {
  std::size_t reused = 0;
  std::size_t prompt_tokens = 0;
  std::size_t number = 0;
  for (const TraceItem& item : items) {
    const auto* request = std::get_if<TraceRequest>(&item);
    if (request == nullptr) continue;
    const RequestReport& report = r.reports.at(number++);
    RC_ASSERT(report.line == request->line);
    RC_ASSERT(report.prompt_tokens == request->prompt.size());
    if (!report.error.empty()) continue;
    const std::size_t offset = report.decision.offset;
    RC_ASSERT(offset % chunk == 0);                                     // INV-5
    RC_ASSERT(offset < request->prompt.size());                         // INV-3
    RC_ASSERT(offset == 0 || offset >= keep_min);                       // INV-4
    RC_ASSERT(report.prefill_tokens == request->prompt.size() - offset);
    RC_ASSERT(report.generated_tokens == request->max_new_tokens);
    reused += offset;
    prompt_tokens += request->prompt.size();
  }
  RC_ASSERT(number == r.summary.requests);
  RC_ASSERT(r.summary.reused_tokens == reused);
  RC_ASSERT(r.summary.prompt_tokens == prompt_tokens);
  RC_ASSERT(r.summary.prefill_tokens == prompt_tokens - reused);
}

/// A random embedded workload for a small random model, and settings that verify it.
struct Case {
  pfx::engines::ReferenceModelShape model;
  std::vector<TraceItem> items;
  ReplaySettings settings;
};

Case random_case() {
  Case c;
  c.model = *pfx::test::model_shapes();
  const std::size_t capacity = 320;
  c.items = pfx::replay::embedded_workload({.seed = *rc::gen::arbitrary<std::uint64_t>(), .vocab = c.model.vocab,
                                            .requests = *rc::gen::inRange<std::size_t>(1, 14), .capacity = capacity});
  c.settings.lane = {.capacity = capacity, .config = {.keep_min = *rc::gen::element<std::size_t>(0, 1, 16, 64)}, .poison = true};
  c.settings.verify = true;
  c.settings.seed = *rc::gen::arbitrary<std::uint64_t>();
  return c;
}

PFX_PROPERTY(Replay, EveryResponseOfAWorkloadEqualsItsColdRun, "CLI-1 THM-1", ()) {
  const Case c = random_case();
  pfx::engines::HostReferenceEngine engine(c.model);
  const Replayed r = replay(c.items, engine, c.settings);
  RC_ASSERT(r.summary.failures == 0u);
  RC_ASSERT(r.summary.verified == r.summary.requests);
  RC_ASSERT(r.summary.mismatches == 0u);
  RC_ASSERT(r.summary.ok());
  for (const RequestReport& report : r.reports) RC_ASSERT(report.bitexact == std::optional<bool>(true));
  check_reports(r, c.items, c.model.chunk, c.settings.lane.config.keep_min);
  RC_CLASSIFY(r.summary.reused_tokens > 0, "some rows reused");
}

PFX_PROPERTY(Replay, WithInjectedFailuresEveryServedResponseStillEqualsCold, "CLI-1 DRV-4", ()) {
  Case c = random_case();
  c.settings.fault_rate = *rc::gen::element(0.01, 0.05, 0.2);
  pfx::engines::HostReferenceEngine engine(c.model);
  const Replayed r = replay(c.items, engine, c.settings);
  RC_ASSERT(r.summary.mismatches == 0u);
  RC_ASSERT(r.summary.stale_reads == 0u);
  RC_ASSERT(r.summary.verified + r.summary.failures == r.summary.requests);
  for (const RequestReport& report : r.reports) {
    RC_ASSERT(report.error.empty() == report.bitexact.has_value());
    if (!report.error.empty()) RC_ASSERT(report.injected);
  }
  check_reports(r, c.items, c.model.chunk, c.settings.lane.config.keep_min);
  RC_CLASSIFY(r.summary.failures > 0, "some requests failed");
}

PFX_PROPERTY(Replay, WithoutAnEngineEveryDecisionIsThatOfTheReferenceEngine, "CLI-5", ()) {
  // DecisionsOnlyEngine computes nothing and "generates" token 0; the offsets, reasons, prefills and
  // failures must still be the reference engine's, whose generated tokens a small vocabulary makes
  // the next prompt share now and then (the rows past canonical_end that INV-2 never offers).
  Case c = random_case();
  c.settings.verify = false;
  c.settings.fault_rate = *rc::gen::element(0.0, 0.05, 0.2);
  pfx::engines::HostReferenceEngine reference(c.model);
  pfx::engines::DecisionsOnlyEngine none(c.model.chunk, c.model.vocab);
  const Replayed a = replay(c.items, reference, c.settings);
  const Replayed b = replay(c.items, none, c.settings);
  RC_ASSERT(b.reports.size() == a.reports.size());
  std::size_t bounds_named_otherwise = 0;
  for (std::size_t i = 0; i < a.reports.size(); ++i) {
    const RequestReport& x = a.reports[i];
    const RequestReport& y = b.reports[i];
    RC_ASSERT(y.decision.offset == x.decision.offset);
    RC_ASSERT(y.decision.reason == x.decision.reason);
    RC_ASSERT(y.prefill_tokens == x.prefill_tokens);
    RC_ASSERT(y.generated_tokens == x.generated_tokens);
    RC_ASSERT(y.error == x.error);
    RC_ASSERT(y.injected == x.injected);
    bounds_named_otherwise += y.decision.bound == x.decision.bound ? 0 : 1;
  }
  RC_ASSERT(b.summary.requests == a.summary.requests);
  RC_ASSERT(b.summary.failures == a.summary.failures);
  RC_ASSERT(b.summary.stale_reads == 0U);
  RC_ASSERT(b.summary.reused_tokens == a.summary.reused_tokens);
  RC_ASSERT(b.summary.prefill_tokens == a.summary.prefill_tokens);
  RC_ASSERT(b.summary.verified == 0U);
  check_reports(b, c.items, c.model.chunk, c.settings.lane.config.keep_min);
  RC_CLASSIFY(bounds_named_otherwise > 0, "a tie named another bound");
  RC_CLASSIFY(b.summary.failures > 0, "some requests failed");
  RC_CLASSIFY(b.summary.reused_tokens > 0, "some rows reused");
}

using pfx::engines::DriftingEngine;

TEST(Replay, AnEngineThatIsNotDeterministicIsReportedAsAMismatch) {
  pfx::test::verifies("CLI-1");
  pfx::engines::HostReferenceEngine inner({.vocab = 64, .chunk = 8});
  DriftingEngine engine(inner);
  const auto items = pfx::replay::embedded_workload({.vocab = 64, .requests = 8, .capacity = 600});
  const Replayed r = replay(items, engine, {.lane = {.capacity = 600, .poison = true}, .verify = true});
  EXPECT_EQ(r.summary.verified, 8u);
  EXPECT_GT(r.summary.mismatches, 0u);
  EXPECT_FALSE(r.summary.ok());
  std::size_t flagged = 0;
  for (const RequestReport& report : r.reports) {
    if (report.bitexact == std::optional<bool>(false)) {
      if (flagged == 0) {  // the summary names the first mismatch, where a reader starts
        EXPECT_EQ(r.summary.first_mismatch.request, report.number);
        EXPECT_EQ(r.summary.first_mismatch.line, report.line);
        EXPECT_EQ(r.summary.first_mismatch.what, report.mismatch);
      }
      ++flagged;
      // The drift moves logit 0 alone: named, unless it made token 0 the first generated.
      EXPECT_TRUE(report.mismatch.starts_with("logit 0: ") || report.mismatch.starts_with("generated token 0: "))
          << report.mismatch;
    }
  }
  EXPECT_EQ(flagged, r.summary.mismatches);
}

TEST(Replay, StopEndsTheRunBetweenTwoRequests) {
  pfx::test::verifies("CLI-1");
  pfx::engines::HostReferenceEngine engine({.vocab = 64, .chunk = 8});
  const auto items = pfx::replay::embedded_workload({.vocab = 64, .requests = 12, .capacity = 600});
  for (const std::size_t served : {std::size_t{0}, std::size_t{1}, std::size_t{5}}) {
    std::size_t asked = 0;  // asked once before each item: the run stops before item `served` + 1
    ReplaySettings settings{.lane = {.capacity = 600, .poison = true}, .verify = true};
    settings.stop = [&] { return asked++ == served; };
    const Replayed r = replay(items, engine, settings);
    EXPECT_EQ(r.reports.size(), r.summary.requests);
    EXPECT_LE(r.summary.requests, served);
    EXPECT_EQ(r.summary.requests + r.summary.clears, served) << "every item before the stop, and none after";
  }
}

TEST(Replay, VerifyComparesTheDecodeRowsAResponseVouchesFor) {
  // Mutant replay-verify-decode-rows.
  pfx::test::verifies("CLI-1");
  pfx::engines::HostReferenceEngine inner(pfx::engines::ReferenceModelShape{.vocab = 64, .chunk = 4});
  const std::vector<pfx::token> prompt = {1, 2, 3, 4, 5, 6};
  constexpr std::size_t new_tokens = 3;  // decode writes rows 6 and 7; the resumed side's row 7 is changed
  pfx::test::DecodeRowTamperer engine(inner, prompt.size() + new_tokens - 2);
  const std::vector<TraceItem> trace = {TraceRequest{prompt, new_tokens, "", 1, ""}};
  ReplaySettings settings;
  settings.lane.capacity = 64;
  settings.verify = true;
  const ReplaySummary s = pfx::replay::run(trace, engine, settings);
  EXPECT_EQ(s.verified, 1U);
  EXPECT_EQ(s.mismatches, 1U);
  EXPECT_EQ(s.first_mismatch.what, "KV row 7 differs from the cold run's");  // the tampered row, named
}

TEST(Replay, StaleRowReadsFailTheRun) {
  // Mutant replay-stale-reads-fail.
  pfx::test::verifies("CLI-1");
  pfx::engines::HostReferenceEngine inner(pfx::engines::ReferenceModelShape{.vocab = 64, .chunk = 4});
  pfx::test::PeekingEngine engine(inner);  // reads the row past each prefill chunk: a stale-row read
  engine.peek = true;
  const std::vector<TraceItem> trace = {TraceRequest{{1, 2, 3, 4, 5, 6}, 2, "", 1, ""},
                                        TraceRequest{{1, 2, 3, 4, 5, 6, 7}, 2, "", 2, ""}};
  ReplaySettings settings;
  settings.lane.capacity = 64;
  const ReplaySummary s = pfx::replay::run(trace, engine, settings);
  EXPECT_EQ(s.stale_reads, 2U);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(s.passed(false));
}

TEST(Replay, RanksAsThreadsEachHoldAQuarterAndThroughFaultsOnOneRankEveryResponseEqualsItsColdRun) {
  // The replay under mpirun, with threads for processes: each rank replays the same workload on its
  // own DCP engine, holding its own rows alone; faults hit one rank per request.
  pfx::test::verifies("SHARD-3 SHARD-4 SHARD-5 CLI-1");
  constexpr std::size_t ranks = 4;
  const pfx::engines::ReferenceModelShape shape{.vocab = 512, .width = 16, .hidden = 32, .layers = 2, .chunk = 16};
  const std::vector<TraceItem> items =
      pfx::replay::embedded_workload({.seed = 7, .vocab = shape.vocab, .requests = 24, .capacity = 1024});
  pfx::driver::ThreadsCollective group(ranks);
  std::vector<ReplaySummary> summaries(ranks);
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      pfx::engines::DcpReferenceEngine engine(shape, {ranks, 3}, &group.rank(r));
      const ReplaySettings settings{.lane = {.capacity = 1024, .config = {.enabled = true, .keep_min = 16}, .poison = true},
                                    .verify = true, .fault_rate = 0.01, .seed = 11, .dcp = ranks, .interleave = 3,
                                    .collective = &group.rank(r)};
      summaries[r] = pfx::replay::run(items, engine, settings);
    });
  }
  for (std::thread& t : threads) t.join();
  const std::size_t whole = std::size_t{1024} * 2 * 2 * 16 * sizeof(float);
  for (std::size_t r = 0; r < ranks; ++r) {
    const ReplaySummary& s = summaries[r];
    EXPECT_TRUE(s.passed(true)) << "rank " << r;
    EXPECT_EQ(s.mismatches, 0U);
    EXPECT_GT(s.verified, 0U);
    EXPECT_EQ(s.failures, summaries[0].failures) << "every rank fails the same requests";
    EXPECT_EQ(s.reused_tokens, summaries[0].reused_tokens);
    ASSERT_EQ(s.kv_bytes_by_rank.size(), ranks);
    EXPECT_EQ(s.kv_bytes_per_rank, s.kv_bytes_by_rank[r]);
    EXPECT_LE(s.kv_bytes_per_rank, whole / ranks + std::size_t{3} * 2 * 2 * 16 * sizeof(float)) << "rank " << r << " holds more than its rows";
    EXPECT_EQ(s.kv_bytes_total, s.kv_bytes_by_rank[0] + s.kv_bytes_by_rank[1] + s.kv_bytes_by_rank[2] + s.kv_bytes_by_rank[3]);
  }
  EXPECT_GT(summaries[0].failures, 0U) << "no fault was injected: the run checked no recovery";
}

}  // namespace
