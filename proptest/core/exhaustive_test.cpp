// The compile-time proofs' bodies run at run time, on larger domains: coverage sees them, and a
// failure prints the counterexample.

#include <pfx/refinement/describe.hpp>
#include <pfx/refinement/exhaustive_proof.hpp>
#include "support/requirement.hpp"

#include <sstream>
#include <string>

// The run-time domains contain the compile-time ones, so a counterexample that fails the build is
// always reproduced here.
static_assert(pfx::refinement::run_time_rule_domain.max_length >= pfx::refinement::compile_time_rule_domain.max_length &&
              pfx::refinement::run_time_rule_domain.max_keep_min >= pfx::refinement::compile_time_rule_domain.max_keep_min &&
              pfx::refinement::run_time_rule_domain.max_chunk >= pfx::refinement::compile_time_rule_domain.max_chunk &&
              pfx::refinement::run_time_rule_domain.decode_facts >= pfx::refinement::compile_time_rule_domain.decode_facts);
static_assert(pfx::refinement::run_time_protocol_domain.max_length >= pfx::refinement::compile_time_protocol_domain.max_length &&
              pfx::refinement::run_time_protocol_domain.max_keep_min >= pfx::refinement::compile_time_protocol_domain.max_keep_min &&
              pfx::refinement::run_time_protocol_domain.max_chunk >= pfx::refinement::compile_time_protocol_domain.max_chunk &&
              pfx::refinement::run_time_protocol_domain.decode_facts >= pfx::refinement::compile_time_protocol_domain.decode_facts);
static_assert(pfx::refinement::run_time_step_domain.max_length >= pfx::refinement::compile_time_step_domain.max_length &&
              pfx::refinement::run_time_step_domain.max_keep_min >= pfx::refinement::compile_time_step_domain.max_keep_min &&
              pfx::refinement::run_time_step_domain.max_chunk >= pfx::refinement::compile_time_step_domain.max_chunk &&
              pfx::refinement::run_time_step_domain.max_prefill_step >= pfx::refinement::compile_time_step_domain.max_prefill_step &&
              pfx::refinement::run_time_step_domain.letters == pfx::refinement::compile_time_step_domain.letters &&
              pfx::refinement::run_time_step_domain.max_admission_padding >= pfx::refinement::compile_time_step_domain.max_admission_padding);

namespace {

std::string counterexample(const pfx::refinement::Tally& t) {
  using pfx::refinement::describe;  // the one describe() of counterexamples
  std::ostringstream os;
  os << t.failed << " of " << t.checked << " checks failed; first: config " << describe(t.config) << "; ids "
     << describe(t.ids) << " canonical_end " << t.canonical_end << " prompt " << describe(t.prompt) << " event #"
     << t.event;
  return os.str();
}

}  // namespace

TEST(Exhaustive, TheRuleEqualsTheReferenceOnEveryCaseOfTheBoundedDomain) {
  pfx::test::verifies("INV-1 INV-2 INV-3 INV-4 INV-5 INV-6 INV-7 INV-9 INV-12");
  const pfx::refinement::Tally t = pfx::refinement::prove_rule_over(pfx::refinement::run_time_rule_domain);
  EXPECT_EQ(t.failed, 0U) << counterexample(t);
  EXPECT_GT(t.checked, 2000000U);  // the whole domain was walked, not a part of it
  EXPECT_GT(t.granted, 100000U);   // and it offered reuse, so INV-1..5 judged real offsets
  EXPECT_GT(t.lowered, 1000U);     // and the prefill steps lowered some (INV-12)
  EXPECT_GT(t.decode_rows_mattered, 10000U);  // and exact decode rows were granted (INV-2 either way)
}

TEST(Exhaustive, TheRuleUnderEveryPrefillStepEqualsTheReferenceOnLongerPrompts) {
  // Over one letter, prompts of up to 12 tokens: the prefill step's arithmetic (a last step of one
  // token alone, lcm(chunk, step), one chunk down) against the reference's step-by-step search, and
  // keep_min judged after it.
  pfx::test::verifies("INV-4 INV-5 INV-7 INV-12");
  const pfx::refinement::Tally t = pfx::refinement::prove_rule_over(pfx::refinement::run_time_step_domain);
  EXPECT_EQ(t.failed, 0U) << counterexample(t);
  EXPECT_GT(t.checked, 300000U);
  EXPECT_GT(t.granted, 50000U);
  EXPECT_GT(t.lowered, 10000U);                // the step lowered offsets: INV-12 judged real cuts
  EXPECT_GT(t.lowered_below_keep_min, 1000U);  // and some of them below keep_min (INV-4 after it)
  EXPECT_GT(t.padding_mattered, 1000U);        // and the admission padding changed answers (INV-12)
}

TEST(Exhaustive, TheProtocolEqualsTheReferenceFromEveryStateOfTheBoundedDomain) {
  pfx::test::verifies("INV-1 INV-2 INV-3 INV-4 INV-5 INV-6 INV-7 INV-8 INV-9 INV-10");
  const pfx::refinement::Tally t = pfx::refinement::prove_protocol_over(pfx::refinement::run_time_protocol_domain);
  EXPECT_EQ(t.failed, 0U) << counterexample(t);
  EXPECT_GT(t.checked, 100000U);
  EXPECT_GT(t.granted, 1000U);
  EXPECT_GT(t.decode_rows_mattered, 100U);  // begins granted rows decode wrote (INV-2 either way)
}

TEST(Exhaustive, ConfigureEqualsTheReferenceForEveryKnobChunkZeroIncluded) {
  // Every prefill step is valid and keeps the record (INV-12 changes no grid); a change of whether
  // decode rows are exact forgets it (INV-11).
  pfx::test::verifies("INV-9 INV-10 INV-11");
  const pfx::refinement::Tally t = pfx::refinement::prove_configure(4, 4);
  EXPECT_EQ(t.failed, 0U) << counterexample(t);
}

TEST(Exhaustive, EveryCompileTimeSliceGrantsANonZeroOffset) {
  // What compile_time_proof.cpp asserts of each slice, at run time: none is vacuous.
  pfx::test::verifies("INV-5");
  const auto slices = [](const pfx::refinement::Domain& d, auto prove) {
    for (std::size_t chunk = 1; chunk <= d.max_chunk; ++chunk) {
      for (std::size_t keep_min = 0; keep_min <= d.max_keep_min; ++keep_min) {
        for (const int exact : {0, 1}) {  // as compile_time_proof.cpp's objects split them
          if (exact == 1 && !d.decode_facts) continue;
          const pfx::refinement::Tally t = prove(d, pfx::refinement::only(chunk, keep_min, exact));
          EXPECT_EQ(t.failed, 0U) << counterexample(t);
          EXPECT_GT(t.granted, 0U) << "chunk " << chunk << ", keep_min " << keep_min << ", exact " << exact;
          EXPECT_EQ(t.decode_rows_mattered > 0, exact == 1) << "chunk " << chunk << ", keep_min " << keep_min;
        }
      }
    }
  };
  slices(pfx::refinement::compile_time_rule_domain, [](const pfx::refinement::Domain& d, const pfx::refinement::Slice& s) {
    return pfx::refinement::prove_rule_over(d, s);
  });
  slices(pfx::refinement::compile_time_step_domain, [](const pfx::refinement::Domain& d, const pfx::refinement::Slice& s) {
    pfx::refinement::Tally t = pfx::refinement::prove_rule_over(d, s);
    EXPECT_GT(t.lowered, 0U) << "chunk " << s.chunk << ", keep_min " << s.keep_min;  // as compile_time_proof.cpp asserts
    EXPECT_GT(t.padding_mattered, 0U) << "chunk " << s.chunk << ", keep_min " << s.keep_min;
    return t;
  });
  slices(pfx::refinement::compile_time_protocol_domain, [](const pfx::refinement::Domain& d, const pfx::refinement::Slice& s) {
    return pfx::refinement::prove_protocol_over(d, s);
  });
}
