// Failures and stale rows: after any mix of engine failures every later response still equals a
// cold run bit for bit (the record kept only valid rows), and an engine that reads a row the lane gave
// up is caught by the poison.

#include "support/lanes.hpp"
#include "support/requirement.hpp"

#include <pfx/driver/errors.hpp>
#include <pfx/engines/faulty_engine.hpp>
#include <pfx/engines/host_reference_engine.hpp>
#include <pfx/driver/lane.hpp>

#include <gtest/gtest.h>

#include <cmath>

namespace {

using pfx::token;
using pfx::engines::FaultyEngine;
using pfx::engines::HostReferenceEngine;
using pfx::driver::Lane;

constexpr std::size_t capacity = 256;

PFX_PROPERTY(Faults, AfterAnyMixOfFailuresEveryResponseEqualsCold, "DRV-4 THM-1 INV-8 DRV-2", ()) {
  const pfx::engines::ReferenceModelShape shape = *pfx::test::model_shapes();
  const std::size_t keep_min = *rc::gen::element<std::size_t>(0, 1, 5);
  const double rate = *rc::gen::element(0.05, 0.2, 0.5);
  const auto steps = *rc::gen::container<std::vector<pfx::test::TraceStep>>(pfx::test::trace_steps(shape.vocab));
  HostReferenceEngine engine(shape);
  pfx::test::PoisonAuditingEngine audited(engine);  // DRV-2: every call starts on poisoned rows
  FaultyEngine faulty(audited, rate, *rc::gen::arbitrary<std::uint64_t>());
  Lane lane(faulty, {.capacity = capacity, .config = {.enabled = true, .keep_min = keep_min}, .poison = true});
  pfx::test::TraceBuilder trace(shape.vocab, capacity, shape.seed);

  const pfx::test::TraceReplay replay = pfx::test::replay_against_cold(lane, engine, capacity, steps, trace);
  RC_ASSERT(replay.failures == faulty.failures());
  RC_CLASSIFY(replay.served_after_a_failure > 0, "served after a failure");
}

TEST(Poisoning, AnEngineThatReadsARowTheLaneGaveUpIsCaught) {
  pfx::test::verifies("DRV-2 AUDIT-253 INV-8");
  HostReferenceEngine engine({.vocab = 32, .width = 8, .hidden = 16, .layers = 2, .chunk = 4, .seed = 5});
  const std::vector<token> first = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  // Shares 12 tokens with `first`, then diverges: rows 12.. hold the first request's rows, now stale.
  std::vector<token> second(first.begin(), first.begin() + 12);
  second.insert(second.end(), {30, 31, 30, 31});

  for (const bool poison : {true, false}) {
    pfx::test::PeekingEngine peeking(engine);
    Lane lane(peeking, {.capacity = 64, .config = {.enabled = true, .keep_min = 0}, .poison = poison});
    (void)lane.serve(first, 6);  // rows 0..24 written: 20 by prefill, 5 by decode
    ASSERT_EQ(lane.written_end(), 25U);

    peeking.peek = true;  // the second request reuses 12 rows and its first chunk peeks at row 16
    if (!poison) {
      EXPECT_NO_THROW((void)lane.serve(second, 0)) << "without the poison a stale read goes unnoticed";
      continue;
    }
    EXPECT_THROW((void)lane.serve(second, 0), pfx::driver::StaleRowRead);
    EXPECT_EQ(lane.machine().phase(), pfx::Phase::idle);
    EXPECT_EQ(lane.machine().held().ids, std::vector<token>(first.begin(), first.begin() + 12))
        << "the aborted request keeps only the reused prefix";
    // Rows 16..24 were given up and not rewritten (the chunk [12, 16) was): all NaN.
    for (const float x : lane.kv().copy_rows(16, 25)) ASSERT_TRUE(std::isnan(x));
    for (const float x : lane.kv().copy_rows(0, 16)) ASSERT_FALSE(std::isnan(x));
  }
}

// The stale read happens in the first of two chunks; the second chunk's logits replace the first's,
// so only a check after every chunk sees it.
TEST(Poisoning, AStaleReadInAnEarlierChunkIsCaughtToo) {
  pfx::test::verifies("DRV-2");
  HostReferenceEngine engine({.vocab = 32, .width = 8, .hidden = 16, .layers = 2, .chunk = 4, .seed = 5});
  pfx::test::PeekingEngine peeking(engine);
  Lane lane(peeking, {.capacity = 20, .config = {.enabled = true, .keep_min = 0}, .poison = true});
  const std::vector<token> first = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  (void)lane.serve(first, 4);  // rows 0..18 written
  std::vector<token> second(first.begin(), first.begin() + 12);
  second.insert(second.end(), {30, 31, 30, 31, 30, 31, 30, 31});  // 20 tokens: chunks [12, 16), [16, 20)
  peeking.peek = true;  // [12, 16) peeks at row 16 (given up); [16, 20) is last in the state: no peek
  try {
    (void)lane.serve(second, 0);
    ADD_FAILURE() << "a stale read in the first chunk went unnoticed";
  } catch (const pfx::driver::StaleRowRead& e) {
    EXPECT_NE(std::string(e.what()).find("chunk [12, 16)"), std::string::npos) << e.what();
  }
}

TEST(Poisoning, AStaleReadInADecodeStepIsCaught) {
  pfx::test::verifies("DRV-2");
  HostReferenceEngine engine({.vocab = 32, .width = 8, .hidden = 16, .layers = 2, .chunk = 4, .seed = 5});
  pfx::test::PeekingEngine peeking(engine);
  Lane lane(peeking, {.capacity = 64, .config = {.enabled = true, .keep_min = 0}, .poison = true});
  const std::vector<token> first = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  (void)lane.serve(first, 6);  // rows 0..24 written
  std::vector<token> second(first.begin(), first.begin() + 12);
  second.push_back(30);        // offset 12; rows 12..24 given up, row 12 rewritten by the prefill
  peeking.peek_in_decode = true;  // the decode step at row 13 peeks at row 14
  try {
    (void)lane.serve(second, 3);
    ADD_FAILURE() << "a stale read in a decode step went unnoticed";
  } catch (const pfx::driver::StaleRowRead& e) {
    EXPECT_NE(std::string(e.what()).find("decode step at position 13"), std::string::npos) << e.what();
  }
  EXPECT_EQ(lane.machine().held().ids, std::vector<token>(first.begin(), first.begin() + 12));
}

TEST(Poisoning, AFreshKvStateIsPoisonedEverywhere) {
  pfx::test::verifies("DRV-2");
  HostReferenceEngine engine({.vocab = 16, .width = 4, .hidden = 8, .layers = 2, .chunk = 2, .seed = 9});
  const auto kv = engine.make_kv_state(10);
  for (const float x : kv->copy_rows(0, 10)) ASSERT_TRUE(std::isnan(x));
}

}  // namespace
