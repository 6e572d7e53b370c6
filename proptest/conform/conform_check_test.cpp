// The conformance checker (pfx::conform::check, docs/conform.md) on engines whose answer is known:
// the shipped ones (host reference, blocked attention: exact exactly on multiples of their chunk;
// non-deterministic, drifting: flagged as such), and engines made here to catch the checker's own
// mistakes (one whose rows depend on the chunk's start while its logits do not, so that a checker
// comparing only logits fails; one that reads a row past its chunk, deterministic yet never exact;
// one whose rows are each its token and position, exact on every grid, and which, given a step,
// computes a one-token prefill step otherwise: then exact on grid 1 only under the rule's prefill step).

#include "support/requirement.hpp"

#include <pfx/conform/check.hpp>
#include <pfx/driver/generation.hpp>
#include <pfx/driver/host_kv_state.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/engines/blocked_attention_engine.hpp>
#include <pfx/engines/dcp_reference_engine.hpp>
#include <pfx/engines/drifting_engine.hpp>
#include <pfx/engines/host_reference_engine.hpp>
#include <pfx/engines/nondeterministic_engine.hpp>
#include <pfx/engines/wrapped_engine.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <stdexcept>
#include <utility>
#include <vector>

namespace {

using pfx::token;
using pfx::conform::Budget;
using pfx::conform::CheckOptions;
using pfx::conform::Report;
using pfx::conform::Verdict;
using pfx::driver::HostKvState;
using pfx::driver::KvState;
using pfx::driver::Plane;
using pfx::engines::ReferenceModelShape;

Budget quick(std::uint64_t seed = 1) {
  Budget budget = Budget::named("quick");
  budget.seed = seed;
  return budget;
}

Report check(pfx::driver::Engine& engine, std::optional<std::size_t> rule_chunk = std::nullopt,
             const Budget& budget = quick()) {
  return pfx::conform::check(engine, CheckOptions{.budget = budget, .rule_chunk = rule_chunk, .engine_name = "test",
                                                  .progress = {}});
}

/// Exact on grid g exactly when g is a multiple of `chunk`, every candidate compared.
void expect_exact_on_multiples_of(const Report& report, std::size_t chunk) {
  EXPECT_EQ(report.cold_disagreement, std::nullopt);
  for (const pfx::conform::GridResult& g : report.grids) {
    EXPECT_GT(g.resumes, 0U) << "grid " << g.grid;
    EXPECT_EQ(g.exact(), g.grid % chunk == 0) << "grid " << g.grid << " of an engine whose chunk is " << chunk;
  }
  EXPECT_EQ(report.recommended, chunk);
}

ReferenceModelShape model(std::size_t chunk) {
  return {.vocab = 32, .width = 8, .hidden = 16, .layers = 2, .chunk = chunk, .seed = 11};
}

TEST(Conform, TheReferenceEngineIsExactOnMultiplesOfItsChunkAndNowhereElse) {
  pfx::test::verifies("CONF-1 THM-1");
  for (std::size_t chunk = 1; chunk <= 12; ++chunk) {
    pfx::engines::HostReferenceEngine engine(model(chunk));
    const Report report = check(engine);
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    expect_exact_on_multiples_of(report, chunk);
    EXPECT_EQ(report.verdict, Verdict::safe);
    EXPECT_EQ(pfx::conform::exit_status(report.verdict), 0);
  }
}

// The batching finding, for an engine that serves requests together: each prompt's answer alone and
// beside kBeside others, compared bit for bit. A server that answers each prompt from its own tokens
// is independent; one whose answer moves with what shares its batch is caught at the first prompt,
// with the prompt and its neighbours; without serve_together the report has no finding at all.
TEST(Conform, TheBatchingFindingComparesEachAnswerAloneWithTheSameAnswerBesideOthers) {
  pfx::test::verifies("CONF-1");
  pfx::engines::HostReferenceEngine engine(model(4));
  std::size_t calls = 0;
  std::vector<std::size_t> sizes;
  // Each prompt's answer: its tokens as floats, plus `drift` times the number of prompts beside it.
  const auto server = [&](float drift) {
    return [&calls, &sizes, drift](const std::vector<std::vector<token>>& prompts) {
      ++calls;
      sizes.push_back(prompts.size());
      std::vector<std::vector<float>> answers;
      answers.reserve(prompts.size());
      for (const std::vector<token>& prompt : prompts) {
        std::vector<float> answer;
        answer.reserve(prompt.size());
        for (const token t : prompt) answer.push_back(static_cast<float>(t) + drift * static_cast<float>(prompts.size() - 1));
        answers.push_back(answer);
      }
      return answers;
    };
  };
  CheckOptions options{.budget = quick(), .rule_chunk = std::nullopt, .engine_name = "test", .progress = {}};
  EXPECT_EQ(pfx::conform::check(engine, options).batching, std::nullopt);

  options.serve_together = server(0.0f);
  const Report independent = pfx::conform::check(engine, options);
  ASSERT_TRUE(independent.batching.has_value());
  EXPECT_TRUE(independent.batching->independent());
  EXPECT_EQ(independent.batching->batches, options.budget.prompts);
  EXPECT_EQ(calls, 2 * options.budget.prompts);  // alone, then beside others, for each prompt
  for (std::size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(sizes[i], i % 2 == 0 ? 1U : 1 + pfx::conform::kBeside);
  EXPECT_NE(pfx::conform::to_text(independent).find("every answer equalled the request served alone"), std::string::npos);
  EXPECT_EQ(independent.verdict, Verdict::safe);

  options.serve_together = server(0.5f);
  const Report dependent = pfx::conform::check(engine, options);
  ASSERT_TRUE(dependent.batching.has_value() && dependent.batching->mismatch.has_value());
  EXPECT_FALSE(dependent.batching->independent());
  EXPECT_EQ(dependent.batching->batches, 1U);  // the first difference stops it
  EXPECT_EQ(dependent.batching->mismatch->prompt_number, 0U);
  EXPECT_EQ(dependent.batching->mismatch->beside.size(), pfx::conform::kBeside);
  EXPECT_EQ(dependent.verdict, Verdict::safe);  // the finding leaves the verdict, for a request served alone
  const std::string text = pfx::conform::to_text(dependent);
  EXPECT_NE(text.find("a request's answer DEPENDS on what is batched beside it"), std::string::npos) << text;
  EXPECT_NE(text.find("the verdict holds for a request served alone"), std::string::npos) << text;
}

TEST(Conform, TheBlockedAttentionEngineIsExactOnMultiplesOfItsChunkAndNowhereElse) {
  pfx::test::verifies("CONF-1");
  for (const std::size_t chunk : {2U, 3U, 4U, 6U, 8U}) {
    pfx::engines::BlockedAttentionEngine engine(model(chunk));
    const Report report = check(engine);
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    expect_exact_on_multiples_of(report, chunk);
  }
}

TEST(Conform, TheDcpEngineIsExactOnMultiplesOfItsChunkWhateverItsLayout) {
  pfx::test::verifies("CONF-1 SHARD-5");
  // Its grid is the chunk's, not ranks x interleave's: a layout whose cycle is off the chunk grid
  // (2 x 1, 4 x 4 against chunks 3 and 8) is resumed there too, and not exactly.
  for (const std::size_t chunk : {3U, 8U}) {
    for (const pfx::driver::ShardLayout layout : {pfx::driver::ShardLayout{2, 1}, pfx::driver::ShardLayout{4, 4}}) {
      pfx::engines::DcpReferenceEngine engine(model(chunk), layout);
      const Report report = check(engine);
      SCOPED_TRACE("chunk " + std::to_string(chunk) + ", " + std::to_string(layout.ranks) + " ranks, interleave " +
                   std::to_string(layout.interleave));
      expect_exact_on_multiples_of(report, chunk);
      EXPECT_EQ(report.verdict, Verdict::safe);
    }
  }
}

// The rule chunk is safe exactly when it is a multiple of the engine's grid; when it is not, the
// verdict names the grid to use, and the grid of the rule chunk itself was tried.
PFX_PROPERTY(Conform, TheRuleChunkIsSafeExactlyOnTheEnginesGrid, "CONF-1", ()) {
  const std::size_t chunk = *rc::gen::inRange<std::size_t>(1, 9);
  const std::size_t rule_chunk = *rc::gen::inRange<std::size_t>(1, 25);
  pfx::engines::HostReferenceEngine engine(model(chunk));
  const Report report = check(engine, rule_chunk);
  RC_ASSERT(report.find(rule_chunk) != nullptr);
  RC_ASSERT(report.recommended == std::optional<std::size_t>(chunk));
  RC_ASSERT(report.verdict == (rule_chunk % chunk == 0 ? Verdict::safe : Verdict::unsafe));
  RC_ASSERT(pfx::conform::exit_status(report.verdict) == (rule_chunk % chunk == 0 ? 0 : 1));
}

// The check judges the chunk a lane would use: with no rule chunk given, the engine's, as the lane
// configures its machine (both read pfx::driver::resolved_rule_chunk), so a verdict of safe is about
// the chunk the lane then serves on.
PFX_PROPERTY(Conform, TheRuleChunkCheckedIsTheOneALaneConfiguresItsMachineWith, "CONF-1 THM-1", ()) {
  const std::size_t chunk = *rc::gen::inRange<std::size_t>(1, 9);
  std::optional<std::size_t> rule_chunk;
  if (*rc::gen::arbitrary<bool>()) rule_chunk = *rc::gen::inRange<std::size_t>(1, 25);
  pfx::engines::HostReferenceEngine engine(model(chunk));
  const pfx::driver::Lane lane(engine, {.capacity = 16, .rule_chunk = rule_chunk});
  const std::size_t expected = rule_chunk ? *rule_chunk : chunk;
  RC_ASSERT(pfx::driver::resolved_rule_chunk(rule_chunk, chunk) == expected);
  RC_ASSERT(lane.machine().config().chunk == expected);
  RC_ASSERT(check(engine, rule_chunk).rule_chunk == expected);
}

TEST(Conform, TheNondeterministicEngineIsFlaggedByItsRepeatedColdRuns) {
  pfx::test::verifies("CONF-1");
  pfx::engines::NondeterministicEngine engine(model(4), 7);
  const Report report = check(engine);
  ASSERT_TRUE(report.cold_disagreement.has_value());
  EXPECT_GE(report.cold_disagreement->run, 1U);
  EXPECT_EQ(report.verdict, Verdict::nondeterministic);
  EXPECT_EQ(report.recommended, std::nullopt);
  EXPECT_EQ(pfx::conform::exit_status(report.verdict), 4);
  EXPECT_NE(report.explanation().find("not deterministic"), std::string::npos);
}

TEST(Conform, AnEngineWhoseLogitsDriftWithItsCallsIsNotDeterministic) {
  pfx::test::verifies("CONF-1");
  pfx::engines::HostReferenceEngine inner(model(4));
  pfx::engines::DriftingEngine engine(inner);
  const Report report = check(engine);
  ASSERT_TRUE(report.cold_disagreement.has_value());
  EXPECT_EQ(report.cold_disagreement->difference.where, pfx::conform::Difference::Where::logits);
  EXPECT_EQ(report.verdict, Verdict::nondeterministic);
}

/// Rows depend on where the chunk starts; logits depend only on the last token. A resume off the
/// grid writes other rows, with the same logits: only a checker that compares rows sees it.
class LogitsBlindEngine final : public pfx::driver::Engine {
 public:
  explicit LogitsBlindEngine(std::size_t chunk) : chunk_(chunk) {}
  [[nodiscard]] std::size_t chunk() const noexcept override { return chunk_; }
  [[nodiscard]] std::size_t vocab() const noexcept override { return 8; }
  [[nodiscard]] std::unique_ptr<KvState> make_kv_state(std::size_t capacity) const override {
    return std::make_unique<HostKvState>(pfx::driver::KvShape{.capacity = capacity, .layers = 1, .width = 2});
  }
  void prefill(KvState& kv, std::span<const token> tokens, std::size_t position, std::span<float> logits) override {
    auto& rows = dynamic_cast<HostKvState&>(kv);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      rows.row(0, Plane::key, position + i)[0] = static_cast<float>(tokens[i]) + 0.25F * static_cast<float>(i);
      rows.row(0, Plane::key, position + i)[1] = static_cast<float>(position + i);
      rows.row(0, Plane::value, position + i)[0] = static_cast<float>(tokens[i]);
      rows.row(0, Plane::value, position + i)[1] = 0;
    }
    for (std::size_t j = 0; j < logits.size(); ++j) logits[j] = static_cast<float>(j) * static_cast<float>(tokens.back());
  }
  void decode(KvState& kv, token next, std::size_t position, std::span<float> logits) override {
    prefill(kv, std::span(&next, 1), position, logits);
  }

 private:
  std::size_t chunk_;
};

/// An engine whose decode step is a one-token prefill (as an engine whose prefill computes each token as
/// decode does: vLLM under pfx's plugin, llama.cpp's reference paths), over a reference engine of chunk
/// 1: a row decode wrote is then the row a cold prefill of the same tokens writes.
class DecodeAsPrefillEngine final : public pfx::engines::WrappedEngine {
 public:
  using WrappedEngine::WrappedEngine;
  void prefill(KvState& kv, std::span<const token> tokens, std::size_t position, std::span<float> logits) override {
    inner_.prefill(kv, tokens, position, logits);
  }
  void decode(KvState& kv, token next, std::size_t position, std::span<float> logits) override {
    inner_.prefill(kv, std::span(&next, 1), position, logits);
  }
};

// The decode rows finding on an engine that writes a decode row as a prefill does: every row decode
// wrote compared and equal, every rescored step equal, kDecodeResumes resumes a prompt, each reaching
// into rows decode wrote, all equal to their cold runs. The verdict is the check's own.
TEST(Conform, RowsDecodeWroteAsAPrefillDoesAreFoundReusable) {
  pfx::test::verifies("CONF-1 INV-2");
  pfx::engines::HostReferenceEngine inner(model(1));
  DecodeAsPrefillEngine engine(inner);
  CheckOptions options{.budget = quick(), .rule_chunk = std::nullopt, .engine_name = "test", .progress = {}};
  EXPECT_EQ(pfx::conform::check(engine, options).decode_rows, std::nullopt);  // only when asked
  options.decode_rows = true;
  const Report report = pfx::conform::check(engine, options);
  ASSERT_TRUE(report.decode_rows.has_value());
  const pfx::conform::DecodeRows& d = *report.decode_rows;
  EXPECT_TRUE(d.reusable());
  EXPECT_EQ(d.resumes, pfx::conform::kDecodePrompts * pfx::conform::kDecodeResumes);
  EXPECT_EQ(d.alone, d.resumes);
  EXPECT_EQ(d.rescored, pfx::conform::kDecodePrompts * pfx::conform::kDecodeRescored);
  EXPECT_EQ(d.rescoring_differs, 0U);
  EXPECT_EQ(d.kv_blocks, pfx::conform::kDecodePrompts * pfx::conform::decode_steps(1));
  EXPECT_EQ(d.kv_blocks_differ, 0U);
  EXPECT_EQ(report.verdict, Verdict::safe);
  EXPECT_NE(pfx::conform::to_text(report).find("decode rows: reusable as measured (200 resumes"), std::string::npos)
      << pfx::conform::to_text(report);
}

// The reference engine's decode reduces attention in one online pass, its prefill in two merged parts:
// its decode rows differ from a prefill's (from layer 2 up), and so do the logits decode computes. The
// finding says so, names the first resume that differs and stops after its prompt; the verdict on
// resumes of prefill rows stays safe (INV-2: the rule never reuses them).
TEST(Conform, RowsDecodeWroteOtherwiseThanAPrefillAreFoundAndNamed) {
  pfx::test::verifies("CONF-1 INV-2");
  for (const std::size_t chunk : {1U, 4U}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    pfx::engines::HostReferenceEngine engine(model(chunk));
    CheckOptions options{.budget = quick(), .rule_chunk = std::nullopt, .engine_name = "test", .progress = {}};
    options.decode_rows = true;
    const Report report = pfx::conform::check(engine, options);
    ASSERT_TRUE(report.decode_rows.has_value());
    const pfx::conform::DecodeRows& d = *report.decode_rows;
    EXPECT_FALSE(d.reusable());
    ASSERT_TRUE(d.mismatch.has_value());
    EXPECT_GT(d.mismatch->offset, d.canonical_end);  // the resume took rows decode wrote
    EXPECT_EQ(d.mismatch->prompt_number + 1, d.kv_blocks / pfx::conform::decode_steps(chunk));  // stopped there
    EXPECT_GT(d.kv_blocks_differ, 0U);
    EXPECT_GT(d.rescoring_differs, 0U);
    EXPECT_EQ(report.verdict, Verdict::safe);
    EXPECT_NE(pfx::conform::to_text(report).find("decode rows: DIFFER at resume"), std::string::npos);
  }
}

TEST(Conform, RowsThatDifferAreCaughtWhenTheLogitsAgree) {
  pfx::test::verifies("CONF-1");
  for (const std::size_t chunk : {2U, 4U, 5U}) {
    LogitsBlindEngine engine(chunk);
    const Report report = check(engine);
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    expect_exact_on_multiples_of(report, chunk);
    const pfx::conform::GridResult* one = report.find(1);
    ASSERT_NE(one, nullptr);
    ASSERT_TRUE(one->mismatch.has_value());
    EXPECT_EQ(one->mismatch->difference.where, pfx::conform::Difference::Where::row);
  }
}

/// Deterministic, but each chunk also reads the row just past it, which a cold run finds unwritten and
/// a resume finds written by what the state held before: no grid can be exact.
class StaleReadingEngine final : public pfx::driver::Engine {
 public:
  [[nodiscard]] std::size_t chunk() const noexcept override { return 4; }
  [[nodiscard]] std::size_t vocab() const noexcept override { return 8; }
  [[nodiscard]] std::unique_ptr<KvState> make_kv_state(std::size_t capacity) const override {
    return std::make_unique<HostKvState>(pfx::driver::KvShape{.capacity = capacity, .layers = 1, .width = 1});
  }
  void prefill(KvState& kv, std::span<const token> tokens, std::size_t position, std::span<float> logits) override {
    auto& rows = dynamic_cast<HostKvState&>(kv);
    const std::size_t past = position + tokens.size();
    const float stale = past < kv.shape().capacity ? *rows.row(0, Plane::key, past) : 0.0F;
    const float read = std::isfinite(stale) ? stale : 0.0F;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      *rows.row(0, Plane::key, position + i) = static_cast<float>(tokens[i]) + read;
      *rows.row(0, Plane::value, position + i) = static_cast<float>(tokens[i]);
    }
    for (std::size_t j = 0; j < logits.size(); ++j) logits[j] = *rows.row(0, Plane::key, past - 1);
  }
  void decode(KvState& kv, token next, std::size_t position, std::span<float> logits) override {
    prefill(kv, std::span(&next, 1), position, logits);
  }
};

TEST(Conform, AnEngineThatReadsPastItsChunkHasNoExactGridThoughItIsDeterministic) {
  pfx::test::verifies("CONF-1");
  StaleReadingEngine engine;
  const Report report = check(engine);
  EXPECT_EQ(report.cold_disagreement, std::nullopt);
  for (const pfx::conform::GridResult& g : report.grids) EXPECT_FALSE(g.exact()) << "grid " << g.grid;
  EXPECT_EQ(report.verdict, Verdict::no_exact_grid);
  EXPECT_EQ(report.recommended, std::nullopt);
  EXPECT_EQ(pfx::conform::exit_status(report.verdict), 5);
  EXPECT_NE(report.explanation().find("something other than"), std::string::npos);
}

// The mismatch a report names is real: the held run, then the resume from the offset, on a fresh
// state, differs from a cold run at the row it names, with the values it names.
TEST(Conform, TheMismatchAReportNamesIsReproduced) {
  pfx::test::verifies("CONF-1");
  pfx::engines::HostReferenceEngine engine(model(8));
  const Report report = check(engine);
  for (const std::size_t grid : {1U, 2U, 4U}) {
    const pfx::conform::GridResult* g = report.find(grid);
    ASSERT_NE(g, nullptr);
    ASSERT_TRUE(g->mismatch.has_value()) << "grid " << grid;
    const pfx::conform::Mismatch& m = *g->mismatch;
    EXPECT_EQ(m.offset % grid, 0U);
    ASSERT_LT(m.offset, m.prompt.size());
    ASSERT_TRUE(std::equal(m.prompt.begin(), m.prompt.begin() + static_cast<std::ptrdiff_t>(m.offset), m.held.begin()));
    const std::size_t capacity = m.prompt.size() + m.held.size();
    std::vector<float> logits(engine.vocab()), cold_logits(engine.vocab());
    const auto kv = engine.make_kv_state(capacity);
    pfx::driver::prefill_on_grid(engine, *kv, m.held, 0, logits);
    pfx::driver::prefill_on_grid(engine, *kv, m.prompt, m.offset, logits);
    const auto cold = engine.make_kv_state(capacity);
    pfx::driver::prefill_on_grid(engine, *cold, m.prompt, 0, cold_logits);
    const pfx::conform::Difference& d = m.difference;
    if (d.where == pfx::conform::Difference::Where::logits) {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(logits[d.index]), std::bit_cast<std::uint32_t>(d.got));
      EXPECT_EQ(std::bit_cast<std::uint32_t>(cold_logits[d.index]), std::bit_cast<std::uint32_t>(d.expected));
      EXPECT_EQ(kv->copy_rows(0, m.prompt.size()), cold->copy_rows(0, m.prompt.size()));
      continue;
    }
    // Every row before the one named agrees; the one named differs as named.
    EXPECT_EQ(kv->copy_rows(0, d.row), cold->copy_rows(0, d.row));
    const auto& got = dynamic_cast<const HostKvState&>(*kv);
    const auto& expected = dynamic_cast<const HostKvState&>(*cold);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(got.row(d.layer, d.plane, d.row)[d.index]), std::bit_cast<std::uint32_t>(d.got));
    EXPECT_EQ(std::bit_cast<std::uint32_t>(expected.row(d.layer, d.plane, d.row)[d.index]),
              std::bit_cast<std::uint32_t>(d.expected));
    EXPECT_NE(std::bit_cast<std::uint32_t>(d.got), std::bit_cast<std::uint32_t>(d.expected));
  }
}

TEST(Conform, TheCandidateGridsAndLengthsCoverEveryGridAroundItsMultiples) {
  pfx::test::verifies("CONF-1");
  const Budget budget{.prompts = 1, .max_grid = 16, .exhaustive_up_to = 8, .sampled_offsets = 2, .cold_runs = 2, .seed = 1};
  EXPECT_EQ(pfx::conform::candidate_grids(budget, 6, 12), (std::vector<std::size_t>{1, 2, 4, 6, 8, 12, 16}));
  EXPECT_EQ(pfx::conform::candidate_grids(budget, 1, 1), (std::vector<std::size_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(pfx::conform::prompt_lengths({1, 4}), (std::vector<std::size_t>{2, 3, 4, 5, 7, 9, 13}));
  // Long prompts are resumed at a sample of offsets; every grid is still resumed, the first and last
  // multiple included.
  pfx::engines::HostReferenceEngine engine(model(4));
  const Report report = check(engine, std::nullopt, budget);
  for (const pfx::conform::GridResult& g : report.grids) EXPECT_GT(g.resumes, 0U) << "grid " << g.grid;
  EXPECT_EQ(report.recommended, 4U);
  EXPECT_EQ(report.prompts, report.lengths.size());
  EXPECT_EQ(report.cold_runs, 2 * report.prompts);
}

TEST(Conform, ABadBudgetOrChunkIsRefusedBeforeAnythingRuns) {
  pfx::test::verifies("CONF-1");
  pfx::engines::HostReferenceEngine engine(model(4));
  Budget one_run = quick();
  one_run.cold_runs = 1;
  EXPECT_THROW((void)check(engine, std::nullopt, one_run), std::invalid_argument);
  Budget no_prompts = quick();
  no_prompts.prompts = 0;
  EXPECT_THROW((void)check(engine, std::nullopt, no_prompts), std::invalid_argument);
  EXPECT_THROW((void)check(engine, std::size_t{0}), std::invalid_argument);
  EXPECT_THROW((void)Budget::named("huge"), std::invalid_argument);
  EXPECT_EQ(Budget::named("default"), Budget{});
}

/// Each row a function of its token and position only: exact on every grid, whatever its chunk. With
/// a step, a stand-in for an engine that computes a prefill step of one token otherwise than a longer
/// one (INV-12; llama.cpp with flash attention off, vLLM): each call is split into steps of `step`
/// tokens from its start, and when its last step is one token alone its logits come out 0.5 higher.
/// The rows stay what they are, so that what differs is the prefill's last step, the one INV-12
/// speaks of: with `step` dividing the chunk, a resume's last call ends alone exactly when a prefill
/// of the prompt's last n - k tokens would, so only a resume the rule under prefill_step = `step`
/// never makes differs from its cold run.
class RowLocalEngine final : public pfx::driver::Engine {
 public:
  explicit RowLocalEngine(std::size_t chunk = 4, std::size_t step = 0) : chunk_(chunk), step_(step) {}
  [[nodiscard]] std::size_t chunk() const noexcept override { return chunk_; }
  [[nodiscard]] std::size_t vocab() const noexcept override { return 8; }
  [[nodiscard]] std::unique_ptr<KvState> make_kv_state(std::size_t capacity) const override {
    return std::make_unique<HostKvState>(pfx::driver::KvShape{.capacity = capacity, .layers = 1, .width = 1});
  }
  void prefill(KvState& kv, std::span<const token> tokens, std::size_t position, std::span<float> logits) override {
    auto& rows = dynamic_cast<HostKvState&>(kv);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      *rows.row(0, Plane::key, position + i) = static_cast<float>(tokens[i]) + static_cast<float>(position + i);
      *rows.row(0, Plane::value, position + i) = static_cast<float>(tokens[i]);
    }
    const float alone = step_ > 0 && (tokens.size() - 1) % step_ == 0 ? 0.5F : 0.0F;  // the one-token step's kernel
    for (std::size_t j = 0; j < logits.size(); ++j) logits[j] = static_cast<float>(tokens.back()) + alone;
  }
  void decode(KvState& kv, token next, std::size_t position, std::span<float> logits) override {
    prefill(kv, std::span(&next, 1), position, logits);
  }

 private:
  std::size_t chunk_;
  std::size_t step_;
};

// A grid below the engine's chunk can be exact as measured; the report says THM-1 does not cover it.
TEST(Conform, AnExactGridOffTheEnginesChunkIsRecommendedAsMeasuredOnly) {
  pfx::test::verifies("CONF-1");
  RowLocalEngine engine;
  const Report report = check(engine);
  for (const pfx::conform::GridResult& g : report.grids) EXPECT_TRUE(g.exact()) << "grid " << g.grid;
  EXPECT_EQ(report.recommended, 1U);
  EXPECT_EQ(report.verdict, Verdict::safe);
  EXPECT_NE(report.explanation().find("THM-1 does not cover it"), std::string::npos) << report.explanation();
  pfx::engines::HostReferenceEngine reference(model(4));
  EXPECT_EQ(check(reference).explanation().find("THM-1 does not cover it"), std::string::npos);
}

TEST(Conform, TheTextReportNamesTheVerdictAndTheGridToUse) {
  pfx::test::verifies("CONF-1");
  pfx::engines::HostReferenceEngine engine(model(4));
  const std::string text = pfx::conform::to_text(check(engine, std::size_t{2}));
  EXPECT_NE(text.find("grid 2 (rule chunk): DIFFERS"), std::string::npos) << text;
  EXPECT_NE(text.find("grid 4 (prefill chunk): exact"), std::string::npos) << text;
  EXPECT_NE(text.find("recommended rule chunk: 4"), std::string::npos) << text;
  EXPECT_NE(text.find("verdict: unsafe"), std::string::npos) << text;
  EXPECT_NE(text.find("Configure the rule's chunk to 4"), std::string::npos) << text;
}

// A check through what an engine serves (vLLM's, pfx.integrations.vllm.conform) names a generated
// token or its logprob, and may add the decode rows' finding; a report without one (every report of
// pfx::conform::check) prints and writes exactly what it did before.
TEST(Conform, AReportOfWhatAnEngineServedNamesTheStepAndTheDecodeRowsFinding) {
  pfx::test::verifies("VLLM-4");
  pfx::engines::HostReferenceEngine engine(model(4));
  Report report = check(engine);
  const std::string text = pfx::conform::to_text(report);
  const std::string json = pfx::conform::to_json(report);
  EXPECT_EQ(text.find("decode rows"), std::string::npos) << text;
  EXPECT_EQ(json.find("decode_rows"), std::string::npos) << json;
  using pfx::conform::Difference;
  const Difference generated{.where = Difference::Where::generated, .index = 2, .got = 17, .expected = 42};
  EXPECT_EQ(generated.describe(), "generated token 2: 17 vs 42");
  const Difference logprob{.where = Difference::Where::logprob, .index = 0, .got = -1.0F, .expected = -0.5F};
  EXPECT_EQ(logprob.describe(), "logprob of generated token 0: -1 (0xbf800000) vs -0.5 (0xbf000000)");
  const std::size_t comparisons = report.comparisons();
  report.decode_rows = pfx::conform::DecodeRows{
      .resumes = 2,
      .mismatch = pfx::conform::Mismatch{.prompt_number = 1, .prompt = {1, 2, 3, 4, 5}, .held = {1, 2, 3, 4},
                                         .offset = 4, .difference = generated},
      .canonical_end = 3};
  EXPECT_EQ(report.comparisons(), comparisons + 2);
  EXPECT_NE(pfx::conform::to_text(report).find("decode rows: DIFFER at resume 2: prompt 1 (5 tokens), offset 4, after a "
                                                "run of 4 held tokens (rows from 3 on written by decode): generated "
                                                "token 2: 17 vs 42; pfx's rule never reuses them\n"),
            std::string::npos)
      << pfx::conform::to_text(report);
  EXPECT_NE(pfx::conform::to_json(report).find("\"decode_rows\":{\"resumes\":2,\"reusable\":false,\"mismatch\":"),
            std::string::npos);
  EXPECT_NE(pfx::conform::to_json(report).find("\"where\":\"generated\",\"step\":2,\"got\":17.0"), std::string::npos)
      << pfx::conform::to_json(report);
  report.decode_rows = pfx::conform::DecodeRows{.resumes = 3, .mismatch = std::nullopt, .canonical_end = 0};
  EXPECT_NE(pfx::conform::to_text(report).find("decode rows: reusable as measured (3 resumes from rows decode wrote "
                                                "equalled their cold runs)\n"),
            std::string::npos);
  // How the resumes were served, where any was served beside another request.
  report.decode_rows = pfx::conform::DecodeRows{.resumes = 10, .mismatch = std::nullopt, .canonical_end = 0,
                                                .alone = 3, .batched = 5, .joining = 2,
                                                .batch_sizes = {2, 3}};
  EXPECT_NE(pfx::conform::to_text(report).find("(10 resumes from rows decode wrote equalled their cold runs; served 3 "
                                                "alone, 5 in batches of 2 to 3, 2 joining another mid-decode)\n"),
            std::string::npos)
      << pfx::conform::to_text(report);
  EXPECT_NE(pfx::conform::to_json(report).find("\"alone\":3,\"batched\":5,\"joining\":2,\"batch_sizes\":[2,3]"),
            std::string::npos)
      << pfx::conform::to_json(report);
  // Decode's logprobs against a prefill's rescoring: equal, counted; one differing makes the rows not reusable.
  report.decode_rows->rescored = 40;
  EXPECT_NE(pfx::conform::to_text(report).find("2 joining another mid-decode; 40 decode logprobs equal to a prefill's "
                                               "rescoring)\n"),
            std::string::npos)
      << pfx::conform::to_text(report);
  EXPECT_NE(pfx::conform::to_json(report).find("\"rescored\":40,\"rescoring_differs\":0"), std::string::npos);
  // The K and V blocks decode wrote into against a cold prefill's, byte for byte: equal, counted; one
  // differing makes the rows not reusable, though every answer and logprob equalled.
  report.decode_rows->kv_blocks = 80;
  EXPECT_NE(pfx::conform::to_text(report).find("rescoring; 80 blocks of K and V rows decode wrote byte-equal to a cold "
                                               "prefill's)\n"),
            std::string::npos)
      << pfx::conform::to_text(report);
  EXPECT_NE(pfx::conform::to_json(report).find("\"kv_blocks\":80,\"kv_blocks_differ\":0"), std::string::npos);
  report.decode_rows->kv_blocks_differ = 3;
  EXPECT_FALSE(report.decode_rows->reusable());
  EXPECT_NE(pfx::conform::to_text(report).find("decode rows: DIFFER: 3 of 80 blocks of K and V rows decode wrote "
                                               "differ, byte for byte, from a cold prefill's of the same tokens"),
            std::string::npos)
      << pfx::conform::to_text(report);
  report.decode_rows->kv_blocks_differ = 0;
  report.decode_rows->rescoring_differs = 1;
  EXPECT_FALSE(report.decode_rows->reusable());
  EXPECT_NE(pfx::conform::to_text(report).find("decode rows: DIFFER: 1 of 40 logprobs decode computed differ from a "
                                               "cold prefill's rescoring of the same tokens"),
            std::string::npos)
      << pfx::conform::to_text(report);
  report.decode_rows = pfx::conform::DecodeRows{};
  EXPECT_FALSE(report.decode_rows->reusable());  // nothing compared vouches for nothing
  EXPECT_NE(pfx::conform::to_text(report).find("decode rows: not resumed"), std::string::npos);
}

// Degenerate engines (docs/conform.md, "Premises"): each breaks one premise, and the check says which
// instead of certifying it. Each is otherwise as good as can be: deterministic, and a resume equals
// its cold run on every grid (there is nothing to differ), so that a check without premises would
// call it safe on grid 1.
class DegenerateEngine final : public pfx::driver::Engine {
 public:
  enum class Fault {
    writes_no_rows,
    writes_constant_rows,
    constant_logits,
    nan_logits,
    owned_cache_writes_nothing,
    owned_cache_writes_late,  ///< writes a token's row with the next token's call: the prompt's last row never
  };
  explicit DegenerateEngine(Fault fault) : fault_(fault) {}
  std::size_t chunk() const noexcept override { return 4; }
  std::size_t vocab() const noexcept override { return 16; }
  std::unique_ptr<KvState> make_kv_state(std::size_t capacity) const override {
    if (fault_ == Fault::owned_cache_writes_nothing) return std::make_unique<ZeroCache>(capacity);
    if (fault_ == Fault::owned_cache_writes_late) return std::make_unique<LateCache>(capacity);
    return std::make_unique<HostKvState>(pfx::driver::KvShape{.capacity = capacity, .layers = 1, .width = 2});
  }
  void prefill(KvState& kv, std::span<const token> tokens, std::size_t position, std::span<float> logits) override {
    if (fault_ == Fault::owned_cache_writes_late) {
      dynamic_cast<LateCache&>(kv).write(tokens, position);
    } else if (fault_ != Fault::writes_no_rows && fault_ != Fault::owned_cache_writes_nothing) {
      auto& rows = dynamic_cast<HostKvState&>(kv);
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        const float value = fault_ == Fault::writes_constant_rows ? 1.0F : static_cast<float>(tokens[i]);
        for (const Plane plane : {Plane::key, Plane::value}) {
          rows.row(0, plane, position + i)[0] = value;
          rows.row(0, plane, position + i)[1] = 0.5F;
        }
      }
    }
    for (std::size_t j = 0; j < logits.size(); ++j) {
      logits[j] = fault_ == Fault::constant_logits ? 0.25F
                  : fault_ == Fault::nan_logits    ? std::nanf("")
                                                   : static_cast<float>(j * static_cast<std::size_t>(tokens.back()));
    }
  }
  void decode(KvState& kv, token next, std::size_t position, std::span<float> logits) override {
    prefill(kv, std::span(&next, 1), position, logits);
  }

 private:
  /// A cache the engine owns and never writes: every row reads as zeros.
  class ZeroCache final : public KvState {
   public:
    explicit ZeroCache(std::size_t capacity) : shape_{.capacity = capacity, .layers = 0, .width = 0} {}
    const pfx::driver::KvShape& shape() const noexcept override { return shape_; }
    void forget(std::size_t) override {}
    void synchronize() override {}
    bool readable() const noexcept override { return true; }
    std::vector<std::byte> read_rows(std::size_t from, std::size_t to) const override {
      return std::vector<std::byte>((to - from) * 8);
    }

   private:
    pfx::driver::KvShape shape_;
  };

  /// A cache the engine owns that writes row p only when the token of p + 1 comes (a write deferred to
  /// the next call, and lost at the end): after a prefill, every row holds its token but the prompt's
  /// last, which reads as zeros. Rows of 8 bytes: the token + 1, as a float, then 0.5.
  class LateCache final : public KvState {
   public:
    explicit LateCache(std::size_t capacity) : shape_{.capacity = capacity, .layers = 0, .width = 0}, rows_(capacity) {}
    const pfx::driver::KvShape& shape() const noexcept override { return shape_; }
    void forget(std::size_t from) override { std::fill(rows_.begin() + static_cast<std::ptrdiff_t>(from), rows_.end(), 0.0F); }
    void synchronize() override {}
    bool readable() const noexcept override { return true; }
    std::vector<std::byte> read_rows(std::size_t from, std::size_t to) const override {
      std::vector<std::byte> out;
      for (std::size_t p = from; p < to; ++p) {
        for (const float x : {rows_[p], rows_[p] == 0.0F ? 0.0F : 0.5F}) {
          const auto* bytes = reinterpret_cast<const std::byte*>(&x);
          out.insert(out.end(), bytes, bytes + sizeof x);
        }
      }
      return out;
    }
    /// Writes the row before each of `tokens` (the one before the first with the token the last call held).
    void write(std::span<const token> tokens, std::size_t position) {
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        if (position + i > 0) rows_[position + i - 1] = static_cast<float>((i == 0 ? held_ : tokens[i - 1]) + 1);
      }
      held_ = tokens.back();
    }

   private:
    pfx::driver::KvShape shape_;
    std::vector<float> rows_;
    token held_ = 0;
  };
  Fault fault_;
};

TEST(Conform, ADegenerateEngineIsRefusedNamingThePremiseThatFailed) {
  pfx::test::verifies("CONF-4");
  using Fault = DegenerateEngine::Fault;
  using pfx::conform::Premise;
  const std::vector<std::pair<Fault, Premise>> cases = {
      {Fault::writes_no_rows, Premise::rows_written},
      {Fault::writes_constant_rows, Premise::rows_written},
      {Fault::owned_cache_writes_nothing, Premise::rows_written},
      // Mutant conform-premise-last-row: only the prompt's last row is unwritten, and it is found.
      {Fault::owned_cache_writes_late, Premise::rows_written},
      {Fault::constant_logits, Premise::logits_depend_on_tokens},
      {Fault::nan_logits, Premise::finite_logits},
  };
  for (const auto& [fault, premise] : cases) {
    DegenerateEngine engine(fault);
    const Report report = check(engine);
    SCOPED_TRACE(pfx::conform::to_string(premise));
    ASSERT_TRUE(report.premise_failure.has_value());
    EXPECT_EQ(report.premise_failure->premise, premise) << report.premise_failure->detail;
    if (fault == Fault::owned_cache_writes_late) {  // the one row left unwritten is named
      const std::string row = "row " + std::to_string(report.lengths.back() - 1) + " is the same";
      EXPECT_EQ(report.premise_failure->detail.rfind(row, 0), 0U) << report.premise_failure->detail;
    }
    EXPECT_EQ(report.verdict, Verdict::degenerate);
    EXPECT_EQ(pfx::conform::exit_status(report.verdict), 6);
    EXPECT_EQ(report.recommended, std::nullopt);
    EXPECT_EQ(report.cold_runs, 0U) << "no grid is judged on a degenerate engine";
    for (const pfx::conform::GridResult& g : report.grids) EXPECT_EQ(g.resumes, 0U);
    const std::string text = pfx::conform::to_text(report);
    EXPECT_NE(text.find("verdict: degenerate"), std::string::npos) << text;
    EXPECT_NE(text.find(std::string("premises: FAILED: ") + pfx::conform::to_string(premise)), std::string::npos) << text;
    EXPECT_EQ(text.find("exact grids"), std::string::npos) << text;
  }
  // An engine that computes meets every premise.
  pfx::engines::HostReferenceEngine reference(model(4));
  const Report good = check(reference);
  EXPECT_EQ(good.premise_failure, std::nullopt);
  EXPECT_NE(pfx::conform::to_text(good).find("premises: rows written, finite logits, logits depend on tokens"),
            std::string::npos);
}

/// INV-12's premise as docs/spec.md defines it, written here apart from the core: a prefill of t
/// tokens in steps of s ends with a step of one token alone iff (t - 1) % s == 0, and the rule
/// resumes a prompt of n tokens at k only if that is so for n - k exactly when it is for n.
bool premise_allows(std::size_t n, std::size_t k, std::size_t s) {
  const auto alone = [s](std::size_t t) { return (t - 1) % s == 0; };
  return alone(n - k) == alone(n);
}

// With the rule's prefill step the check resumes only where the rule would, counts every other offset
// as skipped (as many as INV-12's definition says, each one a resume that would have differed or not),
// says why, and finds grid 1 exact; without it, the same engine has no exact grid 1: the skips are
// what make the verdict, never a skip that hides a resume the rule makes.
PFX_PROPERTY(Conform, ThePrefillStepSkipsExactlyTheOffsetsTheRuleNeverResumesAt, "CONF-1", ()) {
  const std::size_t chunk = *rc::gen::inRange<std::size_t>(1, 13);
  std::vector<std::size_t> divisors;
  for (std::size_t s = 1; s <= chunk; ++s) {
    if (chunk % s == 0) divisors.push_back(s);
  }
  const std::size_t step = *rc::gen::elementOf(divisors);
  Budget budget = quick(*rc::gen::arbitrary<std::uint32_t>());
  budget.exhaustive_up_to = 64;  // every offset of every length resumed or skipped: the count is known
  RowLocalEngine engine(chunk, step);
  const Report with = pfx::conform::check(
      engine, CheckOptions{.budget = budget, .rule_chunk = std::nullopt, .prefill_step = step, .engine_name = "test",
                           .progress = {}});
  RC_ASSERT(!with.cold_disagreement);
  for (const pfx::conform::GridResult& g : with.grids) {
    std::size_t skips = 0;
    std::size_t offsets = 0;
    for (const std::size_t n : with.lengths) {
      RC_ASSERT(n <= budget.exhaustive_up_to);
      for (std::size_t k = g.grid; k < n; k += g.grid) {
        offsets += budget.prompts;
        if (!premise_allows(n, k, step)) skips += budget.prompts;
      }
    }
    RC_ASSERT(g.skipped == skips);
    RC_ASSERT(g.resumes == offsets - skips);
    RC_ASSERT(g.mismatch == std::nullopt);
  }
  RC_ASSERT(with.find(1)->exact());
  RC_ASSERT(with.recommended == std::optional<std::size_t>(1));
  RC_ASSERT(with.verdict == Verdict::safe);
  RC_ASSERT(with.skip_reason == (with.skipped() > 0 ? pfx::conform::prefill_step_skip_reason(step) : ""));
  RC_ASSERT((with.skipped() > 0) == (step > 1));  // step 1: every step is one token, cold and resumed
  if (step > 1) {
    const std::string text = pfx::conform::to_text(with);
    RC_ASSERT(text.find("skipped: " + std::to_string(with.skipped()) + " offsets the rule never resumes at: the "
                        "prefill step (" + std::to_string(step) + " tokens)") != std::string::npos);
  }

  const Report without = check(engine, std::nullopt, budget);
  RC_ASSERT(without.skipped() == 0U);
  RC_ASSERT(without.skip_reason.empty());
  RC_ASSERT(without.find(1)->exact() == (step == 1));
  if (step > 1) {
    const pfx::conform::Mismatch& m = *without.find(1)->mismatch;
    RC_ASSERT(!premise_allows(m.prompt.size(), m.offset, step));  // a resume the rule never makes
    RC_ASSERT(m.difference.where == pfx::conform::Difference::Where::logits);
  }
}

TEST(Conform, ResumesAShortPromptAtEveryGridMultipleTheLastIncluded) {
  // Mutant conform-offsets-last-multiple. Every resume of the reference engine on its own grid is
  // exact, so each grid's resumes count every offset: all multiples of g in [g, n - 1] for a short
  // prompt, budget.sampled_offsets for a long one.
  pfx::test::verifies("CONF-1");
  pfx::engines::HostReferenceEngine engine(pfx::engines::ReferenceModelShape{.chunk = 4});
  pfx::conform::CheckOptions options;
  options.budget = pfx::conform::Budget::named("quick");
  const pfx::conform::Report report = pfx::conform::check(engine, options);
  const pfx::conform::Budget& b = options.budget;
  for (const pfx::conform::GridResult& g : report.grids) {
    if (!g.exact()) continue;
    std::size_t expected = 0;
    for (const std::size_t n : report.lengths) {
      const std::size_t count = (n - 1) / g.grid;
      expected += b.prompts * (n <= b.exhaustive_up_to || count <= b.sampled_offsets ? count : b.sampled_offsets);
    }
    EXPECT_EQ(g.resumes, expected) << "grid " << g.grid;
  }
}

}  // namespace
