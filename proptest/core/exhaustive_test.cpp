// The compile-time proofs' bodies run at run time, on larger domains: coverage sees them, and a
// failure prints the counterexample.

#include <pfx/conformance/exhaustive_proof.hpp>
#include "support/requirement.hpp"

#include <ostream>
#include <sstream>
#include <string>

// The run-time domains contain the compile-time ones, so a counterexample that fails the build is
// always reproduced here.
static_assert(pfx::proof::run_time_rule_domain.max_length >= pfx::proof::compile_time_rule_domain.max_length &&
              pfx::proof::run_time_rule_domain.max_keep_min >= pfx::proof::compile_time_rule_domain.max_keep_min &&
              pfx::proof::run_time_rule_domain.max_chunk >= pfx::proof::compile_time_rule_domain.max_chunk);
static_assert(pfx::proof::run_time_protocol_domain.max_length >= pfx::proof::compile_time_protocol_domain.max_length &&
              pfx::proof::run_time_protocol_domain.max_keep_min >= pfx::proof::compile_time_protocol_domain.max_keep_min &&
              pfx::proof::run_time_protocol_domain.max_chunk >= pfx::proof::compile_time_protocol_domain.max_chunk);

namespace {

std::ostream& operator<<(std::ostream& os, const pfx::spec::Tokens& t) {
  os << '[';
  for (std::size_t i = 0; i < t.size(); ++i) os << (i ? "," : "") << t[i];
  return os << ']';
}

std::string counterexample(const pfx::proof::Tally& t) {
  std::ostringstream os;
  os << t.failed << " of " << t.checked << " checks failed; first: config{enabled "
     << t.config.enabled << ", keep_min " << t.config.keep_min << ", chunk " << t.config.chunk
     << "} ids " << t.ids << " canonical_end " << t.canonical_end << " prompt " << t.prompt
     << " event #" << t.event;
  return os.str();
}

}  // namespace

TEST(Exhaustive, TheRuleEqualsTheReferenceOnEveryCaseOfTheBoundedDomain) {
  pfx::test::verifies("INV-1 INV-2 INV-3 INV-4 INV-5 INV-6 INV-7 INV-9");
  const pfx::proof::Tally t = pfx::proof::prove_rule_over(pfx::proof::run_time_rule_domain);
  EXPECT_EQ(t.failed, 0U) << counterexample(t);
  EXPECT_GT(t.checked, 400000U);  // the whole domain was walked, not a part of it
  EXPECT_GT(t.granted, 10000U);   // and it offered reuse, so INV-1..5 judged real offsets
}

TEST(Exhaustive, TheProtocolEqualsTheReferenceFromEveryStateOfTheBoundedDomain) {
  pfx::test::verifies("INV-1 INV-2 INV-3 INV-4 INV-5 INV-6 INV-7 INV-8 INV-9 INV-10");
  const pfx::proof::Tally t = pfx::proof::prove_protocol_over(pfx::proof::run_time_protocol_domain);
  EXPECT_EQ(t.failed, 0U) << counterexample(t);
  EXPECT_GT(t.checked, 100000U);
  EXPECT_GT(t.granted, 1000U);
}

TEST(Exhaustive, ConfigureEqualsTheReferenceForEveryKnobChunkZeroIncluded) {
  pfx::test::verifies("INV-9 INV-10");
  const pfx::proof::Tally t = pfx::proof::prove_configure(4);
  EXPECT_EQ(t.failed, 0U) << counterexample(t);
}
