// What a conformance report says beyond the grids pfx::conform::check judges, for a check through what
// an engine serves (vLLM's, pfx.integrations.vllm.conform, through pfx._native.conform_observed):
// offsets skipped because the rule never resumes there, and whether a request's answer depends on what
// is batched beside it. Neither changes the verdict: a skip compares nothing, so it never makes a grid
// exact, and batching is a finding beside it. A report with neither (every report of
// pfx::conform::check) prints what it printed before.

#include "support/requirement.hpp"

#include <pfx/conform/report.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

using pfx::conform::BatchMismatch;
using pfx::conform::Batching;
using pfx::conform::Difference;
using pfx::conform::GridResult;
using pfx::conform::Mismatch;
using pfx::conform::Report;
using pfx::conform::Verdict;

const std::string reason = "a resume whose last prefill step is one token where the cold run's is not is never made";

const Difference generated{.where = Difference::Where::generated, .index = 2, .got = 17, .expected = 42};

Mismatch mismatch_at(std::size_t offset) {
  return Mismatch{.prompt_number = 1, .prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9}, .held = {1, 2, 3, 4, 5, 6, 7, 8, 0},
                  .offset = offset, .difference = generated};
}

/// A report as a check of what an engine served builds it (no premise failed, cold runs agree), judged.
Report observed(std::vector<GridResult> grids, std::size_t rule_chunk = 4) {
  Report r;
  r.engine = "served";
  r.budget = pfx::conform::Budget::named("quick");
  r.chunk = 4;
  r.rule_chunk = rule_chunk;
  r.vocab = 64;
  r.lengths = {2, 9};
  r.prompts = 2;
  r.cold_runs = 4;
  r.premises_checked = {pfx::conform::Premise::finite_logits, pfx::conform::Premise::logits_depend_on_tokens};
  r.grids = std::move(grids);
  pfx::conform::decide(r);
  return r;
}

/// Candidate grids 1, 2, 4, ... with what a check may have seen on each: resumes, skipped offsets and a
/// mismatch (only after a resume), in any mix, among them grids with only skips.
rc::Gen<std::vector<GridResult>> grid_results() {
  return rc::gen::mapcat(rc::gen::inRange<std::size_t>(1, 6), [](std::size_t count) {
    return rc::gen::container<std::vector<GridResult>>(
        count, rc::gen::apply(
                   [](std::size_t resumes, std::size_t skipped, bool differs) {
                     return GridResult{.grid = 0,
                                       .resumes = resumes,
                                       .skipped = skipped,
                                       .mismatch = differs && resumes > 0 ? std::optional(mismatch_at(4))
                                                                          : std::nullopt};
                   },
                   rc::gen::inRange<std::size_t>(0, 4), rc::gen::inRange<std::size_t>(0, 4),
                   rc::gen::weightedElement<bool>({{1, true}, {2, false}})));
  });
}

/// A report with random grids (numbered 1, 2, 4, ...), its rule chunk one of them or not, its cold runs
/// agreeing or not, judged.
Report random_report() {
  std::vector<GridResult> grids = *grid_results();
  for (std::size_t i = 0; i < grids.size(); ++i) grids[i].grid = std::size_t{1} << i;
  Report r = observed(grids, *rc::gen::element<std::size_t>(1, 2, 4, 8, 16, 32));
  if (*rc::gen::weightedElement<bool>({{1, true}, {4, false}})) {
    r.cold_disagreement = pfx::conform::ColdDisagreement{.prompt_number = 0, .prompt = {1, 2}, .run = 1,
                                                         .difference = generated};
    pfx::conform::decide(r);
  }
  if (r.skipped() > 0) r.skip_reason = reason;  // as a check that skips gives it (conform_observed requires it)
  return r;
}

Report without_skips(Report r) {
  for (GridResult& g : r.grids) g.skipped = 0;
  r.skip_reason.clear();
  return r;
}

// Skips compare nothing: the verdict, the grid recommended, each grid's exactness and the runs compared
// are those of the same report without them, and the explanation changes only by naming the grids
// whose every offset was skipped (not exact, as a grid with no resume never is).
PFX_PROPERTY(ConformReport, SkippedOffsetsNeitherMakeAGridExactNorChangeTheVerdict, "CONF-1 VLLM-4", ()) {
  Report skipping = random_report();
  Report plain = without_skips(skipping);
  pfx::conform::decide(skipping);
  pfx::conform::decide(plain);
  RC_ASSERT(skipping.verdict == plain.verdict);
  RC_ASSERT(skipping.recommended == plain.recommended);
  RC_ASSERT(skipping.comparisons() == plain.comparisons());
  std::vector<std::size_t> only_skipped;
  for (std::size_t i = 0; i < skipping.grids.size(); ++i) {
    const GridResult& g = skipping.grids[i];
    RC_ASSERT(g.exact() == plain.grids[i].exact());
    if (g.resumes == 0) RC_ASSERT(!g.exact());
    if (g.resumes == 0 && g.skipped > 0) only_skipped.push_back(g.grid);
  }
  RC_CLASSIFY(!only_skipped.empty(), "a grid with only skips");
  const std::string text = pfx::conform::to_text(skipping);
  RC_ASSERT((text.find("\nskipped: ") != std::string::npos) == (skipping.skipped() > 0));
  RC_ASSERT(pfx::conform::to_text(plain).find("skip") == std::string::npos);
  const std::string explanation = skipping.explanation();
  const bool judged = skipping.verdict != Verdict::nondeterministic && skipping.verdict != Verdict::degenerate;
  if (only_skipped.empty() || !judged) {
    RC_ASSERT(explanation == plain.explanation());
    return;
  }
  RC_ASSERT(explanation.rfind(plain.explanation(), 0) == 0U);
  std::string grids;
  for (const std::size_t g : only_skipped) grids += (grids.empty() ? "" : ", ") + std::to_string(g);
  const std::string said = only_skipped.size() == 1 ? " Grid " + grids + " is not exact:" : " Grids " + grids + " are not exact:";
  RC_ASSERT(explanation.substr(plain.explanation().size(), said.size()) == said);
}

// Batching is a finding beside the verdict: the verdict and the grid recommended are those of the same
// report without it, each batch counts as a run compared, and the explanation says the verdict holds
// for a request served alone exactly when an answer depended on what was batched beside it and there is
// a verdict on a grid (safe or unsafe).
PFX_PROPERTY(ConformReport, BatchingLeavesTheVerdictAndLimitsItToARequestServedAlone, "CONF-1 VLLM-4", ()) {
  Report batched = random_report();
  const Report alone = batched;
  const std::size_t batches = *rc::gen::inRange<std::size_t>(0, 5);
  const bool depends = batches > 0 && *rc::gen::arbitrary<bool>();
  RC_CLASSIFY(batched.verdict == Verdict::safe || batched.verdict == Verdict::unsafe, "a verdict on a grid");
  batched.batching = Batching{
      .batches = batches,
      .mismatch = depends ? std::optional(BatchMismatch{.prompt_number = 0, .prompt = {3, 4}, .beside = {{5}},
                                                        .difference = generated})
                          : std::nullopt};
  pfx::conform::decide(batched);
  RC_ASSERT(batched.verdict == alone.verdict);
  RC_ASSERT(batched.recommended == alone.recommended);
  RC_ASSERT(batched.comparisons() == alone.comparisons() + batches);
  RC_ASSERT(batched.batching->independent() == (batches > 0 && !depends));
  const bool on_a_grid = alone.verdict == Verdict::safe || alone.verdict == Verdict::unsafe;
  RC_CLASSIFY(depends && on_a_grid, "depends, with a verdict on a grid");
  const std::string said = " A request's answer depends on what is batched beside it";
  if (depends && on_a_grid) {
    RC_ASSERT(batched.explanation().rfind(alone.explanation() + said, 0) == 0U);
    RC_ASSERT(batched.explanation().find("served alone") != std::string::npos);
  } else {
    RC_ASSERT(batched.explanation() == alone.explanation());
  }
  const std::string text = pfx::conform::to_text(batched);
  RC_ASSERT(text.find("\nbatching: ") != std::string::npos);
  RC_ASSERT((text.find("DEPENDS on what is batched beside it") != std::string::npos) == depends);
}

// The report of a check that skipped offsets, as `pfx conform` would print it had it skipped them: each
// grid's line says its skips (a grid with only skips is not exact, and not "not resumed"), one line
// says how many and why, and the explanation names the grid no resume vouches for. JSON: each grid's
// `skipped`, the report's `skip_reason`.
TEST(ConformReport, SkippedOffsetsAreSaidPerGridAndOnceWithTheirReason) {
  pfx::test::verifies("CONF-1 VLLM-4");
  Report report = observed({GridResult{.grid = 4, .resumes = 40, .skipped = 12, .mismatch = std::nullopt},
                            GridResult{.grid = 8, .resumes = 3, .skipped = 1, .mismatch = mismatch_at(8)},
                            GridResult{.grid = 16, .resumes = 0, .skipped = 5, .mismatch = std::nullopt}});
  report.skip_reason = reason;
  EXPECT_EQ(report.verdict, Verdict::safe);
  EXPECT_EQ(report.skipped(), 18U);
  EXPECT_EQ(report.comparisons(), 43U + 2U);  // the resumes and the repeated cold runs; no skip
  EXPECT_EQ(pfx::conform::to_text(report),
            "pfx conform: served, prefill chunk 4, rule chunk 4\n"
            "budget: 2 prompts of 2..9 tokens (2 lengths), 2 cold runs each, grids up to 16, seed 1\n"
            "premises: finite logits, logits depend on tokens\n"
            "cold runs: 4, every repeat identical to the first (deterministic)\n"
            "grid 4 (prefill chunk, rule chunk): exact (40 resumes, 12 offsets skipped)\n"
            "grid 8: DIFFERS at resume 3 (1 offset skipped): prompt 1 (9 tokens), offset 8, after a run of 9 held "
            "tokens: generated token 2: 17 vs 42\n"
            "grid 16: not exact: no resume, 5 offsets skipped (the rule never resumes there)\n"
            "skipped: 18 offsets the rule never resumes at: " + reason + "\n"
            "exact grids: 4\n"
            "recommended rule chunk: 4\n"
            "verdict: safe\n"
            "Rule chunk 4 is safe: every resume on its grid equalled its cold run bit for bit. The smallest exact "
            "grid is 4. Grid 16 is not exact: the rule never resumes at its offsets, so every one was skipped and no "
            "resume on it was compared.\n"
            "time: 0.00 s, 0 tokens prefilled\n"
            "compared: 45 runs with their cold run, bit for bit\n");
  const std::string json = pfx::conform::to_json(report);
  EXPECT_NE(json.find(R"({"grid":4,"resumes":40,"skipped":12,"exact":true})"), std::string::npos) << json;
  EXPECT_NE(json.find(R"({"grid":16,"resumes":0,"skipped":5,"exact":false})"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("skip_reason":")" + reason + "\""), std::string::npos) << json;

  // Only skips on the rule chunk's grid: not exact, so the rule chunk is not safe, and the explanation
  // does not claim a resume on it differed.
  const Report rule_skipped = observed({GridResult{.grid = 4, .resumes = 0, .skipped = 7, .mismatch = std::nullopt},
                                        GridResult{.grid = 8, .resumes = 2, .skipped = 0, .mismatch = std::nullopt}});
  EXPECT_EQ(rule_skipped.verdict, Verdict::unsafe);
  EXPECT_EQ(rule_skipped.recommended, 8U);
  EXPECT_EQ(rule_skipped.explanation(),
            "Rule chunk 4 is UNSAFE: no resume on its grid was compared. Configure the rule's chunk to 8, the "
            "smallest grid on which every resume equalled its cold run bit for bit. Grid 4 is not exact: the rule "
            "never resumes at its offsets, so every one was skipped and no resume on it was compared.");
  const Report all_skipped = observed({GridResult{.grid = 4, .resumes = 0, .skipped = 7, .mismatch = std::nullopt},
                                       GridResult{.grid = 8, .resumes = 0, .skipped = 3, .mismatch = std::nullopt}});
  EXPECT_EQ(all_skipped.verdict, Verdict::no_exact_grid);
  EXPECT_NE(all_skipped.explanation().find(" Grids 4, 8 are not exact: the rule never resumes at their offsets"),
            std::string::npos)
      << all_skipped.explanation();
  EXPECT_EQ(all_skipped.comparisons(), 2U);  // the repeated cold runs alone
}

// A report that skipped nothing says nothing of skipping (`pfx conform`'s text stays as it was), and
// its JSON says 0 per grid and no reason.
TEST(ConformReport, AReportThatSkippedNothingSaysNothingOfSkipping) {
  pfx::test::verifies("CONF-1 CONF-2");
  const Report report = observed({GridResult{.grid = 4, .resumes = 40, .skipped = 0, .mismatch = std::nullopt},
                                  GridResult{.grid = 8, .resumes = 0, .skipped = 0, .mismatch = std::nullopt}});
  const std::string text = pfx::conform::to_text(report);
  EXPECT_EQ(text.find("skip"), std::string::npos) << text;
  EXPECT_EQ(text.find("batching"), std::string::npos) << text;
  EXPECT_NE(text.find("grid 4 (prefill chunk, rule chunk): exact (40 resumes)\ngrid 8: not resumed (no offset on this "
                      "grid)\nexact grids: 4\n"),
            std::string::npos)
      << text;
  const std::string json = pfx::conform::to_json(report);
  EXPECT_NE(json.find(R"("skipped":0,"exact":true})"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("skip_reason":null)"), std::string::npos) << json;
  EXPECT_EQ(json.find("batching"), std::string::npos) << json;
  // A reason with nothing skipped is still said: nothing the caller gave is dropped.
  Report reasoned = report;
  reasoned.skip_reason = reason;
  EXPECT_NE(pfx::conform::to_text(reasoned).find("\nskipped: 0 offsets the rule never resumes at: " + reason + "\n"),
            std::string::npos);
}

// The batching finding in text and JSON: a request whose answer differs beside others names the prompt,
// how many were beside it and the difference; the explanation says the verdict holds for a request
// served alone. Batches whose answers all equalled their requests alone, and none at all, say so.
TEST(ConformReport, ABatchingMismatchIsNamedAndTheVerdictHoldsForARequestServedAlone) {
  pfx::test::verifies("CONF-1 VLLM-4");
  Report report = observed({GridResult{.grid = 4, .resumes = 40, .skipped = 0, .mismatch = std::nullopt}});
  const std::size_t comparisons = report.comparisons();
  report.batching = Batching{.batches = 6,
                             .mismatch = BatchMismatch{.prompt_number = 3, .prompt = {7, 8, 9, 10, 11},
                                                       .beside = {{1, 2}, {3}, {4, 5, 6}}, .difference = generated}};
  pfx::conform::decide(report);
  EXPECT_EQ(report.verdict, Verdict::safe);
  EXPECT_EQ(report.comparisons(), comparisons + 6);
  EXPECT_FALSE(report.batching->independent());
  const std::string text = pfx::conform::to_text(report);
  EXPECT_NE(text.find("\nbatching: 6 batches, a request's answer DEPENDS on what is batched beside it: prompt 3 "
                      "(5 tokens) beside 3 others: generated token 2: 17 vs 42\nexact grids: 4\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(report.explanation(),
            "Rule chunk 4 is safe: every resume on its grid equalled its cold run bit for bit. The smallest exact grid "
            "is 4. A request's answer depends on what is batched beside it (the batching finding): the verdict holds "
            "for a request served alone, not for one batched with others.");
  const std::string json = pfx::conform::to_json(report);
  EXPECT_NE(json.find(R"("batching":{"batches":6,"independent":false,"mismatch":{"prompt_number":3,)"
                      R"("prompt":[7,8,9,10,11],"beside":[[1,2],[3],[4,5,6]],"difference":{"where":"generated",)"
                      R"("step":2,"got":17.0,"expected":42.0,)"),
            std::string::npos)
      << json;

  report.batching = Batching{.batches = 1,
                             .mismatch = BatchMismatch{.prompt_number = 0, .prompt = {7}, .beside = {{1}},
                                                       .difference = generated}};
  EXPECT_NE(pfx::conform::to_text(report).find("batching: 1 batch, a request's answer DEPENDS on what is batched "
                                               "beside it: prompt 0 (1 tokens) beside 1 other: "),
            std::string::npos)
      << pfx::conform::to_text(report);
  report.batching = Batching{.batches = 6, .mismatch = std::nullopt};
  EXPECT_TRUE(report.batching->independent());
  EXPECT_NE(pfx::conform::to_text(report).find("\nbatching: 6 batches, every answer equalled the request served alone\n"),
            std::string::npos);
  EXPECT_EQ(report.explanation().find("served alone"), std::string::npos);
  EXPECT_NE(pfx::conform::to_json(report).find(R"("batching":{"batches":6,"independent":true})"), std::string::npos);
  report.batching = Batching{};
  EXPECT_FALSE(report.batching->independent());  // no batch served vouches for nothing
  EXPECT_NE(pfx::conform::to_text(report).find("\nbatching: not tried (no batch served)\n"), std::string::npos);
}

}  // namespace
