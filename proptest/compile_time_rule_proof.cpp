// The offset rule, proved at compile time: over the bounded domain, the machine's answer equals the
// reference model's and INV-1..10 hold. A violation fails the build (docs/traceability.md).

#include "exhaustive_proof.hpp"

static_assert(pfx::proof::prove_rule_over(pfx::proof::compile_time_rule_domain).failed == 0,
              "the machine differs from the reference model, or breaks an invariant, on the bounded "
              "domain; run exhaustive_test for the counterexample");
