// THM-1 on the host reference engine: every response of a lane equals a cold run of the same prompt,
// bit for bit, over random multi-turn traces. And the counterexamples that show the claim is not
// vacuous: the seed's rule (chunk = 1) and reuse past canonical_end both break it on the same engine.

#include "support/lanes.hpp"
#include "support/requirement.hpp"

#include <pfx/driver/generation.hpp>
#include <pfx/driver/host_kv_state.hpp>
#include <pfx/engines/host_reference_engine.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/machine.hpp>

#include <gtest/gtest.h>

#include <random>

namespace {

using pfx::token;
using pfx::engines::HostReferenceEngine;
using pfx::driver::Lane;
using pfx::engines::ReferenceModelShape;

constexpr std::size_t capacity = 256;

PFX_PROPERTY(Resume, EveryResponseEqualsAColdRunBitForBit, "THM-1 AUDIT-253 AUDIT-260 DRV-2", ()) {
  const ReferenceModelShape shape = *pfx::test::model_shapes();
  const std::size_t keep_min = *rc::gen::element<std::size_t>(0, 1, 5, 16);
  const auto steps = *rc::gen::container<std::vector<pfx::test::TraceStep>>(pfx::test::trace_steps(shape.vocab));
  HostReferenceEngine engine(shape);
  pfx::test::PoisonAuditingEngine audited(engine);  // DRV-2: every call starts on poisoned rows
  Lane lane(audited, {.capacity = capacity, .config = {.enabled = true, .keep_min = keep_min}, .poison = true});
  pfx::test::TraceBuilder trace(shape.vocab, capacity, shape.seed);

  const pfx::test::TraceReplay replay = pfx::test::replay_against_cold(lane, engine, capacity, steps, trace);
  RC_CLASSIFY(replay.reused > 0, "some rows reused");
  RC_CLASSIFY(shape.chunk > 1, "chunk > 1");
}

TEST(Resume, AConversationReusesItsRowsAndEveryTurnEqualsCold) {
  pfx::test::verifies("THM-1");
  HostReferenceEngine engine({.vocab = 32, .width = 8, .hidden = 16, .layers = 2, .chunk = 4, .seed = 7});
  Lane lane(engine, {.capacity = capacity, .config = {.enabled = true, .keep_min = 4}, .poison = true});
  std::vector<token> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  for (int turn = 0; turn < 4; ++turn) {
    const pfx::driver::Response response = lane.serve(prompt, 5);
    const pfx::test::Cold cold = pfx::test::cold_run(engine, capacity, prompt, 5);
    EXPECT_EQ(pfx::test::differs_from_cold(lane, response, cold, prompt.size(), 5), std::nullopt) << "turn " << turn;
    if (turn > 0) {
      // The previous prompt (>= 11 tokens) is held; the offset is its length rounded down to the grid.
      EXPECT_EQ(response.decision.reason, pfx::Reason::reused) << "turn " << turn;
      EXPECT_EQ(response.decision.offset % 4, 0U);
    }
    prompt.insert(prompt.end(), response.generated.begin(), response.generated.end());
    prompt.insert(prompt.end(), {static_cast<token>(turn), 3, 1});
  }
}

/// The prompt's logits after reusing `offset` rows of a KV state that holds `held` (written by a
/// prefill from 0, then `decoded` decode steps), against a cold prefill of `prompt`.
bool resumed_equals_cold(HostReferenceEngine& engine, const std::vector<token>& held, std::size_t decoded,
                         const std::vector<token>& prompt, std::size_t offset) {
  const auto kv = engine.make_kv_state(capacity);
  std::vector<float> logits(engine.vocab()), cold_logits(engine.vocab());
  pfx::driver::prefill_on_grid(engine, *kv, std::span(held).first(held.size() - decoded), 0, logits);
  for (std::size_t p = held.size() - decoded; p < held.size(); ++p) engine.decode(*kv, held[p], p, logits);
  pfx::driver::prefill_on_grid(engine, *kv, prompt, offset, logits);

  const auto cold_kv = engine.make_kv_state(capacity);
  pfx::driver::prefill_on_grid(engine, *cold_kv, prompt, 0, cold_logits);
  return pfx::test::same_bits(logits, cold_logits) &&
         pfx::test::same_bits(kv->copy_rows(0, prompt.size()), cold_kv->copy_rows(0, prompt.size()));
}

// The seed's rule (chunk = 1) on an engine whose grid is 8: it grants offsets off the grid, and the
// resumed prefill then splits a chunk where the cold one does not. The same cases with chunk = 8 are
// bit-exact, so the difference is the rule's, not the test's.
TEST(Counterexample, TheSeedsRuleWithChunkOneBreaksBitExactness) {
  pfx::test::verifies("CEX-1 THM-1");
  HostReferenceEngine engine({.vocab = 64, .width = 16, .hidden = 32, .layers = 2, .chunk = 8, .seed = 253});
  std::mt19937_64 random(1);
  std::size_t seed_rule_mismatches = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const std::vector<token> held = pfx::test::random_tokens(random, 17 + random() % 40, engine.vocab());
    std::vector<token> prompt = held;
    const std::vector<token> suffix = pfx::test::random_tokens(random, 1 + random() % 5, engine.vocab());
    prompt.insert(prompt.end(), suffix.begin(), suffix.end());

    for (const std::size_t chunk : {std::size_t{1}, engine.chunk()}) {
      pfx::Machine rule;
      ASSERT_TRUE(rule.configure({.enabled = true, .keep_min = 0, .chunk = chunk}).accepted());
      ASSERT_TRUE(rule.record(held, held.size()).accepted());
      const std::size_t offset = rule.query(prompt).decision.offset;
      const bool exact = resumed_equals_cold(engine, held, 0, prompt, offset);
      if (chunk == 1) {
        seed_rule_mismatches += exact ? 0 : 1;
      } else {
        EXPECT_TRUE(exact) << "trial " << trial << ": offset " << offset << " on the grid differs from cold";
      }
    }
  }
  EXPECT_GT(seed_rule_mismatches, 0U) << "the seed's rule never broke bit-exactness: the engine does not show THM-1's point";
  std::cout << "chunk = 1: " << seed_rule_mismatches << " of 40 resumed runs differ from cold\n";
}

// Rows at or past canonical_end were written by decode. A record that claimed them (as if the whole
// answer had been prefilled) would grant them, and the resumed run would differ from cold.
TEST(Counterexample, ReusingRowsPastCanonicalEndBreaksBitExactness) {
  pfx::test::verifies("CEX-1 AUDIT-260 THM-1");
  HostReferenceEngine engine({.vocab = 64, .width = 16, .hidden = 32, .layers = 2, .chunk = 4, .seed = 260});
  std::mt19937_64 random(2);
  std::size_t mismatches = 0;
  for (int trial = 0; trial < 20; ++trial) {
    // 16 prompt tokens prefilled, then 8 answer tokens, the first 7 with rows written by decode.
    std::vector<token> held = pfx::test::random_tokens(random, 24, engine.vocab());
    std::vector<token> prompt = held;
    prompt.push_back(static_cast<token>(random() % engine.vocab()));
    const std::size_t decoded = 8;

    for (const std::size_t canonical_end : {held.size(), held.size() - decoded}) {
      pfx::Machine rule;
      ASSERT_TRUE(rule.configure({.enabled = true, .keep_min = 0, .chunk = engine.chunk()}).accepted());
      ASSERT_TRUE(rule.record(held, canonical_end).accepted());
      const std::size_t offset = rule.query(prompt).decision.offset;
      const bool exact = resumed_equals_cold(engine, held, decoded, prompt, offset);
      if (canonical_end == held.size()) {
        mismatches += exact ? 0 : 1;
      } else {
        EXPECT_TRUE(exact) << "trial " << trial << ": the rule's offset " << offset << " differs from cold";
      }
    }
  }
  EXPECT_GT(mismatches, 0U) << "reusing decode-written rows never differed: the engine does not show audit 260's point";
  std::cout << "past canonical_end: " << mismatches << " of 20 resumed runs differ from cold\n";
}

TEST(Lane, AllocatesTheKvStateOnceAtFullCapacity) {
  pfx::test::verifies("DRV-1 MEM-1");
  const ReferenceModelShape shape{.vocab = 16, .width = 8, .hidden = 8, .layers = 3, .chunk = 4, .seed = 1};
  HostReferenceEngine engine(shape);
  Lane lane(engine, {.capacity = 300, .config = {.enabled = true, .keep_min = 0}, .poison = true});
  const auto& kv = dynamic_cast<const pfx::driver::HostKvState&>(lane.kv());
  const float* allocation = kv.data();
  EXPECT_EQ(kv.memory_bytes(), sizeof(float) * 300 * 3 * 2 * 8);
  EXPECT_GE(lane.machine().capacity(), 300U);
  const std::size_t record_capacity = lane.machine().capacity();

  std::mt19937_64 random(3);
  for (int i = 0; i < 30; ++i) {
    const std::size_t length = 1 + random() % 250;
    const std::size_t max_new = random() % (300 - length + 1);
    (void)lane.serve(pfx::test::random_tokens(random, length, shape.vocab), max_new);
    EXPECT_EQ(kv.data(), allocation);
    EXPECT_EQ(lane.machine().capacity(), record_capacity);
  }
  EXPECT_EQ(kv.memory_bytes(), sizeof(float) * 300 * 3 * 2 * 8);
}

}  // namespace
