// The cold side of every bit-exactness check (driver::run_cold, what `pfx replay --verify` compares
// with) is cold by construction: it starts at row 0, never reads a row an earlier run wrote, and
// equals a run on a brand-new KV state; an engine that reads a row the run did not write is caught.
// A lane with reuse off is cold on every request of a workload that would reuse.

#include "support/lanes.hpp"
#include "support/requirement.hpp"

#include <pfx/driver/cold_run.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/engines/host_reference_engine.hpp>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace {

using pfx::token;
using pfx::engines::HostReferenceEngine;

/// Records where each engine call of a run starts, so that a test can see a run begin at row 0 and
/// write its rows in order.
class CallRecordingEngine final : public pfx::engines::WrappedEngine {
 public:
  using pfx::engines::WrappedEngine::WrappedEngine;
  void prefill(pfx::driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override {
    calls.push_back({position, tokens.size()});
    inner_.prefill(kv, tokens, position, logits);
  }
  void decode(pfx::driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override {
    calls.push_back({position, 1});
    inner_.decode(kv, next, position, logits);
  }
  struct Call {
    std::size_t position;
    std::size_t rows;
  };
  std::vector<Call> calls;
};

/// Every call starts where the one before it ended, the first at row 0: the run reads only rows it
/// wrote itself (an engine reads rows before its position only, docs/driver.md).
void expect_cold_calls(const std::vector<CallRecordingEngine::Call>& calls, std::size_t chunk, std::size_t prompt) {
  RC_ASSERT(!calls.empty());
  std::size_t next = 0;
  for (const auto& call : calls) {
    RC_ASSERT(call.position == next);
    if (call.position < prompt) RC_ASSERT(call.position % chunk == 0);  // prefill on the engine's grid
    next = call.position + call.rows;
  }
}

PFX_PROPERTY(ColdRun, StartsAtRowZeroReadsOnlyWhatItWroteAndEqualsAFreshState, "THM-1 CLI-1", ()) {
  const pfx::engines::ReferenceModelShape model = *pfx::test::model_shapes();
  HostReferenceEngine inner(model);
  pfx::test::PoisonAuditingEngine audited(inner);  // throws if a call finds a live row at or past it
  CallRecordingEngine engine(audited);
  const std::size_t capacity = 96;
  const auto kv = engine.make_kv_state(capacity);
  const auto token_gen = rc::gen::inRange<token>(0, static_cast<token>(model.vocab));
  // Runs that share prefixes, on one state: each must be as cold as on a new one.
  std::vector<token> prompt = *rc::gen::resize(40, rc::gen::nonEmpty(rc::gen::container<std::vector<token>>(token_gen)));
  const std::size_t runs = *rc::gen::inRange<std::size_t>(2, 5);
  for (std::size_t run = 0; run < runs; ++run) {
    const std::size_t max_new = *rc::gen::inRange<std::size_t>(0, 6);
    engine.calls.clear();
    const pfx::driver::ColdRun cold = pfx::driver::run_cold(engine, *kv, prompt, max_new);
    expect_cold_calls(engine.calls, model.chunk, prompt.size());
    const pfx::test::Cold fresh = pfx::test::cold_run(inner, capacity, prompt, max_new);  // a new state
    RC_ASSERT(pfx::test::same_bits(cold.logits, fresh.logits));
    RC_ASSERT(cold.generated == fresh.generated);
    RC_ASSERT(pfx::test::same_bits(kv->copy_rows(0, pfx::driver::rows_written(prompt.size(), max_new)), fresh.rows));
    // The next prompt extends this one, or keeps a prefix of it: a run that reused would find rows.
    const auto more = *rc::gen::resize(16, rc::gen::container<std::vector<token>>(token_gen));
    prompt.resize(*rc::gen::inRange<std::size_t>(1, prompt.size() + 1));
    prompt.insert(prompt.end(), more.begin(), more.end());
    if (prompt.size() + 6 > capacity) prompt.resize(capacity - 6);
  }
}

TEST(ColdRun, AnEngineThatReadsARowTheRunDidNotWriteIsCaughtEvenAfterAnEarlierRun) {
  pfx::test::verifies("THM-1");
  HostReferenceEngine inner({.vocab = 32, .chunk = 4});
  pfx::test::PeekingEngine engine(inner);
  const auto kv = engine.make_kv_state(64);
  const std::vector<token> long_prompt(40, 3);
  (void)pfx::driver::run_cold(engine, *kv, long_prompt, 2);  // rows 0..40 now hold finite values
  engine.peek = true;  // from now on each prefill chunk also reads the row just past it
  const std::vector<token> short_prompt(10, 5);
  EXPECT_THROW((void)pfx::driver::run_cold(engine, *kv, short_prompt, 0), pfx::driver::StaleRowRead)
      << "rows the earlier run wrote were readable: the cold run is not cold";
}

TEST(ColdRun, ARequestThatDoesNotFitIsRefusedBeforeAnythingIsWritten) {
  pfx::test::verifies("DRV-3");
  HostReferenceEngine engine({.vocab = 32, .chunk = 4});
  const auto kv = engine.make_kv_state(16);
  EXPECT_THROW((void)pfx::driver::run_cold(engine, *kv, std::vector<token>{}, 1), pfx::driver::RequestError);
  EXPECT_THROW((void)pfx::driver::run_cold(engine, *kv, std::vector<token>(10, 1), 7), pfx::driver::RequestError);
  EXPECT_THROW((void)pfx::driver::run_cold(engine, *kv, std::vector<token>(10, 1), SIZE_MAX), pfx::driver::RequestError);
  EXPECT_EQ(pfx::driver::run_cold(engine, *kv, std::vector<token>(10, 1), 6).generated.size(), 6U);
}

PFX_PROPERTY(Lane, WithReuseOffEveryRequestOfAReusingWorkloadIsCold, "INV-6 THM-1", ()) {
  // The same multi-turn traces that a lane with reuse on resumes: with reuse off, each request
  // reports offset 0, prefills its whole prompt from row 0 and finds every row at or past each call
  // poisoned, so it reads nothing an earlier request wrote.
  const pfx::engines::ReferenceModelShape model = *pfx::test::model_shapes();
  HostReferenceEngine inner(model);
  pfx::test::PoisonAuditingEngine audited(inner);
  CallRecordingEngine engine(audited);
  const std::size_t capacity = 160;
  pfx::driver::Lane lane(engine, {.capacity = capacity, .config = {.enabled = false, .keep_min = 0}, .poison = true});
  pfx::test::TraceBuilder trace(model.vocab, capacity, *rc::gen::arbitrary<std::uint64_t>());
  const auto steps = *rc::gen::resize(12, rc::gen::container<std::vector<pfx::test::TraceStep>>(
                                              pfx::test::trace_steps(model.vocab)));
  pfx::Machine reusing;  // what a lane with reuse on would have been granted
  RC_ASSERT(reusing.configure({.enabled = true, .keep_min = 0, .chunk = model.chunk}).accepted());
  std::size_t would_reuse = 0;
  for (const auto& step : steps) {
    if (step.kind == pfx::test::TraceStep::Kind::clear) {
      lane.clear();
      (void)reusing.clear();
      continue;
    }
    const std::vector<token> prompt = trace.prompt(step);
    would_reuse += reusing.query(prompt).decision.offset;
    engine.calls.clear();
    const pfx::driver::Response response = lane.serve(prompt, step.max_new_tokens);
    RC_ASSERT(response.decision.offset == 0u);
    RC_ASSERT(response.prefilled == prompt.size());
    expect_cold_calls(engine.calls, model.chunk, prompt.size());
    std::vector<token> ids = prompt;
    ids.insert(ids.end(), response.generated.begin(), response.generated.end());
    RC_ASSERT(reusing.record(ids, prompt.size()).accepted());
    trace.answered(prompt, response.generated);
  }
  RC_CLASSIFY(would_reuse > 0, "a lane with reuse on would have reused");
}

TEST(ColdRun, ChecksEveryChunksLogitsNotOnlyTheLast) {
  // Mutant driver-cold-run-every-chunk.
  pfx::test::verifies("CLI-1");
  pfx::engines::HostReferenceEngine inner(pfx::engines::ReferenceModelShape{.vocab = 64, .chunk = 4});
  pfx::test::PeekingEngine engine(inner);  // reads the row past its first chunk: NaN, poisoned
  engine.peek = true;
  engine.first_chunk_only = true;  // the later chunks overwrite those logits: only a check of each chunk sees it
  const std::unique_ptr<pfx::driver::KvState> kv = engine.make_kv_state(64);
  const std::vector<pfx::token> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // chunks [0,4), [4,8), [8,10)
  EXPECT_THROW((void)pfx::driver::run_cold(engine, *kv, prompt, 2), pfx::driver::StaleRowRead);
  EXPECT_NO_THROW((void)pfx::driver::run_cold(inner, *kv, prompt, 2));  // the engine alone is sound
}

}  // namespace
