// Regression properties for the seed's audits: 253 (a stale KV is never read as the current
// context), 259 (reuse is on by default), 260 (never offer a row decode wrote).

#include <pfx/refinement/bridge.hpp>
#include "support/generators.hpp"
#include "support/requirement.hpp"

#include <pfx/core.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace {

using pfx::spec::Tokens;

/// A prompt that extends `held` by `extra` fresh tokens.
Tokens extended(const Tokens& held, std::size_t extra, pfx::token first) {
  Tokens p = held;
  for (std::size_t i = 0; i < extra; ++i) p.push_back(first + static_cast<pfx::token>(i));
  return p;
}

}  // namespace

PFX_PROPERTY(SeedAudit253, AfterBeginAndAbortNoRewrittenRowIsOfferedAgain, "AUDIT-253 INV-8",
             (const pfx::gen::Case& k)) {
  // A request begins at its offset and fails after overwriting rows past it; the next request with
  // the old context must not be offered those rows.
  pfx::Machine m;
  RC_ASSERT(m.configure(pfx::refinement::to_core(k.config)).accepted());
  RC_ASSERT(m.record(k.ids, k.canonical_end).accepted());
  const std::size_t offset = m.query(k.prompt).decision.offset;
  RC_ASSERT(m.begin(k.prompt, offset).accepted());
  RC_ASSERT(m.abort().accepted());
  const Tokens old_context = extended(k.ids, 1, 7);
  RC_ASSERT(m.query(old_context).decision.offset <= offset);
  RC_TAG(offset > 0 ? "began with reuse" : "began cold");
}

PFX_PROPERTY(SeedAudit253, DisablingForgetsWhatIsHeldSoReEnablingOffersNothingStale,
             "AUDIT-253 INV-6", (const pfx::gen::Case& k)) {
  // While disabled the KV state is still written but nothing is recorded; turning reuse back on must
  // not resurrect the old record.
  pfx::Machine m;
  pfx::Config on = pfx::refinement::to_core(k.config);
  on.enabled = true;
  RC_ASSERT(m.configure(on).accepted());
  RC_ASSERT(m.record(k.ids, k.canonical_end).accepted());
  pfx::Config off = on;
  off.enabled = false;
  RC_ASSERT(m.configure(off).accepted());
  RC_ASSERT(m.record(k.prompt, k.prompt.size()).accepted());  // the seed ignores this while off
  RC_ASSERT(m.configure(on).accepted());
  const pfx::Decision d = m.query(k.prompt).decision;
  RC_ASSERT(d.offset == 0U);
  RC_ASSERT(d.reason == pfx::Reason::empty_record);
}

TEST(SeedAudit259, ReuseIsOnByDefaultWithTheSeedsKeepMin) {
  pfx::test::verifies("AUDIT-259");
  const pfx::Machine m;
  EXPECT_TRUE(m.config().enabled);
  EXPECT_EQ(m.config().keep_min, 64U);
  EXPECT_EQ(m.config().chunk, 1U);
  EXPECT_EQ(m.config().prefill_step, 0U);  // no prefill step premise: the seed's offsets
  EXPECT_EQ(m.config().admission_padding, 0U);  // nor any padding
}

PFX_PROPERTY(SeedAudit259, ADefaultMachineReusesARepeatedLongPrefix, "AUDIT-259",
             (const std::vector<pfx::token>& seed_tokens)) {
  // With no configuration at all, a prompt that extends the last request reuses its prompt rows.
  const std::size_t length = *rc::gen::inRange<std::size_t>(65, 300);
  Tokens prompt(length);
  for (std::size_t i = 0; i < length; ++i) {
    prompt[i] = seed_tokens.empty() ? static_cast<pfx::token>(i) : seed_tokens[i % seed_tokens.size()];
  }
  pfx::Machine m;
  RC_ASSERT(m.record(prompt, prompt.size()).accepted());
  const Tokens next = extended(prompt, 3, 11);
  RC_ASSERT(m.query(next).decision.offset == prompt.size());
}

PFX_PROPERTY(SeedAudit260, RowsWrittenByDecodeAreNeverOffered, "AUDIT-260 INV-2",
             (const pfx::gen::Case& k)) {
  // A request prefills its prompt, decodes `generated` tokens, and commits prompt + generated with
  // canonical_end = len(prompt). However the next prompt continues, no decode row is offered, unless
  // the engine is said to write decode rows exactly (decode_rows_exact, off by default).
  pfx::Config config = pfx::refinement::to_core(k.config);
  config.decode_rows_exact = false;
  pfx::Machine m;
  RC_ASSERT(m.configure(config).accepted());
  const std::size_t offset = m.query(k.prompt).decision.offset;
  RC_ASSERT(m.begin(k.prompt, offset).accepted());
  const std::size_t generated = *rc::gen::inRange<std::size_t>(1, 40);
  const Tokens answer = extended(k.prompt, generated, 5);
  RC_ASSERT(m.commit(answer, k.prompt.size()).accepted());
  const Tokens next = extended(answer, *rc::gen::inRange<std::size_t>(1, 20), 9);
  const pfx::Decision d = m.query(next).decision;
  RC_ASSERT(d.offset <= k.prompt.size());
  RC_CLASSIFY(d.bound == pfx::Bound::canonical_end, "cut by canonical end");
}
