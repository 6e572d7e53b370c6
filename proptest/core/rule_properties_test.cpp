// The offset rule on random cases built to hit the interesting ones: the machine against the
// independent reference model, and every invariant of the catalogue.

#include <pfx/refinement/bridge.hpp>
#include "support/generators.hpp"
#include "support/requirement.hpp"

#include <pfx/core.hpp>
#include <pfx/spec/catalogue.hpp>
#include <pfx/spec/reference.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace {

using pfx::gen::Case;

/// A machine configured and holding the case's record.
pfx::Machine holding(const Case& k) {
  pfx::Machine m;
  RC_ASSERT(m.configure(pfx::refinement::to_core(k.config)).accepted());
  RC_ASSERT(m.record(k.ids, k.canonical_end).accepted());
  return m;
}

/// The reference state for the same case.
pfx::spec::State model_of(const Case& k) {
  pfx::spec::State s;
  s.config = k.config;
  if (k.config.enabled) {
    s.ids = k.ids;
    s.canonical_end = k.canonical_end;
  }
  return s;
}

/// Whether a prefill of t >= 1 tokens in steps of `step` ends with a step of one token alone
/// (docs/spec.md, INV-12): the steps are [0, step), [step, 2 step), ..., the last one starts at
/// the largest multiple of step below t.
bool alone(std::size_t t, std::size_t step) { return (t - 1) % step == 0; }

/// Whether a resume leaving t >= 1 tokens ends with a step of one token alone: as alone(t), but an
/// engine that pads an admission leaving one token (`padded`) computes that step with more rows.
bool alone_resumed(std::size_t t, std::size_t step, bool padded) { return alone(t, step) && !(padded && t == 1); }

/// The prefill step's bound by brute force: from `aligned` down, chunk by chunk, the first offset
/// whose resumed prefill ends alone exactly when the cold one does; nullopt when none is found in
/// `most` chunks (the brute force is then left to the window it could search).
std::optional<std::size_t> step_search(std::size_t n, std::size_t aligned, std::size_t chunk, std::size_t step,
                                       bool padded, std::size_t most = SIZE_MAX) {
  if (step == 0) return aligned;
  std::size_t k = aligned;
  for (std::size_t tried = 0; tried < most; ++tried) {
    if (k == 0 || alone_resumed(n - k, step, padded) == alone(n, step)) return k;
    k -= chunk;
  }
  return std::nullopt;
}

/// The brute force for prompts a test can hold (the search is at most len(prompt) chunks).
std::size_t largest_keeping_the_step(std::size_t n, std::size_t aligned, std::size_t chunk, std::size_t step,
                                     bool padded) {
  return *step_search(n, aligned, chunk, step, padded);
}

void tag(const Case& k, const pfx::Decision& d) {
  RC_TAG(pfx::gen::name(k.shape), pfx::gen::canonical_end_vs_lcp(k), std::string(name(d.reason)));
  RC_CLASSIFY(k.ids.size() > pfx::detail::lcp_block, "longer than one compare block");
}

}  // namespace

PFX_PROPERTY(Rule, MachineAnswersExactlyAsTheReferenceModel, "INV-7", (const Case& k)) {
  const pfx::Machine m = holding(k);
  const pfx::spec::Event query = pfx::spec::Query{k.prompt};
  const pfx::Outcome out = m.query(k.prompt);
  tag(k, out.decision);
  RC_ASSERT(pfx::refinement::to_spec(out, query) == pfx::spec::reference_decision(model_of(k), k.prompt));
}

PFX_PROPERTY(Rule, EveryAnswerKeepsEveryInvariantOfTheCatalogue,
             "INV-1 INV-2 INV-3 INV-4 INV-5 INV-6 INV-7 INV-9", (const Case& k)) {
  pfx::Machine m = holding(k);
  pfx::spec::State model = pfx::refinement::to_spec(m);
  const pfx::refinement::Comparison c = pfx::refinement::step_both(m, model, pfx::spec::Query{k.prompt});
  RC_ASSERT(std::string(c.violated) == "");
  RC_ASSERT(c.machine == c.reference);
  RC_ASSERT(c.states_agree);
}

PFX_PROPERTY(Rule, OffsetRowsAreExactlyThePromptsTokens, "INV-1 AUDIT-253", (const Case& k)) {
  // The rows offered are rows of this prompt's context: a stale KV is never read as current.
  const pfx::Machine m = holding(k);
  const std::size_t offset = m.query(k.prompt).decision.offset;
  RC_ASSERT(offset <= k.prompt.size());
  RC_ASSERT(offset <= m.held().ids.size());
  RC_ASSERT(std::equal(k.prompt.begin(), k.prompt.begin() + static_cast<std::ptrdiff_t>(offset),
                       m.held().ids.begin()));
}

PFX_PROPERTY(Rule, WithChunkOneTheOffsetIsTheSeedsFormula, "INV-7 SEED-1", (Case k)) {
  // design.md's statement of the seed's rule: n = min(lcp, canonical_end, len(prompt) - 1); n when
  // n >= keep_min, else 0; 0 when disabled or nothing is held. The seed knew no prefill step, and
  // never reused a row decode wrote.
  k.config.chunk = 1;
  k.config.prefill_step = 0;
  k.config.decode_rows_exact = false;
  const pfx::Machine m = holding(k);
  std::size_t expected = 0;
  if (k.config.enabled && !k.ids.empty() && !k.prompt.empty()) {
    const std::size_t n =
        std::min({pfx::spec::lcp(k.ids, k.prompt), k.canonical_end, k.prompt.size() - 1});
    expected = n >= k.config.keep_min ? n : 0;
  }
  RC_ASSERT(m.query(k.prompt).decision.offset == expected);
}

PFX_PROPERTY(Rule, TheRunTimeCompareFindsTheFirstMismatch, "INV-1",
             (const std::vector<pfx::token>& shared)) {
  // The block-wise memcmp path against the definition, across block boundaries.
  const std::size_t length = pfx::gen::one_of({
      0, 1, pfx::detail::lcp_block - 1, pfx::detail::lcp_block, pfx::detail::lcp_block + 1,
      3 * pfx::detail::lcp_block + 7, *rc::gen::inRange<std::size_t>(0, 5000)});
  std::vector<pfx::token> a(length);
  for (std::size_t i = 0; i < length; ++i) {
    a[i] = shared.empty() ? static_cast<pfx::token>(i) : shared[i % shared.size()];
  }
  std::vector<pfx::token> b = a;
  // The mismatch anywhere, or within two tokens of a block edge, where the block walk hands over
  // to the scan.
  const std::size_t edge = pfx::detail::lcp_block * *rc::gen::inRange<std::size_t>(0, 5);
  const std::size_t near_edge = edge + *rc::gen::inRange<std::size_t>(0, 5);
  const std::size_t at = std::min(
      length, pfx::gen::one_of({*rc::gen::inRange<std::size_t>(0, length + 1),
                                near_edge < 2 ? near_edge : near_edge - 2}));
  if (at < length) b[at] += 1;
  const std::size_t cut = *rc::gen::inRange<std::size_t>(0, length + 1);
  b.resize(pfx::gen::one_of({length, cut}));
  RC_CLASSIFY(at >= pfx::detail::lcp_block, "mismatch past the first block");
  RC_CLASSIFY(at % pfx::detail::lcp_block == 0, "mismatch on a block edge");
  RC_ASSERT(pfx::common_prefix(a, b) == pfx::spec::lcp(a, b));
  RC_ASSERT(pfx::common_prefix(b, a) == pfx::spec::lcp(a, b));
  // The memcmp path equals the plain scan that constant evaluation (and so every compile-time proof)
  // takes, on the same inputs.
  RC_ASSERT(pfx::common_prefix(a, b) ==
            pfx::detail::common_prefix_scan(a.data(), b.data(), std::min(a.size(), b.size())));
}

TEST(Rule, TheRunTimeCompareIsExactAroundEveryBlockEdge) {
  // Every mismatch position within two tokens of each block edge, and no mismatch at all, for
  // lengths that end just before, on and just after an edge: where the block walk hands over to the
  // scan, an off-by-one would hide.
  pfx::test::verifies("INV-1");
  constexpr std::size_t block = pfx::detail::lcp_block;
  for (const std::size_t length : {block - 1, block, block + 1, 2 * block - 1, 2 * block,
                                   2 * block + 1, 3 * block + 7}) {
    std::vector<pfx::token> a(length);
    for (std::size_t i = 0; i < length; ++i) a[i] = static_cast<pfx::token>(i % 7);
    ASSERT_EQ(pfx::common_prefix(a, a), length);
    for (std::size_t edge = 0; edge <= length + 2; edge += block) {
      for (std::size_t at = edge < 2 ? 0 : edge - 2; at <= edge + 2 && at < length; ++at) {
        std::vector<pfx::token> b = a;
        b[at] += 1;
        ASSERT_EQ(pfx::common_prefix(a, b), at) << "length " << length << ", mismatch at " << at;
        ASSERT_EQ(pfx::common_prefix(b, a), at) << "length " << length << ", mismatch at " << at;
        b.resize(at);  // b a strict prefix of a, ending near the edge
        ASSERT_EQ(pfx::common_prefix(a, b), at) << "length " << length << ", prefix of " << at;
      }
    }
  }
}

PFX_PROPERTY(Rule, FullWidthSettingsAreNeverTruncated, "INV-4 INV-5", (Case k)) {
  // A keep_min or chunk at or past 2^32 (or near 2^64) acts at its full width: a keep_min above
  // anything the prompt could reuse never reuses, and a chunk above it aligns everything to 0. A
  // setting truncated to 32 bits (2^32 -> 0, 2^32 + 1 -> 1) would grant an offset here.
  const std::size_t big = pfx::gen::huge();
  if (*rc::gen::arbitrary<bool>()) {
    k.config.keep_min = big;
  } else {
    k.config.chunk = big;
  }
  RC_TAG(k.config.keep_min == big ? "keep_min" : "chunk");
  const pfx::Machine m = holding(k);
  const pfx::Decision d = m.query(k.prompt).decision;
  RC_ASSERT(d.offset == 0u);
  if (k.config.enabled && !k.ids.empty()) {
    // The offset is 0 for the reason the full-width value gives, never for a wrapped one.
    const pfx::Bounds b = pfx::bounds(m.config(), m.held().ids, m.held().canonical_end, k.prompt);
    RC_ASSERT(d.reason == (b.stepped == 0 ? pfx::Reason::nothing_reusable : pfx::Reason::below_keep_min));
    RC_ASSERT(m.config().keep_min == k.config.keep_min && m.config().chunk == k.config.chunk);
    RC_ASSERT(m.config().prefill_step == k.config.prefill_step);
  }
}

// bounds() and decide() called directly, as the tools that explain a decision call them, on the
// boundaries no prompt of the machine's tests reaches through a held record: the empty prompt, the
// empty record, both, and a canonical_end at the top of the range.

PFX_PROPERTY(Rule, WithDecodeRowsExactTheAnswerIsThatOfARecordClaimingEveryRowItHolds, "INV-2 INV-7",
             (const Case& k)) {
  // The premise lifts INV-2's bound from canonical_end to len(ids) and changes nothing else: the
  // decision is the one without it for the same ids with canonical_end = len(ids), whatever else the
  // configuration says (prefill step, padding, keep_min, chunk, off).
  pfx::Config exact = pfx::refinement::to_core(k.config);
  exact.decode_rows_exact = true;
  pfx::Config inexact = exact;
  inexact.decode_rows_exact = false;
  const pfx::Decision lifted = pfx::decide(exact, k.ids, k.canonical_end, k.prompt);
  RC_ASSERT(lifted == pfx::decide(inexact, k.ids, k.ids.size(), k.prompt));
  RC_ASSERT(lifted.offset <= k.ids.size());
  // With a record that claims its every row anyway, the premise changes nothing.
  RC_ASSERT(pfx::decide(exact, k.ids, k.ids.size(), k.prompt) == pfx::decide(inexact, k.ids, k.ids.size(), k.prompt));
  // And it never offers less than without it (the bound only rises, and the rest is monotone in it
  // but for keep_min, which judges the larger offset as it would judge any).
  const pfx::Decision kept = pfx::decide(inexact, k.ids, k.canonical_end, k.prompt);
  RC_TAG(lifted.offset > kept.offset ? "decode rows granted" : "same offset");
  RC_ASSERT(kept.offset <= k.canonical_end);
}

PFX_PROPERTY(Rule, BoundsAreEachBoundsDefinition, "INV-1 INV-2 INV-3 INV-5 INV-12", (const Case& k)) {
  const pfx::Config config = pfx::refinement::to_core(k.config);
  const pfx::Bounds b = pfx::bounds(config, k.ids, k.canonical_end, k.prompt);
  RC_ASSERT(b.common_prefix == pfx::spec::lcp(k.ids, k.prompt));
  RC_ASSERT(b.canonical_end == (config.decode_rows_exact ? k.ids.size() : k.canonical_end));
  RC_ASSERT(b.one_token_left == (k.prompt.empty() ? 0 : k.prompt.size() - 1));
  const std::size_t tightest = std::min({b.common_prefix, b.canonical_end, b.one_token_left});
  RC_ASSERT(b.aligned == tightest - tightest % config.chunk);
  RC_ASSERT(b.stepped == largest_keeping_the_step(k.prompt.size(), b.aligned, config.chunk, config.prefill_step,
                                                 config.admission_padding != 0));
  RC_ASSERT(b.keep_min == config.keep_min);
}

TEST(Rule, BoundsAndDecideOnTheEmptyPromptAndTheEmptyRecord) {
  pfx::test::verifies("INV-3 INV-6");
  const std::vector<pfx::token> none;
  const std::vector<pfx::token> held = {1, 2, 3};
  const std::vector<pfx::token> prompt = {1, 2, 3, 4};
  for (const pfx::Config config : {pfx::Config{true, 0, 1}, pfx::Config{true, 64, 2}, pfx::Config{false, 0, 1}}) {
    for (const std::size_t canonical_end : {std::size_t{0}, std::size_t{3}, SIZE_MAX}) {
      // The empty prompt: nothing to reuse, and no token to leave: the one-left bound is 0, not
      // len(prompt) - 1 wrapped to 2^64 - 1.
      for (const auto& ids : {none, held}) {
        const pfx::Bounds b = pfx::bounds(config, ids, canonical_end, none);
        EXPECT_EQ(b.common_prefix, 0U);
        EXPECT_EQ(b.canonical_end, canonical_end);
        EXPECT_EQ(b.one_token_left, 0U);
        EXPECT_EQ(b.aligned, 0U);
        EXPECT_EQ(b.tightest, pfx::Bound::common_prefix);
        const pfx::Decision d = pfx::decide(config, ids, canonical_end, none);
        EXPECT_EQ(d.offset, 0U);
        EXPECT_EQ(d.common_prefix, 0U);
        const pfx::Reason expected = !config.enabled ? pfx::Reason::disabled
                                     : ids.empty()   ? pfx::Reason::empty_record
                                                     : pfx::Reason::nothing_reusable;
        EXPECT_EQ(d.reason, expected);
        EXPECT_EQ(d.bound, ids.empty() || !config.enabled ? pfx::Bound::none : pfx::Bound::common_prefix);
      }
      // The empty record: decide answers before any bound (INV-6); bounds() still computes them.
      const pfx::Bounds b = pfx::bounds(config, none, canonical_end, prompt);
      EXPECT_EQ(b.common_prefix, 0U);
      EXPECT_EQ(b.one_token_left, 3U);
      EXPECT_EQ(b.aligned, 0U);
      const pfx::Decision d = pfx::decide(config, none, canonical_end, prompt);
      EXPECT_EQ(d.offset, 0U);
      EXPECT_EQ(d.common_prefix, 0U);
      EXPECT_EQ(d.reason, config.enabled ? pfx::Reason::empty_record : pfx::Reason::disabled);
      EXPECT_EQ(d.bound, pfx::Bound::none);
    }
  }
  // A one-token prompt leaves its token: the bound is 0, as for the empty one, named one token left.
  const pfx::Bounds one = pfx::bounds({true, 0, 1}, held, 3, std::vector<pfx::token>{1});
  EXPECT_EQ(one.one_token_left, 0U);
  EXPECT_EQ(one.tightest, pfx::Bound::one_token_left);
}

// The prefill step (INV-12) on its own, at full width: prompt lengths up to 2^64 - 1 that no test
// can hold, so prefill_step_bound is called directly, against the brute force over every chunk
// below `aligned` (a window of them, where the search would be too long).

namespace {

/// A prompt length: small, around 2^32, or near 2^64; and near a multiple of `step`.
std::size_t prompt_length(std::size_t step) {
  const std::size_t base = pfx::gen::one_of({*rc::gen::inRange<std::size_t>(1, 3000),
                                             (std::size_t{1} << 32) + *rc::gen::inRange<std::size_t>(0, 3000),
                                             SIZE_MAX - *rc::gen::inRange<std::size_t>(0, 3000)});
  if (step == 0 || *rc::gen::arbitrary<bool>()) return base;
  const std::size_t multiple = base < step ? 0 : base - base % step;  // then 0, 1 or 2 past it
  const std::size_t length = multiple + pfx::gen::one_of({0, 1, 2});
  return length == 0 || length < multiple ? 1 : length;
}

}  // namespace

PFX_PROPERTY(Rule, ThePrefillStepBoundIsTheLargestOffsetKeepingTheStepByBruteForce, "INV-7 INV-12", ()) {
  const pfx::spec::Config c = *pfx::gen::config();
  std::size_t chunk = c.chunk;
  std::size_t step = c.prefill_step != 0 ? c.prefill_step : pfx::gen::prefill_step(chunk);
  std::size_t n = prompt_length(step);
  // One case in eight: a chunk and a step near 2^32 whose lcm is past 2^64 - 1, and a prompt whose
  // cold run ends alone, long enough to hold a chunk: only 0 keeps the step, where an lcm that
  // wrapped round would keep more.
  const bool lcm_past_the_top = *rc::gen::weightedElement<bool>({{7, false}, {1, true}});
  if (lcm_past_the_top) {
    constexpr std::size_t two_to_32 = std::size_t{1} << 32;
    chunk = pfx::gen::one_of({two_to_32 + 1, two_to_32 + 3});  // coprime to each step below
    step = pfx::gen::one_of({two_to_32, two_to_32 + 5, 3 * two_to_32});
    n = 1 + step * *rc::gen::inRange<std::size_t>(2, SIZE_MAX / step);
  }
  // aligned: a multiple of chunk at most n - 1 (INV-3, INV-5), near the top or anywhere.
  const std::size_t below = pfx::gen::one_of({n - 1, n - 1 - std::min<std::size_t>(n - 1, *rc::gen::inRange<std::size_t>(0, 50)),
                                              *rc::gen::inRange<std::size_t>(0, SIZE_MAX)});
  const std::size_t reusable = std::min(below, n - 1);
  const std::size_t aligned = reusable - reusable % chunk;
  // A padded admission (INV-12), half the time: it changes the answer only at aligned == n - 1.
  const bool padded = *rc::gen::arbitrary<bool>();
  const std::size_t got = pfx::prefill_step_bound(n, aligned, chunk, step, padded);

  constexpr std::size_t window = 1 << 14;
  const std::optional<std::size_t> found = step_search(n, aligned, chunk, step, padded, window);
  RC_TAG(step == 0 ? "no step" : alone(n, step) ? "cold run ends alone" : "cold run does not end alone",
         found ? "searched to the answer" : "searched a window");
  RC_CLASSIFY(got < aligned, "lowered");
  RC_CLASSIFY(lcm_past_the_top, "lcm past 2^64 - 1");
  RC_CLASSIFY(padded && aligned > 0 && aligned == n - 1, "padded admission at n - 1");
  RC_ASSERT(got <= aligned);
  RC_ASSERT(got % chunk == 0);
  const bool keeps_the_step = step == 0 || got == 0 || alone_resumed(n - got, step, padded) == alone(n, step);
  RC_ASSERT(keeps_the_step);
  if (found) {
    RC_ASSERT(got == *found);
  } else {
    // No offset of the window keeps the step, so the answer lies below it.
    RC_ASSERT(got <= aligned - window * chunk);
  }
  // The O(1) shape the proof in prefill_step.hpp gives: when the cold run does not end alone, at
  // most one chunk down, and none when the step divides the chunk, nor for a padded admission at
  // n - 1.
  if (step != 0 && aligned > 0 && !alone(n, step)) {
    RC_ASSERT(aligned - got <= chunk);
    if (chunk % step == 0) RC_ASSERT(got == aligned);
    if (padded && aligned == n - 1) RC_ASSERT(got == aligned);
  }
  // Padding changes nothing without a step, nor below n - 1: the unpadded answer stands.
  if (step == 0 || aligned < n - 1) RC_ASSERT(got == pfx::prefill_step_bound(n, aligned, chunk, step));
}

PFX_PROPERTY(Rule, ACommitClaimsNoLastPromptRowItsPrefillComputedAlone, "INV-2 INV-12", ()) {
  // prefill_canonical_end: the prompt's length, less its last row exactly when a prefill step makes
  // the prompt's prefill end with a step of that row alone; lengths up to 2^64 - 1.
  const std::size_t step = *rc::gen::element<std::size_t>(0, 1, 2, 3, 32, 256, std::size_t{1} << 32, SIZE_MAX);
  const std::size_t n = pfx::gen::one_of({std::size_t{0}, prompt_length(step)});
  const std::size_t end = pfx::prefill_canonical_end(n, step);
  const bool last_row_alone = step != 0 && n != 0 && alone(n, step);
  RC_TAG(step == 0 ? "no step" : last_row_alone ? "last row computed alone" : "last step longer");
  RC_ASSERT(end == (last_row_alone ? n - 1 : n));
  // What it claims is what a longer prompt's cold run computes the same way: a row before the end
  // is, in the prompt's own prefill, in a step of several tokens or no step premise applies.
  RC_ASSERT(end <= n);
}

PFX_PROPERTY(Rule, KeepMinJudgesTheOffsetThePrefillStepLeaves, "INV-4 INV-7 INV-12", ()) {
  // A prompt held whole, so that the caps leave len(prompt) - 1, aligned down to the chunk; the
  // prompt's length is the first from a random one on at which the prefill step lowers that to a
  // non-zero offset below it. A keep_min between the two refuses the reuse (below keep_min, decided
  // by the prefill step); one at or below the lowered offset takes it. A rule that judged keep_min
  // before the step would take a reuse shorter than keep_min here.
  const std::size_t step = *rc::gen::inRange<std::size_t>(2, 12);
  std::size_t chunk = *rc::gen::inRange<std::size_t>(1, 12);
  if (chunk % step == 0) ++chunk;  // a step that divides the chunk lowers only to 0, or not at all
  const pfx::Config config{true, 0, chunk, step};
  std::size_t n = *rc::gen::inRange<std::size_t>(2, 200);
  // The brute force, not the core, finds the length and the lowered offset, so that a core that
  // never lowers cannot make the search run forever.
  const auto lowered_at = [&](std::size_t length) {
    const std::size_t aligned = (length - 1) - (length - 1) % chunk;
    const std::size_t stepped = *step_search(length, aligned, chunk, step, false);
    return 0 < stepped && stepped < aligned;
  };
  // Every length m * chunk + 1 with m >= 2 and m % step == 1 is lowered (one chunk down, chunk %
  // step != 0), so the search ends within (step + 1) * chunk + 1 lengths.
  while (!lowered_at(n)) ++n;
  const std::size_t aligned = (n - 1) - (n - 1) % chunk;
  const std::size_t stepped = *step_search(n, aligned, chunk, step, false);

  pfx::spec::Tokens prompt(n);
  for (std::size_t i = 0; i < n; ++i) prompt[i] = static_cast<pfx::token>(i % 7);
  pfx::spec::Tokens held = prompt;
  held.push_back(5);  // the prompt, then what decode wrote
  pfx::Config refusing = config;
  refusing.keep_min = *rc::gen::inRange<std::size_t>(stepped + 1, aligned + 1);
  pfx::Config taking = config;
  taking.keep_min = *rc::gen::inRange<std::size_t>(0, stepped + 1);
  RC_TAG(alone(n, step) ? "cold run ends alone" : "cold run does not end alone");

  const pfx::Decision refused = pfx::decide(refusing, held, n, prompt);
  RC_ASSERT(refused.offset == 0U);
  RC_ASSERT(refused.reason == pfx::Reason::below_keep_min);
  RC_ASSERT(refused.bound == pfx::Bound::prefill_step);
  const pfx::Decision taken = pfx::decide(taking, held, n, prompt);
  RC_ASSERT(taken.offset == stepped);
  RC_ASSERT(taken.reason == pfx::Reason::reused);
  RC_ASSERT(taken.bound == pfx::Bound::prefill_step);
  // The machine answers so, and so does the reference, which searches every offset.
  for (const pfx::Config& each : {refusing, taking}) {
    const Case k{pfx::refinement::to_spec(each), held, n, prompt};
    RC_ASSERT(pfx::refinement::to_spec(holding(k).query(prompt), pfx::spec::Query{prompt}) ==
              pfx::spec::reference_decision(model_of(k), prompt));
  }
}

PFX_PROPERTY(Rule, APaddedAdmissionAtTheLastTokenIsKeptOrLoweredAsTheColdRunEnds, "INV-7 INV-12", ()) {
  // A prompt held whole, resumable up to n - 1 on the chunk grid: the resume there leaves one token,
  // which an engine that pads admissions computes with 1 + admission_padding rows, not alone. Where
  // the cold run does not end alone, that resume is kept padded (unpadded it falls a chunk); where
  // it does, it falls to the multiple of lcm(chunk, step) below (unpadded it is kept). The machine
  // and the reference, which tries every offset, answer the same.
  const std::size_t chunk = *rc::gen::inRange<std::size_t>(1, 5);
  std::size_t step = *rc::gen::inRange<std::size_t>(2, 10);
  const bool cold_alone = *rc::gen::arbitrary<bool>();
  if (!cold_alone && chunk % step == 0) ++step;  // else every multiple of chunk ends the cold run alone
  const std::size_t lcm = std::lcm(chunk, step);
  std::size_t n = 0;
  if (cold_alone) {
    n = 1 + lcm * *rc::gen::inRange<std::size_t>(1, 6);  // n - 1 on the chunk grid and ≡ 0 (mod step)
  } else {
    std::size_t m = *rc::gen::inRange<std::size_t>(1, 20);
    while ((chunk * m) % step == 0) ++m;  // n - 1 on the chunk grid and ≢ 0 (mod step)
    n = 1 + chunk * m;
  }
  const std::size_t padding = pfx::gen::admission_padding_nonzero();
  RC_TAG(cold_alone ? "cold run ends alone" : "cold run does not end alone");
  RC_CLASSIFY(padding == SIZE_MAX, "padding 2^64 - 1");

  pfx::spec::Tokens prompt(n);
  for (std::size_t i = 0; i < n; ++i) prompt[i] = static_cast<pfx::token>(i % 5);
  pfx::spec::Tokens held = prompt;
  held.push_back(3);  // the prompt, then what decode wrote
  const pfx::Config unpadded{true, 0, chunk, step};
  pfx::Config padded = unpadded;
  padded.admission_padding = padding;

  const pfx::Decision plain = pfx::decide(unpadded, held, n, prompt);
  const pfx::Decision pad = pfx::decide(padded, held, n, prompt);
  if (cold_alone) {
    RC_ASSERT(plain.offset == n - 1);
    RC_ASSERT(pad.offset == n - 1 - lcm);
    RC_ASSERT(pad.reason == (n - 1 - lcm == 0 ? pfx::Reason::nothing_reusable : pfx::Reason::reused));
    RC_ASSERT(pad.bound == pfx::Bound::prefill_step);
  } else {
    RC_ASSERT(plain.offset == n - 1 - chunk);
    RC_ASSERT(pad.offset == n - 1);
    RC_ASSERT(pad.bound == pfx::Bound::one_token_left);
  }
  for (const pfx::Config& each : {unpadded, padded}) {
    const Case k{pfx::refinement::to_spec(each), held, n, prompt};
    RC_ASSERT(pfx::refinement::to_spec(holding(k).query(prompt), pfx::spec::Query{prompt}) ==
              pfx::spec::reference_decision(model_of(k), prompt));
  }
  // Without a prefill step the padding is no premise: the offset is n - 1 either way.
  pfx::Config no_step = padded;
  no_step.prefill_step = 0;
  RC_ASSERT(pfx::decide(no_step, held, n, prompt).offset == n - 1);
}
