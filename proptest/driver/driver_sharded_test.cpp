// The sharded lane: the KV state split over N shards (the row of position p on shard
// (p / interleave) mod N), ranks as threads that agree on every decision and commit together. A
// sharded run must equal the unsharded one bit for bit, whatever the ranks, the interleave, the
// faults or a divergent record on one rank.

#include "support/lanes.hpp"
#include "support/requirement.hpp"

#include <pfx/driver/cuda.hpp>
#include <pfx/driver/cuda_shards.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/driver/host_kv_state.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/driver/sharded_engine.hpp>
#include <pfx/driver/sharded_kv_state.hpp>
#include <pfx/driver/sharded_lane.hpp>
#include <pfx/driver/threads_collective.hpp>
#include <pfx/engines/faulty_engine.hpp>
#include <pfx/engines/host_reference_engine.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using pfx::token;
using pfx::engines::FaultyEngine;
using pfx::engines::HostReferenceEngine;
using pfx::driver::Lane;
using pfx::driver::ShardLayout;
using pfx::driver::ShardedLane;

constexpr std::size_t capacity = 128;

rc::Gen<ShardLayout> layouts() {
  return rc::gen::apply([](std::size_t ranks, std::size_t interleave) { return ShardLayout{ranks, interleave}; },
                        rc::gen::inRange<std::size_t>(1, 9), rc::gen::inRange<std::size_t>(1, 17));
}

/// The requests of a trace, built against an unsharded lane without faults: each prompt, its
/// tokens to generate, and the offset the unsharded lane took (nullopt for a clear).
struct Plan {
  std::vector<std::vector<token>> prompts;  ///< empty: a clear on every rank
  std::vector<std::size_t> max_new_tokens;
  std::vector<std::size_t> unsharded_offsets;
};

Plan plan_of(const pfx::engines::ReferenceModelShape& shape, std::size_t keep_min,
             const std::vector<pfx::test::TraceStep>& steps) {
  HostReferenceEngine engine(shape);
  Lane lane(engine, {.capacity = capacity, .config = {.enabled = true, .keep_min = keep_min}, .poison = true});
  pfx::test::TraceBuilder trace(shape.vocab, capacity, shape.seed);
  Plan plan;
  for (const pfx::test::TraceStep& step : steps) {
    plan.prompts.push_back(trace.prompt(step));
    plan.max_new_tokens.push_back(step.max_new_tokens);
    if (plan.prompts.back().empty()) {
      lane.clear();
      plan.unsharded_offsets.push_back(0);
      continue;
    }
    const pfx::driver::Response r = lane.serve(plan.prompts.back(), step.max_new_tokens);
    plan.unsharded_offsets.push_back(r.decision.offset);
    trace.answered(plan.prompts.back(), r.generated);
  }
  return plan;
}

/// What one rank saw at one step.
struct RankStep {
  bool served = false;
  std::string error;  ///< "injected", "peer", or another error's message
  std::size_t offset_before = 0;
  std::uint64_t digest_before = 0;
  pfx::driver::ShardedResponse response;
  std::vector<float> rows;  ///< the rows the response vouches for, gathered from their owners
  pfx::Record record;       ///< after the step
};

struct Run {
  std::vector<std::vector<RankStep>> ranks;  ///< [rank][step]
  std::vector<std::size_t> divergences;
  std::vector<std::size_t> injected;
};

/// Runs the plan on `ranks` threads, each a rank of a ThreadsCollective with its own ShardedLane over
/// `layout` and its own FaultyEngine (rate `rate`). At step `diverge_at`, rank `diverge_rank` first
/// clears its record alone (a rank that restarted), so that its record differs from the others'
/// whenever theirs holds anything.
Run run_ranks(const pfx::engines::ReferenceModelShape& shape, std::size_t keep_min, std::size_t ranks,
              const ShardLayout& layout, double rate, std::uint64_t seed, const Plan& plan,
              std::size_t diverge_at = std::numeric_limits<std::size_t>::max(), std::size_t diverge_rank = 0) {
  pfx::driver::ThreadsCollective group(ranks);
  Run run;
  run.ranks.resize(ranks);
  run.divergences.resize(ranks);
  run.injected.resize(ranks);
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      HostReferenceEngine engine(shape);
      FaultyEngine faulty(engine, rate, seed + r);
      ShardedLane lane(faulty, {.capacity = capacity, .config = {.enabled = true, .keep_min = keep_min}, .poison = true},
                       layout, group.rank(r));
      for (std::size_t s = 0; s < plan.prompts.size(); ++s) {
        RankStep step;
        const std::vector<token>& prompt = plan.prompts[s];
        if (s == diverge_at && r == diverge_rank) lane.clear();  // alone: its record is now empty
        if (prompt.empty()) {
          lane.clear();
        } else {
          step.offset_before = lane.lane().machine().query(prompt).decision.offset;
          step.digest_before = pfx::driver::record_digest(lane.lane().machine().held());
          try {
            step.response = lane.serve(prompt, plan.max_new_tokens[s]);
            step.served = true;
            step.rows =
                lane.kv().copy_rows(0, pfx::test::rows_written(prompt.size(), plan.max_new_tokens[s]));
          } catch (const pfx::engines::InjectedFault&) {
            step.error = "injected";
          } catch (const pfx::driver::PeerFault&) {
            step.error = "peer";
          } catch (const std::exception& e) {
            step.error = e.what();
          }
        }
        step.record = lane.lane().machine().held();
        run.ranks[r].push_back(std::move(step));
      }
      run.divergences[r] = lane.divergences();
      run.injected[r] = faulty.failures();
    });
  }
  for (std::thread& t : threads) t.join();
  return run;
}

/// Checks every step of a run: every rank served or every rank failed; the ranks agreed on the
/// offset, diverged exactly when their offsets or records differed, and then reused nothing; a served
/// response equals a cold run bit for bit, rows gathered from every rank's shards included; a failed
/// one was an injected fault on some rank and left every record the same untouched prefix. Returns
/// how many steps diverged.
std::size_t check_run(const Run& run, const Plan& plan, HostReferenceEngine& engine) {
  const std::size_t ranks = run.ranks.size();
  std::size_t diverged_steps = 0;
  for (std::size_t s = 0; s < plan.prompts.size(); ++s) {
    const std::vector<token>& prompt = plan.prompts[s];
    const std::string where = " at step " + std::to_string(s);
    const RankStep& first = run.ranks[0][s];
    for (std::size_t r = 1; r < ranks; ++r) {
      if (!(run.ranks[r][s].record == first.record)) RC_FAIL("rank " + std::to_string(r) + "'s record differs" + where);
    }
    if (prompt.empty()) {
      RC_ASSERT(first.record.ids.empty());
      continue;
    }
    bool expect_divergence = false;
    for (std::size_t r = 1; r < ranks; ++r) {
      expect_divergence = expect_divergence || run.ranks[r][s].offset_before != first.offset_before ||
                          run.ranks[r][s].digest_before != first.digest_before;
    }
    diverged_steps += expect_divergence ? 1 : 0;
    const std::size_t offset = expect_divergence ? 0 : first.offset_before;
    std::size_t injected = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
      const RankStep& step = run.ranks[r][s];
      if (step.served != first.served) RC_FAIL("one rank served and another did not" + where);
      if (!step.served) {
        if (step.error != "injected" && step.error != "peer") RC_FAIL("unexpected error " + step.error + where);
        injected += step.error == "injected" ? 1 : 0;
        continue;
      }
      if (step.response.diverged != expect_divergence) RC_FAIL("divergence not reported as it was" + where);
      if (step.response.decision.offset != offset) RC_FAIL("rank " + std::to_string(r) + " took another offset" + where);
    }
    if (!first.served) {
      if (injected == 0) RC_FAIL("every rank failed, none with an injected fault" + where);
      const std::vector<token> untouched(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(offset));
      if (first.record.ids != untouched || first.record.canonical_end > offset) {
        RC_FAIL("the records hold more than the untouched prefix after a failure" + where);
      }
      continue;
    }
    const pfx::test::Cold cold = pfx::test::cold_run(engine, capacity, prompt, plan.max_new_tokens[s]);
    for (std::size_t r = 0; r < ranks; ++r) {
      const RankStep& step = run.ranks[r][s];
      if (!pfx::test::same_bits(step.response.logits, cold.logits) || step.response.generated != cold.generated) {
        RC_FAIL("rank " + std::to_string(r) + "'s response differs from cold" + where);
      }
      if (!pfx::test::same_bits(step.rows, cold.rows)) RC_FAIL("rank " + std::to_string(r) + "'s rows differ from cold" + where);
    }
    std::vector<token> published = prompt;
    published.insert(published.end(), first.response.generated.begin(), first.response.generated.end());
    if (first.record.ids != published || first.record.canonical_end != prompt.size()) {
      RC_FAIL("the record is not prompt + generated" + where);
    }
  }
  return diverged_steps;
}

/// Applies the same generated fills to a sharded state and to one state, then checks that rows from a
/// generated position on read back the same from both: fill and copy_rows address positions.
void apply_the_same_fills(pfx::driver::KvState& sharded, pfx::driver::KvState& single) {
  const std::size_t rows = single.shape().capacity;
  const auto fills = *rc::gen::container<std::vector<std::pair<std::size_t, std::size_t>>>(
      rc::gen::pair(rc::gen::inRange<std::size_t>(0, rows + 1), rc::gen::inRange<std::size_t>(0, rows + 1)));
  float value = 1.0f;
  for (auto [from, to] : fills) {
    if (from > to) std::swap(from, to);
    sharded.fill(from, to, value);
    single.fill(from, to, value);
    value += 1.0f;
  }
  sharded.synchronize();
  const std::size_t from = *rc::gen::inRange<std::size_t>(0, rows + 1);
  RC_ASSERT(pfx::test::same_bits(sharded.copy_rows(from, rows), single.copy_rows(from, rows)));
}

rc::Gen<std::vector<pfx::test::TraceStep>> short_traces(std::size_t vocab) {
  return rc::gen::resize(12, rc::gen::container<std::vector<pfx::test::TraceStep>>(pfx::test::trace_steps(vocab)));
}

PFX_PROPERTY(Sharded, EveryRankTakesTheUnshardedOffsetAndEqualsColdBitForBit, "SHARD-1 SHARD-2 THM-1", ()) {
  const pfx::engines::ReferenceModelShape shape = *pfx::test::model_shapes();
  const std::size_t keep_min = *rc::gen::element<std::size_t>(0, 1, 5);
  const ShardLayout layout = *layouts();
  const bool single_controller = *rc::gen::arbitrary<bool>();
  const Plan plan = plan_of(shape, keep_min, *short_traces(shape.vocab));
  const std::size_t ranks = single_controller ? 1 : layout.ranks;

  const Run run = run_ranks(shape, keep_min, ranks, layout, 0.0, 1, plan);
  HostReferenceEngine engine(shape);
  RC_ASSERT(check_run(run, plan, engine) == 0U);
  for (std::size_t s = 0; s < plan.prompts.size(); ++s) {
    for (std::size_t r = 0; r < ranks; ++r) {
      const RankStep& step = run.ranks[r][s];
      if (!plan.prompts[s].empty()) RC_ASSERT(step.served && step.response.decision.offset == plan.unsharded_offsets[s]);
    }
  }
  RC_CLASSIFY(single_controller, "single controller");
  RC_CLASSIFY(std::any_of(plan.unsharded_offsets.begin(), plan.unsharded_offsets.end(), [](std::size_t o) { return o > 0; }),
              "some reuse");
}

PFX_PROPERTY(Sharded, AFaultOnAnyRankAbortsTheWriteOnEveryRank, "SHARD-3 DRV-4 THM-1 INV-8", ()) {
  const pfx::engines::ReferenceModelShape shape = *pfx::test::model_shapes();
  const std::size_t keep_min = *rc::gen::element<std::size_t>(0, 1, 5);
  const ShardLayout layout = *layouts();
  const double rate = *rc::gen::element(0.05, 0.2);
  const Plan plan = plan_of(shape, keep_min, *short_traces(shape.vocab));

  const Run run = run_ranks(shape, keep_min, layout.ranks, layout, rate, *rc::gen::arbitrary<std::uint64_t>(), plan);
  HostReferenceEngine engine(shape);
  RC_ASSERT(check_run(run, plan, engine) == 0U);
  std::size_t failed = 0;
  for (std::size_t s = 0; s < plan.prompts.size(); ++s) failed += run.ranks[0][s].served || plan.prompts[s].empty() ? 0 : 1;
  RC_CLASSIFY(failed > 0, "some request failed");
}

PFX_PROPERTY(Sharded, ADivergentRecordOnOneRankMeansNoRankReuses, "SHARD-2 THM-1", ()) {
  const pfx::engines::ReferenceModelShape shape = *pfx::test::model_shapes();
  const std::size_t keep_min = *rc::gen::element<std::size_t>(0, 1, 5);
  const ShardLayout layout = *rc::gen::suchThat(layouts(), [](const ShardLayout& l) { return l.ranks > 1; });
  const Plan plan = plan_of(shape, keep_min, *short_traces(shape.vocab));
  RC_PRE(!plan.prompts.empty());
  const std::size_t at = *rc::gen::inRange<std::size_t>(0, plan.prompts.size());
  const std::size_t rank = *rc::gen::inRange<std::size_t>(0, layout.ranks);

  const Run run = run_ranks(shape, keep_min, layout.ranks, layout, 0.0, 1, plan, at, rank);
  HostReferenceEngine engine(shape);
  const std::size_t diverged = check_run(run, plan, engine);
  // The divergent rank's record is empty. The other ranks hold what the plan's previous step left,
  // which is empty too at the first step or after a clear: only then may nothing diverge. Decided
  // from the records themselves, not from the digest under test.
  if (!plan.prompts[at].empty()) {
    const std::size_t other = (rank + 1) % layout.ranks;
    const pfx::Record others = at == 0 ? pfx::Record{} : run.ranks[other][at - 1].record;
    const bool same_record = others.ids.empty() && others.canonical_end == 0;
    RC_ASSERT(run.ranks[0][at].response.diverged == !same_record);
    RC_CLASSIFY(same_record, "the others held nothing either");
  }
  for (std::size_t r = 0; r < layout.ranks; ++r) RC_ASSERT(run.divergences[r] == diverged);
  RC_CLASSIFY(diverged > 0, "diverged");
}

PFX_PROPERTY(Sharded, ALaneOverShardsPoisonsAndRecoversLikeOneState, "SHARD-1 DRV-2 DRV-4 THM-1", ()) {
  const pfx::engines::ReferenceModelShape shape = *pfx::test::model_shapes();
  const std::size_t keep_min = *rc::gen::element<std::size_t>(0, 1, 5);
  const ShardLayout layout = *layouts();
  const double rate = *rc::gen::element(0.0, 0.1, 0.3);
  const auto steps = *short_traces(shape.vocab);
  HostReferenceEngine engine(shape);
  pfx::test::PoisonAuditingEngine audited(engine);
  FaultyEngine faulty(audited, rate, *rc::gen::arbitrary<std::uint64_t>());
  pfx::driver::ShardedEngine sharded(faulty, layout);
  Lane lane(sharded, {.capacity = capacity, .config = {.enabled = true, .keep_min = keep_min}, .poison = true});
  pfx::test::TraceBuilder trace(shape.vocab, capacity, shape.seed);
  const pfx::test::TraceReplay replay = pfx::test::replay_against_cold(lane, engine, capacity, steps, trace);
  RC_ASSERT(replay.failures == faulty.failures());
}

PFX_PROPERTY(Sharded, EveryPositionHasOneRowOnItsOwnerAndFillAndCopyAddressPositions, "SHARD-1", ()) {
  const ShardLayout layout = *layouts();
  const std::size_t rows = *rc::gen::inRange<std::size_t>(1, 200);
  const pfx::driver::KvShape shape{rows, *rc::gen::inRange<std::size_t>(1, 4), *rc::gen::inRange<std::size_t>(1, 5)};
  std::set<std::pair<std::size_t, std::size_t>> places;
  for (std::size_t p = 0; p < rows; ++p) {
    RC_ASSERT(layout.owner(p) == p / layout.interleave % layout.ranks);
    RC_ASSERT(layout.local(p) < layout.shard_capacity(rows));
    RC_ASSERT(places.emplace(layout.owner(p), layout.local(p)).second);  // no two positions share a row
  }
  std::vector<std::unique_ptr<pfx::driver::KvState>> shards;
  for (std::size_t r = 0; r < layout.ranks; ++r) {
    shards.push_back(std::make_unique<pfx::driver::HostKvState>(
        pfx::driver::KvShape{layout.shard_capacity(rows), shape.layers, shape.width}));
  }
  pfx::driver::ShardedKvState sharded(shape, layout, std::move(shards));
  pfx::driver::HostKvState single(shape);
  apply_the_same_fills(sharded, single);
  RC_ASSERT(sharded.memory_bytes() == layout.ranks * layout.shard_capacity(rows) * shape.layers * 2 * shape.width * sizeof(float));
}

TEST(Sharded, ShardsOnDevicesHoldTheSameRowsAsOneState) {
  pfx::test::verifies("SHARD-1 DRV-6");
  const std::string reason = pfx::driver::cuda::unavailable_reason();
  if (!reason.empty()) {
    // Without a device the constructor says why; nothing else can be checked.
    EXPECT_THROW((void)pfx::driver::cuda::make_sharded_state_on_devices({8, 1, 1}, {2, 1}), pfx::driver::CudaError);
    GTEST_SKIP() << "shards on devices need a CUDA device: " << reason;
  }
  EXPECT_TRUE(rc::check("shards on devices hold the same rows as one host state", [] {
    const ShardLayout layout = *layouts();
    const std::size_t rows = *rc::gen::inRange<std::size_t>(1, 200);
    const pfx::driver::KvShape shape{rows, *rc::gen::inRange<std::size_t>(1, 4), *rc::gen::inRange<std::size_t>(1, 5)};
    const auto sharded = pfx::driver::cuda::make_sharded_state_on_devices(shape, layout);
    pfx::driver::HostKvState single(shape);
    RC_ASSERT(pfx::test::same_bits(sharded->copy_rows(0, rows), single.copy_rows(0, rows)));  // NaN everywhere
    apply_the_same_fills(*sharded, single);
    RC_CLASSIFY(pfx::driver::cuda::visible_devices() > 1, "several devices");
  }));
}

TEST(Sharded, ABadLayoutOrRangeIsRefusedNamingTheProblem) {
  pfx::test::verifies("SHARD-1");
  const pfx::driver::KvShape shape{10, 1, 2};
  const auto shards_of = [](std::size_t n, std::size_t rows) {
    std::vector<std::unique_ptr<pfx::driver::KvState>> shards;
    for (std::size_t r = 0; r < n; ++r) shards.push_back(std::make_unique<pfx::driver::HostKvState>(pfx::driver::KvShape{rows, 1, 2}));
    return shards;
  };
  EXPECT_THROW(pfx::driver::ShardedKvState(shape, {0, 1}, shards_of(0, 10)), std::invalid_argument);
  EXPECT_THROW(pfx::driver::ShardedKvState(shape, {2, 0}, shards_of(2, 5)), std::invalid_argument);
  EXPECT_THROW(pfx::driver::ShardedKvState(shape, {2, 1}, shards_of(3, 5)), std::invalid_argument);
  EXPECT_THROW(pfx::driver::ShardedKvState(shape, {2, 1}, shards_of(2, 4)), std::invalid_argument);
  pfx::driver::ShardedKvState state(shape, {2, 1}, shards_of(2, 5));
  EXPECT_THROW(state.fill(3, 11, 0.0f), std::out_of_range);
  EXPECT_THROW((void)state.copy_rows(4, 3), std::out_of_range);
  HostReferenceEngine engine;
  EXPECT_THROW(pfx::driver::ShardedEngine(engine, {0, 1}), std::invalid_argument);
  // Huge interleaves and many ranks: every position still has a row, within the capacity.
  for (const std::size_t interleave : {std::size_t{1}, std::size_t{3}, std::size_t{1} << 32, std::numeric_limits<std::size_t>::max()}) {
    const ShardLayout layout{7, interleave};
    EXPECT_LE(layout.shard_capacity(100), 100U);
    EXPECT_LT(layout.local(99), layout.shard_capacity(100));
    EXPECT_EQ(layout.shard_capacity(0), 0U);
  }
}

TEST(Sharded, TheCollectivesGatherEveryRanksWordsInRankOrder) {
  pfx::test::verifies("SHARD-2");
  for (std::size_t ranks = 1; ranks <= 8; ++ranks) {
    pfx::driver::ThreadsCollective group(ranks);
    std::vector<std::vector<std::uint64_t>> seen(ranks);
    std::vector<std::thread> threads;
    for (std::size_t r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        for (std::uint64_t round = 0; round < 50; ++round) {
          const std::vector<std::uint64_t> mine{r, round, ~std::uint64_t{0} - r};
          std::vector<std::uint64_t> all(ranks * 3);
          group.rank(r).all_gather(mine, all);
          seen[r].insert(seen[r].end(), all.begin(), all.end());
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (std::size_t r = 0; r < ranks; ++r) {
      ASSERT_EQ(seen[r].size(), 50 * ranks * 3);
      for (std::size_t round = 0; round < 50; ++round) {
        for (std::size_t s = 0; s < ranks; ++s) {
          const std::size_t at = (round * ranks + s) * 3;
          EXPECT_EQ(seen[r][at], s);
          EXPECT_EQ(seen[r][at + 1], round);
          EXPECT_EQ(seen[r][at + 2], ~std::uint64_t{0} - s);
        }
      }
    }
    std::vector<std::uint64_t> wrong(ranks * 3 + 1);
    EXPECT_THROW(group.rank(0).all_gather(std::vector<std::uint64_t>{1, 2, 3}, wrong), std::invalid_argument);
  }
  pfx::driver::SoloCollective solo;
  std::vector<std::uint64_t> all(2);
  solo.all_gather(std::vector<std::uint64_t>{7, 8}, all);
  EXPECT_EQ(all, (std::vector<std::uint64_t>{7, 8}));
  EXPECT_THROW(pfx::driver::ThreadsCollective(0), std::invalid_argument);
}

TEST(Sharded, TheRanksRecordDigestCoversCanonicalEnd) {
  // Mutant driver-record-digest-canonical-end.
  pfx::test::verifies("SHARD-2");
  std::mt19937_64 random(11);
  for (int i = 0; i < 200; ++i) {
    pfx::Record record;
    record.ids.resize(1 + random() % 20);
    for (pfx::token& t : record.ids) t = static_cast<pfx::token>(random() % 4);
    record.canonical_end = random() % (record.ids.size() + 1);
    pfx::Record other = record;
    other.canonical_end = (record.canonical_end + 1 + random() % record.ids.size()) % (record.ids.size() + 1);
    ASSERT_NE(other.canonical_end, record.canonical_end);
    EXPECT_NE(pfx::driver::record_digest(record), pfx::driver::record_digest(other));
    EXPECT_EQ(pfx::driver::record_digest(record), pfx::driver::record_digest(pfx::Record(record)));
  }
}

}  // namespace
