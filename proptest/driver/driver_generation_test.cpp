// The lane's loops and its order of effects, checked on a recording engine: prefill chunks lie on the
// grid anchored at 0, greedy decoding picks the first largest logit, and the lane poisons before the
// engine runs and waits for the device before it commits.

#include "support/requirement.hpp"

#include <pfx/driver/generation.hpp>
#include <pfx/driver/kv_state.hpp>
#include <pfx/driver/lane.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

using pfx::token;

/// A KV state that holds nothing and logs what is done to it.
class RecordingKvState final : public pfx::driver::KvState {
 public:
  RecordingKvState(std::size_t capacity, std::vector<std::string>& log) : shape_{capacity, 1, 1}, log_(log) {}
  const pfx::driver::KvShape& shape() const noexcept override { return shape_; }
  void forget(std::size_t from) override { log_.push_back("forget " + std::to_string(from)); }
  bool owns_rows() const noexcept override { return true; }
  void fill(std::size_t from, std::size_t to, float) override {
    pfx::driver::check_rows(shape_, from, to, "RecordingKvState::fill");
    log_.push_back("fill " + std::to_string(from) + " " + std::to_string(to));
  }
  std::vector<float> copy_rows(std::size_t from, std::size_t to) const override {
    return std::vector<float>(to - from, 0.0f);
  }
  void synchronize() override {
    log_.push_back("synchronize");
    if (on_synchronize) on_synchronize();
  }
  std::size_t memory_bytes() const noexcept override { return 0; }

  std::function<void()> on_synchronize;

 private:
  pfx::driver::KvShape shape_;
  std::vector<std::string>& log_;
};

/// An engine that logs its calls and answers logits that make token (position + 1) % vocab likely.
class RecordingEngine final : public pfx::driver::Engine {
 public:
  RecordingEngine(std::size_t chunk, std::size_t vocab) : chunk_(chunk), vocab_(vocab) {}
  std::size_t chunk() const noexcept override { return chunk_; }
  std::size_t vocab() const noexcept override { return vocab_; }
  std::unique_ptr<pfx::driver::KvState> make_kv_state(std::size_t capacity) const override {
    auto kv = std::make_unique<RecordingKvState>(capacity, log);
    last_kv = kv.get();
    return kv;
  }
  void prefill(pfx::driver::KvState&, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override {
    log.push_back("prefill " + std::to_string(position) + " " + std::to_string(position + tokens.size()));
    answer(position + tokens.size() - 1, logits);
  }
  void decode(pfx::driver::KvState&, token next, std::size_t position, std::span<float> logits) override {
    log.push_back("decode " + std::to_string(position) + " " + std::to_string(next));
    answer(position, logits);
  }

  mutable std::vector<std::string> log;
  mutable RecordingKvState* last_kv = nullptr;

 private:
  void answer(std::size_t row, std::span<float> logits) const {
    for (float& x : logits) x = 0.0f;
    logits[(row + 1) % vocab_] = 1.0f;
  }

  std::size_t chunk_;
  std::size_t vocab_;
};

PFX_PROPERTY(Generation, PrefillChunksFollowTheGridAnchoredAtZero, "THM-1", ()) {
  const std::size_t chunk = *rc::gen::inRange<std::size_t>(1, 20);
  const std::size_t length = *rc::gen::inRange<std::size_t>(1, 200);
  const std::size_t from = *rc::gen::inRange<std::size_t>(0, length);
  RecordingEngine engine(chunk, 4);
  const auto kv = engine.make_kv_state(length);
  const std::vector<token> prompt(length, 1);
  std::vector<float> logits(4);
  pfx::driver::prefill_on_grid(engine, *kv, prompt, from, logits);

  std::vector<std::string> expected;  // chunks [b, e): e is the next multiple of chunk, or the end
  for (std::size_t begin = from; begin < length;) {
    const std::size_t end = std::min((begin / chunk + 1) * chunk, length);
    expected.push_back("prefill " + std::to_string(begin) + " " + std::to_string(end));
    begin = end;
  }
  RC_ASSERT(engine.log == expected);
}

PFX_PROPERTY(Generation, GreedyDecodingPicksTheFirstLargestLogit, "THM-1", ()) {
  // Small integers, so that ties are common.
  const auto values = *rc::gen::nonEmpty(rc::gen::container<std::vector<int>>(rc::gen::inRange(-3, 4)));
  const std::vector<float> logits(values.begin(), values.end());
  std::size_t first_largest = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > logits[first_largest]) first_largest = i;
  }
  RC_ASSERT(pfx::driver::argmax(logits) == static_cast<token>(first_largest));
}

PFX_PROPERTY(Generation, TheStaleRowCheckRejectsEveryNonFiniteLogit, "DRV-2", ()) {
  // A poisoned row reads as NaN; an overflow as an infinity. Either makes the logits unusable.
  const float special = *rc::gen::element(std::numeric_limits<float>::quiet_NaN(),
                                          std::numeric_limits<float>::infinity(),
                                          -std::numeric_limits<float>::infinity(),
                                          std::numeric_limits<float>::max(), -0.0f);
  std::vector<float> logits = *rc::gen::nonEmpty(rc::gen::container<std::vector<float>>(
      rc::gen::map(rc::gen::inRange(-1000, 1000), [](int x) { return static_cast<float>(x) / 8; })));
  RC_ASSERT(pfx::driver::all_finite(logits));
  logits[*rc::gen::inRange<std::size_t>(0, logits.size())] = special;
  RC_ASSERT(pfx::driver::all_finite(logits) == std::isfinite(special));
}

TEST(Lane, UnderAPrefillStepItCommitsNoLastPromptRowComputedAlone) {
  pfx::test::verifies("INV-2 INV-12 DRV-2");
  // With prefill_step 4, a 9-token prompt's prefill ends with row 8 alone (8 % 4 == 0): a longer
  // prompt computes that row in a longer step, so the commit claims rows up to 8, not 9; a 10-token
  // prompt's last step holds two rows, and the commit claims all ten.
  RecordingEngine engine(4, 16);
  pfx::driver::Lane lane(engine, {.capacity = 64, .config = {.enabled = true, .keep_min = 0, .prefill_step = 4}});
  const std::vector<token> nine = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  lane.serve(nine, 2);
  EXPECT_EQ(lane.machine().held().canonical_end, 8U);
  std::vector<token> ten = nine;
  ten.push_back(3);
  lane.serve(ten, 2);
  EXPECT_EQ(lane.machine().held().canonical_end, 10U);
  pfx::driver::Lane without(engine, {.capacity = 64, .config = {.enabled = true, .keep_min = 0}});
  without.serve(nine, 2);
  EXPECT_EQ(without.machine().held().canonical_end, 9U);  // no prefill step: the prompt's length, as THM-1 has it
}

TEST(Lane, WhereDecodeRowsAreExactItCommitsOnlyTheTokensWhoseRowsItWrote) {
  pfx::test::verifies("INV-2 INV-11 DRV-2");
  // The rule may then grant every row the record holds, so the record names no token whose row was
  // never written: a request generating 3 tokens writes rows for the prompt and the first 2 (the last
  // is sampled, never fed). canonical_end is still the prompt's length: the record says which rows
  // decode wrote. Without the premise the last token is named too, and never granted (INV-2).
  RecordingEngine engine(4, 16);
  const std::vector<token> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (const std::size_t generated : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
    pfx::driver::Lane exact(engine, {.capacity = 64, .config = {.enabled = true, .keep_min = 0, .decode_rows_exact = true}});
    const pfx::driver::Response r = exact.serve(prompt, generated);
    std::vector<token> written = prompt;
    if (generated > 0) written.insert(written.end(), r.generated.begin(), r.generated.end() - 1);
    EXPECT_EQ(exact.machine().held().ids, written) << generated << " generated";
    EXPECT_EQ(exact.machine().held().canonical_end, prompt.size());
    pfx::driver::Lane inexact(engine, {.capacity = 64, .config = {.enabled = true, .keep_min = 0}});
    inexact.serve(prompt, generated);
    EXPECT_EQ(inexact.machine().held().ids.size(), prompt.size() + generated) << generated << " generated";
  }
}

TEST(Lane, PoisonsBeforeTheEngineRunsAndWaitsForTheDeviceBeforeItCommits) {
  pfx::test::verifies("DRV-2 DRV-4 INV-8");
  RecordingEngine engine(4, 16);
  pfx::driver::Lane lane(engine, {.capacity = 32, .config = {.enabled = true, .keep_min = 0}, .poison = true});
  bool writing_at_synchronize = false;
  engine.last_kv->on_synchronize = [&] { writing_at_synchronize = lane.machine().phase() == pfx::Phase::writing; };
  EXPECT_EQ(engine.log, (std::vector<std::string>{"forget 0", "fill 0 32"}));  // a new state is given up, poisoned

  const std::vector<token> first = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  engine.log.clear();
  const pfx::driver::Response one = lane.serve(first, 3);
  EXPECT_EQ(engine.log, (std::vector<std::string>{"prefill 0 4", "prefill 4 8", "prefill 8 10", "decode 10 10",
                                                  "decode 11 11", "synchronize"}));
  EXPECT_EQ(one.generated, (std::vector<token>{10, 11, 12}));  // row r answers (r + 1) % 16
  EXPECT_TRUE(writing_at_synchronize) << "the record was published before the device had finished";
  EXPECT_EQ(lane.machine().phase(), pfx::Phase::idle);

  // The next turn extends the answer: it reuses 8 rows, gives up rows 8..11 (poisoned before the
  // engine runs), and prefills from 8.
  std::vector<token> second = first;
  second.insert(second.end(), {10, 11, 12, 5, 5});
  engine.log.clear();
  const pfx::driver::Response two = lane.serve(second, 1);
  EXPECT_EQ(two.decision.offset, 8U);  // canonical_end 10, rounded down to the grid of 4
  EXPECT_EQ(engine.log,
            (std::vector<std::string>{"forget 8", "fill 8 12", "prefill 8 12", "prefill 12 15", "synchronize"}));
}

}  // namespace
