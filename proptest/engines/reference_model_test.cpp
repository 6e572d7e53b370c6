// The reference model's attention (pfx/engines/reference_model.hpp): a row reads exactly the rows
// A(p) = {p} and p - 2^k, so a token costs O(log p); a row far back still reaches later rows through
// the layers; prefill and decode compute the same function with different reductions; and where a
// prefill starts still decides its floats, so THM-1 can fail.

#include "engines/agreement.hpp"
#include "support/lanes.hpp"
#include "support/requirement.hpp"

#include "reference_forward.hpp"

#include <pfx/driver/generation.hpp>
#include <pfx/engines/host_reference_engine.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

namespace {

using pfx::token;
using pfx::engines::HostReferenceEngine;
using pfx::engines::ReferenceModelShape;

constexpr float nan = std::numeric_limits<float>::quiet_NaN();

bool any_nan(const std::vector<float>& xs) {
  return std::any_of(xs.begin(), xs.end(), [](float x) { return std::isnan(x); });
}

TEST(Attends, IsThePositionAndThePowersOfTwoBeforeIt) {
  using pfx::engines::attends;
  EXPECT_TRUE(attends(0, 0));
  EXPECT_TRUE(attends(1000, 1000));
  EXPECT_TRUE(attends(1000, 999));
  EXPECT_TRUE(attends(1000, 1000 - 512));
  EXPECT_FALSE(attends(1000, 1000 - 3));
  EXPECT_FALSE(attends(1000, 1001));
  EXPECT_TRUE(attends(1ULL << 63, 0));
  EXPECT_TRUE(attends(~0ULL, (~0ULL) - (1ULL << 63)));
  EXPECT_FALSE(attends(~0ULL, 0));
  std::size_t rows = 0;
  for (std::uint64_t j = 0; j <= 1000; ++j) rows += attends(1000, j) ? 1 : 0;
  EXPECT_EQ(rows, 11U) << "1000 and 1000 - 2^k for k = 0..9";
}

// Poison one row before the chunk: the chunk's rows and logits change exactly when some row of the
// chunk attends to it (the NaN then reaches that row's upper layers), and not at all otherwise.
PFX_PROPERTY(ReferenceModel, APrefillReadsExactlyTheAttendedRows, "THM-1 DRV-2", ()) {
  const ReferenceModelShape shape = *pfx::test::model_shapes();
  const auto prompt = *pfx::test::prompts(shape.vocab, 2, 150);
  HostReferenceEngine engine(shape);
  const std::size_t n = prompt.size();
  const std::size_t start = *rc::gen::inRange<std::size_t>(1, n);
  const std::size_t end = std::min(n, start + *rc::gen::inRange<std::size_t>(1, 2 * shape.chunk + 1));
  const std::size_t poisoned = *rc::gen::inRange<std::size_t>(0, start);
  const std::span<const token> tokens(prompt);

  std::vector<float> logits(shape.vocab), clean_logits(shape.vocab);
  const auto clean = engine.make_kv_state(n);
  pfx::driver::prefill_on_grid(engine, *clean, tokens.first(start), 0, clean_logits);
  engine.prefill(*clean, tokens.subspan(start, end - start), start, clean_logits);
  const auto kv = engine.make_kv_state(n);
  pfx::driver::prefill_on_grid(engine, *kv, tokens.first(start), 0, logits);
  kv->fill(poisoned, poisoned + 1, nan);
  engine.prefill(*kv, tokens.subspan(start, end - start), start, logits);

  bool read = false;
  for (std::size_t p = start; p < end; ++p) read = read || pfx::engines::attends(p, poisoned);
  const std::vector<float> rows = kv->copy_rows(start, end);
  RC_CLASSIFY(read, "the poisoned row is attended");
  if (read) {
    RC_ASSERT(any_nan(rows));
  } else {
    RC_ASSERT(pfx::test::same_bits(rows, clean->copy_rows(start, end)));
    RC_ASSERT(pfx::test::same_bits(logits, clean_logits));
  }
}

// A decode step reads A(p) in its first layer and rows written earlier in the others: its logits are
// NaN exactly when p attends to the poisoned row.
PFX_PROPERTY(ReferenceModel, ADecodeStepReadsExactlyTheAttendedRows, "THM-1 DRV-2", ()) {
  const ReferenceModelShape shape = *pfx::test::model_shapes();
  const auto prompt = *pfx::test::prompts(shape.vocab, 2, 150);
  HostReferenceEngine engine(shape);
  const std::size_t p = prompt.size() - 1;
  const std::size_t poisoned = *rc::gen::inRange<std::size_t>(0, p);
  std::vector<float> logits(shape.vocab);
  const auto kv = engine.make_kv_state(prompt.size());
  pfx::driver::prefill_on_grid(engine, *kv, std::span(prompt).first(p), 0, logits);
  kv->fill(poisoned, poisoned + 1, nan);
  engine.decode(*kv, prompt.back(), p, logits);
  RC_ASSERT(any_nan(logits) == pfx::engines::attends(p, poisoned));
}

// Row j reaches row p in one layer when p - j is a power of two, and in L layers when p - j is a sum
// of at most L powers of two: poisoning row 0 of a long prompt makes the last logits NaN exactly
// when the last position has at most `layers` binary ones.
PFX_PROPERTY(ReferenceModel, ARowFarBackReachesTheLastRowThroughTheLayers, "THM-1", ()) {
  ReferenceModelShape shape = *pfx::test::model_shapes();
  const std::size_t last = *rc::gen::inRange<std::size_t>(1, 600);
  HostReferenceEngine engine(shape);
  std::mt19937_64 random(shape.seed);
  const std::vector<token> prompt = pfx::test::random_tokens(random, last + 1, shape.vocab);
  std::vector<float> logits(shape.vocab);
  const auto kv = engine.make_kv_state(prompt.size());
  engine.prefill(*kv, std::span(prompt).first(1), 0, logits);
  kv->fill(0, 1, nan);
  pfx::driver::prefill_on_grid(engine, *kv, prompt, 1, logits);
  const bool reached = static_cast<std::size_t>(std::popcount(last)) <= shape.layers;
  RC_CLASSIFY(reached, "reached");
  RC_ASSERT(any_nan(logits) == reached);
}

TEST(ReferenceModel, RowZeroReachesTheLastRowOfA65KTokenPrompt) {
  pfx::test::verifies("THM-1");
  const ReferenceModelShape shape{.chunk = 64};
  HostReferenceEngine engine(shape);
  std::mt19937_64 random(6);
  for (const std::size_t last : {std::size_t{(1U << 16) + 8}, std::size_t{(1U << 16) + 11}}) {
    const std::vector<token> prompt = pfx::test::random_tokens(random, last + 1, shape.vocab);
    std::vector<float> logits(shape.vocab);
    const auto kv = engine.make_kv_state(prompt.size());
    engine.prefill(*kv, std::span(prompt).first(1), 0, logits);
    kv->fill(0, 1, nan);
    pfx::driver::prefill_on_grid(engine, *kv, prompt, 1, logits);
    // 2^16 + 8 is two powers of two: two layers reach it; 2^16 + 11 needs four.
    EXPECT_EQ(any_nan(logits), last == (1U << 16) + 8) << "last position " << last;
  }
}

// Prefill (two partial results merged by log-sum-exp) and decode (one online pass) reduce the same
// attention: token by token, decode writes the rows prefill writes up to rounding.
PFX_PROPERTY(ReferenceModel, PrefillAndDecodeComputeTheSameFunction, "THM-1", ()) {
  const ReferenceModelShape shape = *pfx::test::model_shapes();
  const auto prompt = *pfx::test::prompts(shape.vocab, 1, 80);
  HostReferenceEngine engine(shape);
  RC_ASSERT(pfx::test::prefill_and_decode_agree(engine, prompt));
}

/// A resume at `offset` of `prompt` on a state that held prompt[0, offset) and another tail, against
/// a cold prefill: true when the logits and rows are the same bits.
bool resume_equals_cold(HostReferenceEngine& engine, const std::vector<token>& prompt, std::size_t offset,
                        const std::vector<token>& tail) {
  std::vector<token> held(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(offset));
  held.insert(held.end(), tail.begin(), tail.end());
  const std::size_t capacity = std::max(held.size(), prompt.size());
  std::vector<float> logits(engine.vocab());
  const auto kv = engine.make_kv_state(capacity);
  pfx::driver::prefill_on_grid(engine, *kv, held, 0, logits);
  pfx::driver::prefill_on_grid(engine, *kv, prompt, offset, logits);
  const pfx::test::Cold cold = pfx::test::cold_run(engine, capacity, prompt, 0);
  return pfx::test::same_bits(logits, cold.logits) && pfx::test::same_bits(kv->copy_rows(0, prompt.size()), cold.rows);
}

// With O(log p) rows per token the split of a prefill still decides its floats: resumes off the
// grid differ from cold on most prompts, resumes on it never do.
TEST(ReferenceModel, AResumeOffTheGridDiffersFromColdOnTypicalPrompts) {
  pfx::test::verifies("CEX-1 THM-1");
  HostReferenceEngine engine({.vocab = 64, .width = 16, .hidden = 32, .layers = 2, .chunk = 8, .seed = 253});
  std::mt19937_64 random(7);
  std::size_t differ = 0;
  constexpr std::size_t trials = 40;
  for (std::size_t trial = 0; trial < trials; ++trial) {
    const std::vector<token> prompt = pfx::test::random_tokens(random, 40 + random() % 200, engine.vocab());
    const std::vector<token> tail = pfx::test::random_tokens(random, 1 + random() % 8, engine.vocab());
    const std::size_t aligned = (8 + random() % (prompt.size() - 8)) / 8 * 8;
    EXPECT_TRUE(resume_equals_cold(engine, prompt, aligned, tail)) << "trial " << trial << ", offset " << aligned;
    const std::size_t unaligned = aligned + 1 + random() % 7;
    differ += resume_equals_cold(engine, prompt, std::min(unaligned, prompt.size() - 1), tail) ? 0 : 1;
  }
  std::cout << differ << " of " << trials << " unaligned resumes differ from cold\n";
  EXPECT_GE(differ, trials * 3 / 4);
}

}  // namespace

PFX_PROPERTY(ReferenceModel, TheLogitsSummedOnTwoThreadsAreThoseOfOneBitForBit, "THM-1", ()) {
  // From 2^16 ids the unembedding's rows are split between two threads; every row must still be the
  // plain ordered sum, or the engine's answers would depend on the vocabulary's size class.
  constexpr std::size_t split_from = pfx::engines::reference::unembed_split_from;
  const std::size_t rows = *rc::gen::element(split_from - 1, split_from, split_from + 1, 3 * split_from + 7);
  const std::size_t columns = *rc::gen::element<std::size_t>(1, 7, 16);
  std::mt19937_64 random(*rc::gen::arbitrary<std::uint64_t>());
  // Values in [-8, 8) with 24 random bits each: cheap to draw, and sums that round differently in
  // another order.
  const auto draw = [&random] { return static_cast<float>(static_cast<std::int64_t>(random() >> 40) - (1 << 23)) / 1048576.0F; };
  std::vector<float> m(rows * columns);
  std::vector<float> x(columns);
  for (float& v : m) v = draw();
  for (float& v : x) v = draw();
  std::vector<float> one(rows, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> two(rows, std::numeric_limits<float>::quiet_NaN());
  pfx::engines::reference::matvec(one.data(), m, x.data(), rows, columns);
  pfx::engines::reference::unembed(two.data(), m, x.data(), rows, columns);
  RC_ASSERT(pfx::test::same_bits(one, two));
  RC_ASSERT(!any_nan(two));  // every row written, the upper half's too
}
