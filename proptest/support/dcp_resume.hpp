#pragma once

/// \file
/// THM-1 under sharding as a property of any DCP engine type (the host's DcpReferenceEngine, the
/// device's cuda::DcpReferenceEngineOnDevice): one rank per thread, each holding and attending only
/// its own rows, a resume on the chunk grid equals the cold run of the same ranks and interleave bit
/// for bit (logits, generated tokens and every rank's rows), which are also the single controller's.

#include "support/lanes.hpp"

#include <pfx/driver/cold_run.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/driver/shard_layout.hpp>
#include <pfx/driver/sharded_kv_state.hpp>
#include <pfx/driver/sharded_lane.hpp>
#include <pfx/driver/threads_collective.hpp>
#include <pfx/engines/reference_model.hpp>

#include <rapidcheck.h>

#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace pfx::test {

/// What rank r of a group saw: the resumed response, its rows, and its cold run's.
struct DcpRankResult {
  driver::ShardedResponse resumed;
  std::vector<float> rows;
  driver::ColdRun cold;
  std::vector<float> cold_rows;
};

/// On `layout.ranks` threads, each a rank with its own Engine and ShardedLane: serves `held`, then
/// `prompt` (resumed where the rule says), then runs `prompt` cold on a state of its own.
template <class Engine>
std::vector<DcpRankResult> dcp_resume_on_ranks(const engines::ReferenceModelShape& shape,
                                               const driver::ShardLayout& layout, const driver::LaneOptions& options,
                                               const std::vector<token>& held, const std::vector<token>& prompt,
                                               std::size_t max_new_tokens) {
  driver::ThreadsCollective group(layout.ranks);
  std::vector<DcpRankResult> results(layout.ranks);
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < layout.ranks; ++r) {
    threads.emplace_back([&, r] {
      Engine engine(shape, layout, &group.rank(r));
      driver::ShardedLane lane(engine, options, layout, group.rank(r));
      (void)lane.serve(held, max_new_tokens);
      DcpRankResult& result = results[r];
      result.resumed = lane.serve(prompt, max_new_tokens);
      const std::size_t rows = driver::rows_written(prompt.size(), max_new_tokens);
      result.rows = lane.kv().copy_rows(0, rows);  // this rank's own
      const std::unique_ptr<driver::KvState> cold = engine.make_kv_state(options.capacity);
      result.cold = driver::run_cold(engine, *cold, prompt, max_new_tokens);
      result.cold_rows = cold->copy_rows(0, rows);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

/// The property, for one drawn shape, layout ({1, 2, 4} ranks x interleave {1, 4, 16}), prompt, held
/// prefix and generation length, with a lane of `capacity` positions.
template <class Engine>
void dcp_resume_on_the_chunk_grid_equals_cold(std::size_t capacity) {
  const engines::ReferenceModelShape shape = *model_shapes();
  const driver::ShardLayout layout{*rc::gen::element<std::size_t>(1, 2, 4), *rc::gen::element<std::size_t>(1, 4, 16)};
  const std::vector<token> prompt = *prompts(shape.vocab, 2, 100);
  const std::size_t kept = *rc::gen::inRange<std::size_t>(0, prompt.size() + 1);
  std::vector<token> held(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(kept));
  const std::vector<token> tail = *prompts(shape.vocab, kept == 0 ? 1 : 0, 24);
  held.insert(held.end(), tail.begin(), tail.end());
  const std::size_t max_new_tokens = *rc::gen::inRange<std::size_t>(0, 5);
  const driver::LaneOptions options{.capacity = capacity, .config = {.enabled = true, .keep_min = 0}, .poison = true};

  const std::vector<DcpRankResult> results =
      dcp_resume_on_ranks<Engine>(shape, layout, options, held, prompt, max_new_tokens);
  // The single controller of the same layout: every rank's rows in one process, the same floats.
  Engine single(shape, layout);
  const std::unique_ptr<driver::KvState> whole = single.make_kv_state(capacity);
  const driver::ColdRun cold = driver::run_cold(single, *whole, prompt, max_new_tokens);
  const auto& shards = dynamic_cast<const driver::ShardedKvState&>(*whole);
  const std::size_t rows = driver::rows_written(prompt.size(), max_new_tokens);
  const std::size_t offset = results[0].resumed.decision.offset;
  RC_ASSERT(offset % shape.chunk == 0);
  for (std::size_t r = 0; r < layout.ranks; ++r) {
    const DcpRankResult& result = results[r];
    const std::string rank = "rank " + std::to_string(r) + " (offset " + std::to_string(offset) + ")";
    if (!same_bits(result.resumed.logits, result.cold.logits)) RC_FAIL(rank + ": logits differ from cold");
    if (result.resumed.generated != result.cold.generated) RC_FAIL(rank + ": generated tokens differ from cold");
    if (!same_bits(result.rows, result.cold_rows)) RC_FAIL(rank + ": its rows differ from its cold run's");
    // Its rows are its own alone, the single controller's shard r, and so are its floats.
    RC_ASSERT(result.rows.size() == layout.local_len(rows, r) * shape.layers * 2 * shape.width);
    RC_ASSERT(same_bits(result.cold_rows, shards.shard(r).copy_rows(0, layout.local_len(rows, r))));
    RC_ASSERT(same_bits(result.cold.logits, cold.logits));
  }
  RC_CLASSIFY(offset > 0, "resumed");
  RC_CLASSIFY(offset % (layout.ranks * layout.interleave) != 0, "offset off a multiple of ranks x interleave");
}

}  // namespace pfx::test
