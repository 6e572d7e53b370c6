// The sharded lane: the KV state split over N ranks (the row of position p on rank
// (p / interleave) mod N). Ranks as threads, each holding only its own rows on the decode-context-
// parallel reference engine, agree on every decision and commit together; each response equals the
// cold run of the same ranks and interleave bit for bit, rank by rank, whatever the faults or a
// divergent record on one rank. A lane over shards whose attention reads every row equals one state.

#include "support/lanes.hpp"
#include "support/requirement.hpp"

#include <pfx/driver/cuda.hpp>
#include <pfx/driver/cuda_shards.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/driver/host_kv_state.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/driver/rank_kv_state.hpp>
#include <pfx/driver/sharded_engine.hpp>
#include <pfx/driver/sharded_kv_state.hpp>
#include <pfx/driver/sharded_lane.hpp>
#include <pfx/driver/threads_collective.hpp>
#include <pfx/engines/dcp_reference_engine.hpp>
#include <pfx/engines/faulty_engine.hpp>
#include <pfx/engines/host_reference_engine.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using pfx::token;
using pfx::engines::DcpReferenceEngine;
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

/// The requests of a trace, built against a single controller's lane on the DCP engine of the same
/// layout without faults: each prompt, its tokens to generate, and the offset that lane took.
struct Plan {
  std::vector<std::vector<token>> prompts;  ///< empty: a clear on every rank
  std::vector<std::size_t> max_new_tokens;
  std::vector<std::size_t> single_offsets;
};

Plan plan_of(const pfx::engines::ReferenceModelShape& shape, const ShardLayout& layout, std::size_t keep_min,
             const std::vector<pfx::test::TraceStep>& steps) {
  DcpReferenceEngine engine(shape, layout);
  Lane lane(engine, {.capacity = capacity, .config = {.enabled = true, .keep_min = keep_min}, .poison = true});
  pfx::test::TraceBuilder trace(shape.vocab, capacity, shape.seed);
  Plan plan;
  for (const pfx::test::TraceStep& step : steps) {
    plan.prompts.push_back(trace.prompt(step));
    plan.max_new_tokens.push_back(step.max_new_tokens);
    if (plan.prompts.back().empty()) {
      lane.clear();
      plan.single_offsets.push_back(0);
      continue;
    }
    const pfx::driver::Response r = lane.serve(plan.prompts.back(), step.max_new_tokens);
    plan.single_offsets.push_back(r.decision.offset);
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
  /// This rank's rows of the positions the response vouches for; after a failure, of the positions
  /// below the offset, which the record keeps.
  std::vector<float> rows;
  pfx::Record record;       ///< after the step
};

struct Run {
  std::vector<std::vector<RankStep>> ranks;  ///< [rank][step]
  std::vector<std::size_t> divergences;
  std::vector<std::size_t> injected;
  std::vector<std::size_t> kv_bytes;         ///< of each rank's state
};

/// Runs the plan on `ranks` threads, each a rank of a ThreadsCollective with its own ShardedLane over
/// `layout` on its own DcpReferenceEngine (one rank of the group; with one thread, the single
/// controller of every rank) under its own FaultyEngine (rate `rate`). At step `diverge_at`, rank
/// `diverge_rank` first clears its record alone (a rank that restarted), so that its record differs
/// from the others' whenever theirs holds anything.
Run run_ranks(const pfx::engines::ReferenceModelShape& shape, std::size_t keep_min, std::size_t ranks,
              const ShardLayout& layout, double rate, std::uint64_t seed, const Plan& plan,
              std::size_t diverge_at = std::numeric_limits<std::size_t>::max(), std::size_t diverge_rank = 0) {
  pfx::driver::ThreadsCollective group(ranks);
  Run run;
  run.ranks.resize(ranks);
  run.divergences.resize(ranks);
  run.injected.resize(ranks);
  run.kv_bytes.resize(ranks);
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      DcpReferenceEngine engine(shape, layout, ranks == 1 ? nullptr : &group.rank(r));
      FaultyEngine faulty(engine, rate, seed + r);
      ShardedLane lane(faulty, {.capacity = capacity, .config = {.enabled = true, .keep_min = keep_min}, .poison = true},
                       layout, group.rank(r));
      run.kv_bytes[r] = lane.kv_bytes_per_rank();
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
          if (!step.served) step.rows = lane.kv().copy_rows(0, lane.lane().last_decision().offset);
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

/// A cold run on the single controller of `layout` (every rank's rows in one process), and rank r's
/// rows of positions [0, rows) in it: what rank r of a group holds after the same run.
struct ShardedCold {
  pfx::driver::ColdRun run;
  std::unique_ptr<pfx::driver::KvState> kv;

  [[nodiscard]] std::vector<float> rank_rows(std::size_t r, std::size_t rows) const {
    const auto& shards = dynamic_cast<const pfx::driver::ShardedKvState&>(*kv);
    return shards.shard(r).copy_rows(0, shards.layout().local_len(rows, r));
  }
};

ShardedCold sharded_cold(DcpReferenceEngine& engine, const std::vector<token>& prompt, std::size_t max_new_tokens) {
  ShardedCold cold{{}, engine.make_kv_state(capacity)};
  cold.run = pfx::driver::run_cold(engine, *cold.kv, prompt, max_new_tokens);
  return cold;
}

/// Checks every step of a run: every rank served or every rank failed; the ranks agreed on the
/// offset, diverged exactly when their offsets or records differed, and then reused nothing; a served
/// response equals the cold run of the same layout bit for bit, each rank's own rows with the same
/// rank's rows of the cold run; a failed one was an injected fault on some rank and left every
/// record the same untouched prefix, and every rank's rows of it what the cold run writes there.
/// Returns how many steps diverged.
std::size_t check_run(const Run& run, const Plan& plan, DcpReferenceEngine& engine) {
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
    const ShardedCold cold = sharded_cold(engine, prompt, plan.max_new_tokens[s]);
    // With one thread, the single controller holds every rank's rows, in position order.
    const auto expected_rows = [&](std::size_t r, std::size_t rows) {
      return ranks == 1 ? cold.kv->copy_rows(0, rows) : cold.rank_rows(r, rows);
    };
    if (!first.served) {
      if (injected == 0) RC_FAIL("every rank failed, none with an injected fault" + where);
      const std::vector<token> untouched(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(offset));
      if (first.record.ids != untouched || first.record.canonical_end > offset) {
        RC_FAIL("the records hold more than the untouched prefix after a failure" + where);
      }
      for (std::size_t r = 0; r < ranks; ++r) {
        if (!pfx::test::same_bits(run.ranks[r][s].rows, expected_rows(r, offset))) {
          RC_FAIL("rank " + std::to_string(r) + "'s rows of the kept prefix are not the cold run's after a failure" + where);
        }
      }
      continue;
    }
    for (std::size_t r = 0; r < ranks; ++r) {
      const RankStep& step = run.ranks[r][s];
      if (!pfx::test::same_bits(step.response.logits, cold.run.logits) || step.response.generated != cold.run.generated) {
        RC_FAIL("rank " + std::to_string(r) + "'s response differs from cold" + where);
      }
      if (!pfx::test::same_bits(step.rows, expected_rows(r, pfx::test::rows_written(prompt.size(), plan.max_new_tokens[s])))) {
        RC_FAIL("rank " + std::to_string(r) + "'s rows differ from its rows of the cold run" + where);
      }
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

PFX_PROPERTY(Sharded, EveryRankTakesTheSingleControllersOffsetAndEqualsItsColdRunBitForBit,
             "SHARD-1 SHARD-2 SHARD-4 SHARD-5 THM-1", ()) {
  const pfx::engines::ReferenceModelShape shape = *pfx::test::model_shapes();
  const std::size_t keep_min = *rc::gen::element<std::size_t>(0, 1, 5);
  const ShardLayout layout = *layouts();
  const bool single_controller = *rc::gen::arbitrary<bool>();
  const Plan plan = plan_of(shape, layout, keep_min, *short_traces(shape.vocab));
  const std::size_t ranks = single_controller ? 1 : layout.ranks;

  const Run run = run_ranks(shape, keep_min, ranks, layout, 0.0, 1, plan);
  DcpReferenceEngine engine(shape, layout);
  RC_ASSERT(check_run(run, plan, engine) == 0U);
  for (std::size_t s = 0; s < plan.prompts.size(); ++s) {
    for (std::size_t r = 0; r < ranks; ++r) {
      const RankStep& step = run.ranks[r][s];
      if (!plan.prompts[s].empty()) RC_ASSERT(step.served && step.response.decision.offset == plan.single_offsets[s]);
    }
  }
  // Each rank holds its own rows alone: shard_capacity of them, about capacity / ranks.
  const std::size_t row_bytes = shape.layers * 2 * shape.width * sizeof(float);
  for (std::size_t r = 0; r < ranks; ++r) RC_ASSERT(run.kv_bytes[r] == layout.shard_capacity(capacity) * row_bytes);
  RC_CLASSIFY(single_controller, "single controller");
  RC_CLASSIFY(std::any_of(plan.single_offsets.begin(), plan.single_offsets.end(), [](std::size_t o) { return o > 0; }),
              "some reuse");
}

PFX_PROPERTY(Sharded, AFaultOnAnyRankAbortsTheWriteOnEveryRank, "SHARD-3 SHARD-5 DRV-4 THM-1 INV-8", ()) {
  const pfx::engines::ReferenceModelShape shape = *pfx::test::model_shapes();
  const std::size_t keep_min = *rc::gen::element<std::size_t>(0, 1, 5);
  const ShardLayout layout = *layouts();
  const double rate = *rc::gen::element(0.05, 0.2);
  const Plan plan = plan_of(shape, layout, keep_min, *short_traces(shape.vocab));

  const Run run = run_ranks(shape, keep_min, layout.ranks, layout, rate, *rc::gen::arbitrary<std::uint64_t>(), plan);
  DcpReferenceEngine engine(shape, layout);
  RC_ASSERT(check_run(run, plan, engine) == 0U);
  std::size_t failed = 0;
  for (std::size_t s = 0; s < plan.prompts.size(); ++s) failed += run.ranks[0][s].served || plan.prompts[s].empty() ? 0 : 1;
  RC_CLASSIFY(failed > 0, "some request failed");
}

PFX_PROPERTY(Sharded, ADivergentRecordOnOneRankMeansNoRankReuses, "SHARD-2 THM-1", ()) {
  const pfx::engines::ReferenceModelShape shape = *pfx::test::model_shapes();
  const std::size_t keep_min = *rc::gen::element<std::size_t>(0, 1, 5);
  const ShardLayout layout = *rc::gen::suchThat(layouts(), [](const ShardLayout& l) { return l.ranks > 1; });
  const Plan plan = plan_of(shape, layout, keep_min, *short_traces(shape.vocab));
  RC_PRE(!plan.prompts.empty());
  const std::size_t at = *rc::gen::inRange<std::size_t>(0, plan.prompts.size());
  const std::size_t rank = *rc::gen::inRange<std::size_t>(0, layout.ranks);

  const Run run = run_ranks(shape, keep_min, layout.ranks, layout, 0.0, 1, plan, at, rank);
  DcpReferenceEngine engine(shape, layout);
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

PFX_PROPERTY(Sharded, ALaneOnTheSingleControllersDcpEnginePoisonsAndRecoversLikeOneState,
             "SHARD-4 SHARD-5 DRV-2 DRV-4 THM-1", ()) {
  const pfx::engines::ReferenceModelShape shape = *pfx::test::model_shapes();
  const std::size_t keep_min = *rc::gen::element<std::size_t>(0, 1, 5);
  const ShardLayout layout = *layouts();
  const double rate = *rc::gen::element(0.0, 0.1, 0.3);
  const auto steps = *short_traces(shape.vocab);
  DcpReferenceEngine engine(shape, layout);
  pfx::test::PoisonAuditingEngine audited(engine);
  FaultyEngine faulty(audited, rate, *rc::gen::arbitrary<std::uint64_t>());
  Lane lane(faulty, {.capacity = capacity, .config = {.enabled = true, .keep_min = keep_min}, .poison = true});
  pfx::test::TraceBuilder trace(shape.vocab, capacity, shape.seed);
  const pfx::test::TraceReplay replay = pfx::test::replay_against_cold(lane, engine, capacity, steps, trace);
  RC_ASSERT(replay.failures == faulty.failures());
}

PFX_PROPERTY(Sharded, LocalLenCountsTheRowsARankHoldsBelowEveryPosition, "SHARD-4", ()) {
  const ShardLayout layout = *layouts();
  const std::size_t rows = *rc::gen::inRange<std::size_t>(0, 300);
  std::vector<std::size_t> counted(layout.ranks, 0);  // rows below p on each rank, counted one by one
  for (std::size_t p = 0; p <= rows; ++p) {
    for (std::size_t r = 0; r < layout.ranks; ++r) {
      if (layout.local_len(p, r) != counted[r]) {
        RC_FAIL("local_len(" + std::to_string(p) + ", " + std::to_string(r) + ") is " +
                std::to_string(layout.local_len(p, r)) + ", not " + std::to_string(counted[r]));
      }
      RC_ASSERT(layout.local_len(p, r) <= layout.shard_capacity(std::max<std::size_t>(p, 1)));
    }
    RC_ASSERT(layout.local(p) == layout.local_len(p, layout.owner(p)));
    ++counted[layout.owner(p)];
  }
  RC_CLASSIFY(rows % (layout.ranks * layout.interleave) != 0, "ends off a multiple of ranks x interleave");
}

PFX_PROPERTY(Sharded, ARanksStateActsOnItsOwnRowsByTheirLocalLength, "SHARD-4", ()) {
  const ShardLayout layout = *layouts();
  const std::size_t rows = *rc::gen::inRange<std::size_t>(1, 200);
  const std::size_t rank = *rc::gen::inRange<std::size_t>(0, layout.ranks);
  const pfx::driver::KvShape shape{rows, *rc::gen::inRange<std::size_t>(1, 4), *rc::gen::inRange<std::size_t>(1, 5)};
  const pfx::driver::KvShape local{layout.shard_capacity(rows), shape.layers, shape.width};
  pfx::driver::RankKvState mine(rows, layout, rank, std::make_unique<pfx::driver::HostKvState>(local));
  pfx::driver::HostKvState whole(shape);  // every position's row, as one state
  const auto steps = *rc::gen::container<std::vector<std::pair<std::size_t, std::size_t>>>(
      rc::gen::pair(rc::gen::inRange<std::size_t>(0, rows + 1), rc::gen::inRange<std::size_t>(0, rows + 1)));
  float value = 1.0f;
  for (auto [from, to] : steps) {
    if (from > to) std::swap(from, to);
    mine.fill(from, to, value);
    whole.fill(from, to, value);
    value += 1.0f;
  }
  // Reads name the positions this rank holds, in order, each with the row one state holds there.
  const std::size_t from = *rc::gen::inRange<std::size_t>(0, rows + 1);
  std::vector<std::size_t> seen;
  mine.for_each_row(from, rows, [&](std::size_t p, std::span<const std::byte> bytes) {
    RC_ASSERT(layout.owner(p) == rank);
    std::vector<std::byte> expected;
    whole.for_each_row(p, p + 1, [&](std::size_t, std::span<const std::byte> b) { expected.assign(b.begin(), b.end()); });
    RC_ASSERT(std::equal(bytes.begin(), bytes.end(), expected.begin(), expected.end()));
    seen.push_back(p);
  });
  std::vector<std::size_t> held;
  for (std::size_t p = from; p < rows; ++p) {
    if (layout.owner(p) == rank) held.push_back(p);
  }
  RC_ASSERT(seen == held);
  RC_ASSERT(mine.copy_rows(from, rows).size() == held.size() * shape.layers * 2 * shape.width);
  RC_ASSERT(mine.memory_bytes() == local.bytes());
  RC_ASSERT(mine.memory_bytes() <= (rows / layout.ranks + layout.interleave) * shape.layers * 2 * shape.width * sizeof(float));
}

/// One rank's rows whose synchronize fails while `fail` is set: a device error after every engine call
/// succeeded, which only the vote before the commit sees.
class RowsThatFailToSynchronize final : public pfx::driver::KvState {
 public:
  RowsThatFailToSynchronize(const pfx::driver::KvShape& shape, const bool& fail) : rows_(shape), fail_(fail) {}
  [[nodiscard]] const pfx::driver::KvShape& shape() const noexcept override { return rows_.shape(); }
  void forget(std::size_t from) override { rows_.forget(from); }
  void synchronize() override {
    if (fail_) throw std::runtime_error("device error while synchronizing");
  }
  [[nodiscard]] bool owns_rows() const noexcept override { return true; }
  void fill(std::size_t from, std::size_t to, float value) override { rows_.fill(from, to, value); }
  [[nodiscard]] std::vector<float> copy_rows(std::size_t from, std::size_t to) const override {
    return rows_.copy_rows(from, to);
  }

 private:
  pfx::driver::HostKvState rows_;
  const bool& fail_;
};

/// A decode-context-parallel engine of the protocol alone: each call writes 1 into its rank's rows of
/// the call and zero logits; its rank's rows fail to synchronize while `fail` is set.
class ProtocolOnlyDcpEngine final : public pfx::driver::Engine {
 public:
  ProtocolOnlyDcpEngine(const ShardLayout& layout, std::size_t rank, const bool& fail)
      : layout_(layout), rank_(rank), fail_(fail) {}
  [[nodiscard]] std::size_t chunk() const noexcept override { return 4; }
  [[nodiscard]] std::size_t vocab() const noexcept override { return 8; }
  [[nodiscard]] std::optional<ShardLayout> context_parallel() const noexcept override { return layout_; }
  [[nodiscard]] bool exchanges() const noexcept override { return true; }
  [[nodiscard]] std::unique_ptr<pfx::driver::KvState> make_kv_state(std::size_t rows) const override {
    return std::make_unique<pfx::driver::RankKvState>(
        rows, layout_, rank_,
        std::make_unique<RowsThatFailToSynchronize>(pfx::driver::KvShape{layout_.shard_capacity(rows), 1, 1}, fail_));
  }
  void prefill(pfx::driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override {
    kv.fill(position, position + tokens.size(), 1.0f);
    std::fill(logits.begin(), logits.end(), 0.0f);
  }
  void decode(pfx::driver::KvState& kv, token, std::size_t position, std::span<float> logits) override {
    kv.fill(position, position + 1, 1.0f);
    std::fill(logits.begin(), logits.end(), 0.0f);
  }

 private:
  ShardLayout layout_;
  std::size_t rank_;
  const bool& fail_;
};

TEST(Sharded, AFailureAfterTheLastEngineCallOnOneRankAbortsTheWriteOnEveryRank) {
  // Mutant shard-outcome-vote-skipped: the vote before the commit is what sees it.
  pfx::test::verifies("SHARD-3 INV-8");
  constexpr std::size_t ranks = 3;
  pfx::driver::ThreadsCollective group(ranks);
  std::vector<std::string> errors(ranks);
  std::vector<pfx::Record> records(ranks);
  const std::vector<token> first{1, 2, 3, 4, 5, 6, 7, 1, 2};
  const std::vector<token> second{1, 2, 3, 4, 5, 6, 7, 1, 3, 4};
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      bool fail = false;
      ProtocolOnlyDcpEngine engine({ranks, 2}, r, fail);
      ShardedLane lane(engine, {.capacity = 32, .config = {.enabled = true, .keep_min = 1}, .poison = true}, {ranks, 2},
                       group.rank(r));
      (void)lane.serve(first, 2);
      fail = r == 1;  // rank 1's rows fail to synchronize: every engine call succeeded everywhere
      try {
        (void)lane.serve(second, 2);
      } catch (const pfx::driver::PeerFault&) {
        errors[r] = "peer";
      } catch (const std::runtime_error& e) {
        errors[r] = e.what();
      }
      records[r] = lane.lane().machine().held();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors[0], "peer");
  EXPECT_EQ(errors[1], "device error while synchronizing");
  EXPECT_EQ(errors[2], "peer");
  const std::vector<token> kept(second.begin(), second.begin() + 8);  // the offset: 8 = 2 chunks of 4
  for (const pfx::Record& record : records) EXPECT_EQ(record.ids, kept);
}

TEST(Sharded, ARankOfAGroupNeedsADcpEngineOverItsLayout) {
  pfx::test::verifies("SHARD-4");
  pfx::driver::ThreadsCollective group(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      HostReferenceEngine plain;  // its attention reads every row: each rank would hold them all
      try {
        ShardedLane lane(plain, {.capacity = 64}, {2, 1}, group.rank(r));
      } catch (const pfx::driver::ConfigError& e) {
        errors[r] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_NE(e.find("decode-context-parallel engine"), std::string::npos) << e;
  // Ranks whose layouts differ say so on every rank.
  threads.clear();
  for (std::size_t r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      DcpReferenceEngine engine({}, {2, r + 1}, &group.rank(r));
      try {
        ShardedLane lane(engine, {.capacity = 64}, {2, r + 1}, group.rank(r));
        errors[r].clear();
      } catch (const pfx::driver::ConfigError& e) {
        errors[r] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_NE(e.find("layout, capacity or chunk differs"), std::string::npos) << e;
  EXPECT_THROW(DcpReferenceEngine({}, {3, 1}, &group.rank(0)), std::invalid_argument);
  EXPECT_THROW(DcpReferenceEngine({}, {0, 1}), std::invalid_argument);
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
    // Floats travel bit for bit, NaN and -0 included, rank 0's first.
    std::vector<std::vector<float>> floats(ranks);
    threads.clear();
    for (std::size_t r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        const std::vector<float> mine{static_cast<float>(r) + 0.5f, -0.0f, std::numeric_limits<float>::quiet_NaN()};
        floats[r].resize(ranks * 3);
        group.rank(r).all_gather(std::span<const float>(mine), std::span<float>(floats[r]));
      });
    }
    for (std::thread& t : threads) t.join();
    for (std::size_t r = 0; r < ranks; ++r) {
      std::vector<float> expected;
      for (std::size_t s = 0; s < ranks; ++s) {
        expected.insert(expected.end(), {static_cast<float>(s) + 0.5f, -0.0f, std::numeric_limits<float>::quiet_NaN()});
      }
      EXPECT_TRUE(pfx::test::same_bits(floats[r], expected));
    }
  }
  pfx::driver::SoloCollective solo;
  std::vector<std::uint64_t> all(2);
  solo.all_gather(std::vector<std::uint64_t>{7, 8}, all);
  EXPECT_EQ(all, (std::vector<std::uint64_t>{7, 8}));
  std::vector<float> gathered(2);
  solo.all_gather(std::span<const float>(std::vector<float>{1.5f, -2.0f}), std::span<float>(gathered));
  EXPECT_EQ(gathered, (std::vector<float>{1.5f, -2.0f}));
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
