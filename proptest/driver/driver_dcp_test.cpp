// THM-1 under sharding (docs/spec.md): on the decode-context-parallel reference engine, one rank per
// thread, each holding and attending only its own rows, a resume on the chunk grid equals the cold
// run of the same ranks and interleave bit for bit: logits, generated tokens and every rank's rows,
// which are also the single controller's. Off the grid a resume can differ, and does, at a multiple
// of ranks x interleave too: the grid of a DCP engine is its chunk's, not its layout's.

#include "support/dcp_resume.hpp"
#include "support/lanes.hpp"
#include "support/requirement.hpp"

#include <pfx/driver/lane.hpp>
#include <pfx/engines/dcp_reference_engine.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <vector>

namespace {

using pfx::token;
using pfx::driver::ShardLayout;
using pfx::engines::DcpReferenceEngine;

constexpr std::size_t capacity = 160;

PFX_PROPERTY(Dcp, AResumeOnTheChunkGridEqualsTheColdRunOfTheSameRanksAndInterleave, "SHARD-5 SHARD-4 THM-1", ()) {
  pfx::test::dcp_resume_on_the_chunk_grid_equals_cold<DcpReferenceEngine>(capacity);
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
