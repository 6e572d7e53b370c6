// The bounded model checker (spec/conformance/include/pfx/conformance/model_checker.hpp): every event
// sequence of its domain, SAFE against the ghost state on every reachable state, and the reference
// and every invariant on every step. Prints the domain, the number of states and transitions.

#include <pfx/conformance/describe.hpp>
#include <pfx/conformance/model_checker.hpp>
#include "support/requirement.hpp"

#include <iostream>
#include <sstream>
#include <string>

namespace {

std::string path_of(const pfx::proof::ModelReport& r) {
  std::ostringstream os;
  for (const pfx::spec::Event& e : r.path) os << "\n  " << pfx::fuzz::describe(e);
  return os.str();
}

}  // namespace

TEST(ModelChecker, SafeAndEveryInvariantHoldOnEveryReachableStateOfTheDomain) {
  pfx::test::verifies("SAFE INV-1 INV-2 INV-3 INV-4 INV-5 INV-6 INV-7 INV-8 INV-9 INV-10 INV-11 THM-1");
  const pfx::proof::ModelDomain d = pfx::proof::model_domain;
  const pfx::proof::ModelReport r = pfx::proof::check_model(d);
  std::cout << "model checker: alphabet " << d.alphabet << ", prompts of 0.." << d.max_prompt
            << " tokens, 0.." << d.max_generated << " generated, up to " << d.max_requests
            << " requests, keep_min 0.." << d.max_keep_min << ", chunk 0.." << d.max_chunk << ": "
            << r.states << " states, " << r.transitions << " transitions, " << r.offers
            << " offers checked (" << r.nonzero_offers << " non-zero)\n";
  EXPECT_EQ(r.failed, 0U) << r.violation << " after:" << path_of(r);
  // Not vacuous: the search went past the first request and SAFE judged real reuse.
  EXPECT_GT(r.states, 10000U);
  EXPECT_GT(r.nonzero_offers, 1000U);
}
