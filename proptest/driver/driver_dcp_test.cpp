// THM-1 under sharding (docs/spec.md): on the decode-context-parallel reference engine, one rank per
// thread, each holding and attending only its own rows, a resume on the chunk grid equals the cold
// run of the same ranks and interleave bit for bit: logits, generated tokens and every rank's rows,
// which are also the single controller's. Off the grid a resume can differ, and does, at a multiple
// of ranks x interleave too: the grid of a DCP engine is its chunk's, not its layout's.

#include "support/lanes.hpp"
#include "support/requirement.hpp"

#include <pfx/driver/cold_run.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/driver/sharded_kv_state.hpp>
#include <pfx/driver/sharded_lane.hpp>
#include <pfx/driver/threads_collective.hpp>
#include <pfx/engines/dcp_reference_engine.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using pfx::token;
using pfx::driver::ShardLayout;
using pfx::engines::DcpReferenceEngine;

constexpr std::size_t capacity = 160;

/// What rank r of a group saw: the resumed response, its rows, and its cold run's.
struct RankResult {
  pfx::driver::ShardedResponse resumed;
  std::vector<float> rows;
  pfx::driver::ColdRun cold;
  std::vector<float> cold_rows;
};

/// On `layout.ranks` threads, each a rank with its own DcpReferenceEngine and ShardedLane: serves
/// `held`, then `prompt` (resumed where the rule says), then runs `prompt` cold on a state of its own.
std::vector<RankResult> resume_on_ranks(const pfx::engines::ReferenceModelShape& shape, const ShardLayout& layout,
                                        const pfx::driver::LaneOptions& options, const std::vector<token>& held,
                                        const std::vector<token>& prompt, std::size_t max_new_tokens) {
  pfx::driver::ThreadsCollective group(layout.ranks);
  std::vector<RankResult> results(layout.ranks);
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < layout.ranks; ++r) {
    threads.emplace_back([&, r] {
      DcpReferenceEngine engine(shape, layout, &group.rank(r));
      pfx::driver::ShardedLane lane(engine, options, layout, group.rank(r));
      (void)lane.serve(held, max_new_tokens);
      RankResult& result = results[r];
      result.resumed = lane.serve(prompt, max_new_tokens);
      const std::size_t rows = pfx::driver::rows_written(prompt.size(), max_new_tokens);
      result.rows = lane.kv().copy_rows(0, rows);  // this rank's own
      const std::unique_ptr<pfx::driver::KvState> cold = engine.make_kv_state(capacity);
      result.cold = pfx::driver::run_cold(engine, *cold, prompt, max_new_tokens);
      result.cold_rows = cold->copy_rows(0, rows);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

PFX_PROPERTY(Dcp, AResumeOnTheChunkGridEqualsTheColdRunOfTheSameRanksAndInterleave, "SHARD-5 SHARD-4 THM-1", ()) {
  const pfx::engines::ReferenceModelShape shape = *pfx::test::model_shapes();
  const ShardLayout layout{*rc::gen::element<std::size_t>(1, 2, 4), *rc::gen::element<std::size_t>(1, 4, 16)};
  const std::vector<token> prompt = *pfx::test::prompts(shape.vocab, 2, 100);
  const std::size_t kept = *rc::gen::inRange<std::size_t>(0, prompt.size() + 1);
  std::vector<token> held(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(kept));
  const std::vector<token> tail = *pfx::test::prompts(shape.vocab, kept == 0 ? 1 : 0, 24);
  held.insert(held.end(), tail.begin(), tail.end());
  const std::size_t max_new_tokens = *rc::gen::inRange<std::size_t>(0, 5);
  const pfx::driver::LaneOptions options{.capacity = capacity, .config = {.enabled = true, .keep_min = 0}, .poison = true};

  const std::vector<RankResult> results = resume_on_ranks(shape, layout, options, held, prompt, max_new_tokens);
  // The single controller of the same layout: every rank's rows in one process, the same floats.
  DcpReferenceEngine single(shape, layout);
  const std::unique_ptr<pfx::driver::KvState> whole = single.make_kv_state(capacity);
  const pfx::driver::ColdRun cold = pfx::driver::run_cold(single, *whole, prompt, max_new_tokens);
  const auto& shards = dynamic_cast<const pfx::driver::ShardedKvState&>(*whole);
  const std::size_t rows = pfx::driver::rows_written(prompt.size(), max_new_tokens);
  const std::size_t offset = results[0].resumed.decision.offset;
  RC_ASSERT(offset % shape.chunk == 0);
  for (std::size_t r = 0; r < layout.ranks; ++r) {
    const RankResult& result = results[r];
    const std::string rank = "rank " + std::to_string(r) + " (offset " + std::to_string(offset) + ")";
    if (!pfx::test::same_bits(result.resumed.logits, result.cold.logits)) RC_FAIL(rank + ": logits differ from cold");
    if (result.resumed.generated != result.cold.generated) RC_FAIL(rank + ": generated tokens differ from cold");
    if (!pfx::test::same_bits(result.rows, result.cold_rows)) RC_FAIL(rank + ": its rows differ from its cold run's");
    // Its rows are its own alone, the single controller's shard r, and so are its floats.
    RC_ASSERT(result.rows.size() == layout.local_len(rows, r) * shape.layers * 2 * shape.width);
    RC_ASSERT(pfx::test::same_bits(result.cold_rows, shards.shard(r).copy_rows(0, layout.local_len(rows, r))));
    RC_ASSERT(pfx::test::same_bits(result.cold.logits, cold.logits));
  }
  RC_CLASSIFY(offset > 0, "resumed");
  RC_CLASSIFY(offset % (layout.ranks * layout.interleave) != 0, "offset off a multiple of ranks x interleave");
}

/// Whether a resume at `offset` (the rule's chunk is `rule_chunk`, the engine's `shape.chunk`) of a
/// random prompt differs from its cold run, on the single controller of `layout`.
bool resume_differs(const pfx::engines::ReferenceModelShape& shape, const ShardLayout& layout, std::size_t rule_chunk,
                    std::mt19937_64& random, std::size_t& offset) {
  DcpReferenceEngine engine(shape, layout);
  pfx::driver::Lane lane(engine, {.capacity = capacity, .config = {.enabled = true, .keep_min = 0},
                                  .rule_chunk = rule_chunk, .poison = true});
  const std::vector<token> prompt = pfx::test::random_tokens(random, 40 + random() % 40, shape.vocab);
  std::vector<token> held(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(prompt.size() - 1 - random() % 12));
  held.push_back(static_cast<token>((prompt[held.size()] + 1) % static_cast<token>(shape.vocab)));
  (void)lane.serve(held, 0);
  const pfx::driver::Response resumed = lane.serve(prompt, 0);
  offset = resumed.decision.offset;
  const pfx::test::Cold cold = pfx::test::cold_run(engine, capacity, prompt, 0);
  return pfx::test::differs_from_cold(lane, resumed, cold, prompt.size(), 0).has_value();
}

TEST(Dcp, AResumeOffTheChunkGridCanDifferAtAMultipleOfRanksTimesInterleaveToo) {
  pfx::test::verifies("SHARD-5 CEX-1");
  // Layouts whose cycle (ranks x interleave) is not a multiple of the chunk: the rule may resume at
  // a multiple of the cycle that is off the chunk grid, and some such resume differs from cold.
  struct Case {
    ShardLayout layout;
    std::size_t chunk;
  };
  for (const Case c : {Case{{2, 1}, 8}, Case{{4, 1}, 8}, Case{{2, 2}, 16}, Case{{4, 4}, 32}}) {
    const std::size_t cycle = c.layout.ranks * c.layout.interleave;
    const pfx::engines::ReferenceModelShape shape{.vocab = 32, .width = 8, .hidden = 16, .layers = 2, .chunk = c.chunk,
                                                  .seed = 5};
    std::mt19937_64 random(c.chunk + cycle);
    std::size_t off_grid_differs = 0;
    std::size_t on_grid = 0;
    for (int attempt = 0; attempt < 60 && off_grid_differs == 0; ++attempt) {
      std::size_t offset = 0;
      const bool differs = resume_differs(shape, c.layout, cycle, random, offset);
      ASSERT_EQ(offset % cycle, 0U);
      if (offset % c.chunk == 0) {
        EXPECT_FALSE(differs) << "a resume on the chunk grid at " << offset << " differs";
        ++on_grid;
      } else if (differs) {
        ++off_grid_differs;
      }
    }
    EXPECT_GT(off_grid_differs, 0U) << "no resume at a multiple of " << cycle << " off the chunk grid " << c.chunk
                                    << " differed: the property could not fail";
  }
}

}  // namespace
