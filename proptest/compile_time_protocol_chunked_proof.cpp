// The protocol, proved at compile time for chunk 2 and up (see compile_time_protocol_proof.cpp).

#include "exhaustive_proof.hpp"

static_assert(
    pfx::proof::prove_protocol_over(pfx::proof::compile_time_protocol_domain, 2).failed == 0,
    "the protocol differs from the reference model, or breaks an invariant, on the bounded domain; "
    "run exhaustive_test for the counterexample");
