// The exhaustive proofs in static_assert: over the bounded compile-time domains, the machine answers
// as the reference model does and keeps INV-1..10, or the build fails. Compiled once per proof and
// chunk (proptest/CMakeLists.txt), so that the files build in parallel and each stays well under a
// minute: PFX_PROOF_RULE or PFX_PROOF_PROTOCOL picks the proof, PFX_PROOF_CHUNK the chunk.
// exhaustive_test.cpp runs the same bodies at run time and prints any counterexample.

#include "exhaustive_proof.hpp"

#if defined(PFX_PROOF_RULE)
static_assert(pfx::proof::prove_rule_over(pfx::proof::compile_time_rule_domain, PFX_PROOF_CHUNK,
                                          PFX_PROOF_CHUNK)
                      .failed == 0,
              "the offset rule differs from the reference model, or breaks an invariant, on the "
              "bounded domain; run exhaustive_test for the counterexample");
#elif defined(PFX_PROOF_PROTOCOL)
static_assert(pfx::proof::prove_protocol_over(pfx::proof::compile_time_protocol_domain,
                                              PFX_PROOF_CHUNK, PFX_PROOF_CHUNK)
                      .failed == 0,
              "the protocol differs from the reference model, or breaks an invariant, on the "
              "bounded domain; run exhaustive_test for the counterexample");
#if PFX_PROOF_CHUNK == 1
static_assert(pfx::proof::prove_configure(3).failed == 0,
              "configure differs from the reference model or breaks an invariant");
#endif
#else
#error "define PFX_PROOF_RULE or PFX_PROOF_PROTOCOL"
#endif
