// The protocol, proved at compile time for chunk 1: every event from every reachable state of the
// bounded domain, refused ones included, answers as the reference model does and keeps INV-1..10.
// A violation fails the build (docs/traceability.md).

#include "exhaustive_proof.hpp"

static_assert(
    pfx::proof::prove_protocol_over(pfx::proof::compile_time_protocol_domain, 1, 1).failed == 0,
    "the protocol differs from the reference model, or breaks an invariant, on the bounded domain; "
    "run exhaustive_test for the counterexample");
static_assert(pfx::proof::prove_configure(3).failed == 0,
              "configure differs from the reference model or breaks an invariant");
