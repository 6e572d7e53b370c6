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
  // n >= keep_min, else 0; 0 when disabled or nothing is held.
  k.config.chunk = 1;
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
    RC_ASSERT(d.reason == (b.aligned == 0 ? pfx::Reason::nothing_reusable : pfx::Reason::below_keep_min));
    RC_ASSERT(m.config().keep_min == k.config.keep_min && m.config().chunk == k.config.chunk);
  }
}

// bounds() and decide() called directly, as the tools that explain a decision call them, on the
// boundaries no prompt of the machine's tests reaches through a held record: the empty prompt, the
// empty record, both, and a canonical_end at the top of the range.

PFX_PROPERTY(Rule, BoundsAreEachBoundsDefinition, "INV-1 INV-2 INV-3 INV-5", (const Case& k)) {
  const pfx::Config config = pfx::refinement::to_core(k.config);
  const pfx::Bounds b = pfx::bounds(config, k.ids, k.canonical_end, k.prompt);
  RC_ASSERT(b.common_prefix == pfx::spec::lcp(k.ids, k.prompt));
  RC_ASSERT(b.canonical_end == k.canonical_end);
  RC_ASSERT(b.one_token_left == (k.prompt.empty() ? 0 : k.prompt.size() - 1));
  const std::size_t tightest = std::min({b.common_prefix, b.canonical_end, b.one_token_left});
  RC_ASSERT(b.aligned == tightest - tightest % config.chunk);
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
