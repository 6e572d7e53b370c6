// The two engines a conformance check must tell apart from a conforming one. BlockedAttentionEngine
// is deterministic and resumes on its grid bit for bit, but an unaligned resume changes its floats
// (the failure of the original class's rule, chunk = 1). NondeterministicEngine gives two cold runs
// of the same prompt different bits.

#include "engines/agreement.hpp"
#include "support/lanes.hpp"
#include "support/requirement.hpp"

#include <pfx/driver/generation.hpp>
#include <pfx/engines/blocked_attention_engine.hpp>
#include <pfx/engines/nondeterministic_engine.hpp>

#include <gtest/gtest.h>

#include <random>

namespace {

using pfx::token;
using pfx::engines::BlockedAttentionEngine;
using pfx::engines::NondeterministicEngine;
using pfx::engines::ReferenceModelShape;

constexpr std::size_t capacity = 128;

/// What a resumed prefill of `prompt` produced: its logits and rows [0, prompt.size()).
struct Resumed {
  std::vector<float> logits;
  std::vector<float> rows;
};

/// `prompt` resumed at `offset` on a KV state that holds a held prompt: prompt[0, offset) and then
/// `tail` (another answer), prefilled on the grid from 0, as a lane that reuses `offset` rows does.
Resumed resume(pfx::driver::Engine& engine, const std::vector<token>& prompt, const std::vector<token>& tail,
               std::size_t offset) {
  std::vector<token> held(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(offset));
  held.insert(held.end(), tail.begin(), tail.end());
  const auto kv = engine.make_kv_state(capacity);
  Resumed out{std::vector<float>(engine.vocab()), {}};
  pfx::driver::prefill_on_grid(engine, *kv, held, 0, out.logits);
  pfx::driver::prefill_on_grid(engine, *kv, prompt, offset, out.logits);
  out.rows = kv->copy_rows(0, prompt.size());
  return out;
}

bool equals_cold(const Resumed& resumed, const pfx::test::Cold& cold) {
  return pfx::test::same_bits(resumed.logits, cold.logits) && pfx::test::same_bits(resumed.rows, cold.rows);
}

PFX_PROPERTY(BlockedAttention, AColdRunIsAFunctionOfThePrompt, "THM-1", ()) {
  const ReferenceModelShape shape = *pfx::test::model_shapes();
  const auto prompt = *pfx::test::prompts(shape.vocab, 1, 60);
  const std::size_t new_tokens = *rc::gen::inRange<std::size_t>(0, 6);
  BlockedAttentionEngine engine(shape);
  BlockedAttentionEngine twin(shape);
  const pfx::test::Cold first = pfx::test::cold_run(engine, capacity, prompt, new_tokens);
  const pfx::test::Cold again = pfx::test::cold_run(engine, capacity, prompt, new_tokens);
  const pfx::test::Cold other = pfx::test::cold_run(twin, capacity, prompt, new_tokens);
  RC_ASSERT(pfx::test::same_bits(first.logits, again.logits));
  RC_ASSERT(pfx::test::same_bits(first.rows, again.rows));
  RC_ASSERT(first.generated == again.generated);
  RC_ASSERT(pfx::test::same_bits(first.rows, other.rows));
  RC_ASSERT(pfx::test::same_bits(first.logits, other.logits));
}

PFX_PROPERTY(BlockedAttention, AResumeOnItsGridEqualsCold, "THM-1", ()) {
  const ReferenceModelShape shape = *pfx::test::model_shapes();
  const auto prompt = *pfx::test::prompts(shape.vocab, 2, 60);
  const std::size_t offset = *rc::gen::inRange<std::size_t>(0, (prompt.size() - 1) / shape.chunk + 1) * shape.chunk;
  const auto tail = *pfx::test::prompts(shape.vocab, 1, 20);
  BlockedAttentionEngine engine(shape);
  const pfx::test::Cold cold = pfx::test::cold_run(engine, capacity, prompt, 0);
  RC_ASSERT(equals_cold(resume(engine, prompt, tail, offset), cold));
  RC_CLASSIFY(offset > 0, "offset > 0");
}

// The tiles change how the sums round, not what they sum: prefill agrees with decode up to rounding.
PFX_PROPERTY(BlockedAttention, PrefillAndDecodeComputeTheSameAttention, "THM-1", ()) {
  const ReferenceModelShape shape = *pfx::test::model_shapes();
  const auto prompt = *pfx::test::prompts(shape.vocab, 1, 60);
  BlockedAttentionEngine engine(shape);
  RC_ASSERT(pfx::test::prefill_and_decode_agree(engine, prompt));
}

// Off the grid the first resumed call starts elsewhere and is shorter, so its tiles differ.
TEST(BlockedAttention, AResumeOffItsGridDiffersFromColdOnTypicalPrompts) {
  pfx::test::verifies("CEX-1 THM-1");
  const ReferenceModelShape shape{.vocab = 64, .width = 16, .hidden = 32, .layers = 2, .chunk = 8, .seed = 253};
  BlockedAttentionEngine engine(shape);
  std::mt19937_64 random(3);
  std::size_t differ = 0;
  constexpr std::size_t trials = 40;
  for (std::size_t trial = 0; trial < trials; ++trial) {
    const std::vector<token> prompt = pfx::test::random_tokens(random, 24 + random() % 40, shape.vocab);
    std::size_t offset = 9 + random() % (prompt.size() - 10);
    if (offset % shape.chunk == 0) ++offset;
    const std::vector<token> tail = pfx::test::random_tokens(random, 1 + random() % 8, shape.vocab);
    const pfx::test::Cold cold = pfx::test::cold_run(engine, capacity, prompt, 0);
    differ += equals_cold(resume(engine, prompt, tail, offset), cold) ? 0 : 1;
  }
  std::cout << differ << " of " << trials << " unaligned resumes differ from cold\n";
  EXPECT_GE(differ, trials * 9 / 10) << "the chunk shape barely changes the floats";
}

TEST(Nondeterministic, TwoColdRunsOfTheSamePromptDiffer) {
  pfx::test::verifies("THM-1");
  const ReferenceModelShape shape{.vocab = 64, .width = 16, .hidden = 32, .layers = 2, .chunk = 8, .seed = 253};
  NondeterministicEngine engine(shape);
  std::mt19937_64 random(4);
  for (int trial = 0; trial < 10; ++trial) {
    const std::vector<token> prompt = pfx::test::random_tokens(random, 64, shape.vocab);
    const pfx::test::Cold first = pfx::test::cold_run(engine, capacity, prompt, 4);
    const pfx::test::Cold second = pfx::test::cold_run(engine, capacity, prompt, 4);
    EXPECT_FALSE(pfx::test::same_bits(first.rows, second.rows)) << "trial " << trial;
  }
}

TEST(Nondeterministic, TwoEnginesOfTheSameSeedMakeTheSameFloats) {
  pfx::test::verifies("THM-1");
  const ReferenceModelShape shape{.vocab = 64, .width = 16, .hidden = 32, .layers = 2, .chunk = 8, .seed = 253};
  NondeterministicEngine engine(shape, 9);
  NondeterministicEngine twin(shape, 9);
  NondeterministicEngine other(shape, 10);
  std::mt19937_64 random(5);
  const std::vector<token> prompt = pfx::test::random_tokens(random, 64, shape.vocab);
  const pfx::test::Cold first = pfx::test::cold_run(engine, capacity, prompt, 4);
  EXPECT_TRUE(pfx::test::same_bits(first.rows, pfx::test::cold_run(twin, capacity, prompt, 4).rows));
  EXPECT_FALSE(pfx::test::same_bits(first.rows, pfx::test::cold_run(other, capacity, prompt, 4).rows));
}

TEST(Engines, BadCallsAreRefused) {
  const ReferenceModelShape shape{.vocab = 8, .width = 4, .hidden = 8, .layers = 2, .chunk = 4, .seed = 1};
  BlockedAttentionEngine blocked(shape);
  NondeterministicEngine nondeterministic(shape);
  for (pfx::driver::Engine* engine : {static_cast<pfx::driver::Engine*>(&blocked),
                                      static_cast<pfx::driver::Engine*>(&nondeterministic)}) {
    const auto kv = engine->make_kv_state(4);
    std::vector<float> logits(shape.vocab);
    const std::vector<token> outside = {8};
    EXPECT_THROW(engine->prefill(*kv, outside, 0, logits), std::out_of_range);
    const std::vector<token> five = {1, 2, 3, 4, 5};
    EXPECT_THROW(engine->prefill(*kv, five, 0, logits), std::out_of_range);
    EXPECT_THROW(engine->decode(*kv, 1, 4, logits), std::out_of_range);
  }
  EXPECT_THROW(BlockedAttentionEngine({.layers = 1}), std::invalid_argument);
  EXPECT_THROW(NondeterministicEngine({.layers = 1}), std::invalid_argument);
}

}  // namespace
