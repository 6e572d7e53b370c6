// The exhaustive proofs in static_assert: over the bounded compile-time domains, the machine answers
// as the reference model does and keeps INV-1..12, or the build fails. proptest/core/CMakeLists.txt
// compiles this file once per proof and (chunk, keep_min, decode rows exact) slice, so that the
// slices build in parallel and each stays within a minute or two and about 6 GB of the compiler's
// memory (both values of the decode-rows premise in one object took 12 GB: two of them at once
// exhaust a 24 GB machine): PFX_PROOF_RULE, PFX_PROOF_STEP (the rule under the prefill steps) or
// PFX_PROOF_PROTOCOL picks the proof; PFX_PROOF_CHUNK, PFX_PROOF_KEEP_MIN and
// PFX_PROOF_DECODE_ROWS_EXACT (0 or 1) the slice; PFX_PROOF_MAX_CHUNK, PFX_PROOF_MAX_KEEP_MIN and
// PFX_PROOF_DECODE_FACTS are the bounds CMake loops over, checked against the domain below.
// exhaustive_test.cpp runs the same bodies at run time and prints any counterexample.

#include <pfx/refinement/exhaustive_proof.hpp>

#include <cstddef>

#if defined(PFX_PROOF_RULE)
inline constexpr pfx::refinement::Domain domain = pfx::refinement::compile_time_rule_domain;
inline constexpr auto prove = [](const pfx::refinement::Domain& d, const pfx::refinement::Slice& s) {
  return pfx::refinement::prove_rule_over(d, s);
};
#elif defined(PFX_PROOF_STEP)
inline constexpr pfx::refinement::Domain domain = pfx::refinement::compile_time_step_domain;
inline constexpr auto prove = [](const pfx::refinement::Domain& d, const pfx::refinement::Slice& s) {
  return pfx::refinement::prove_rule_over(d, s);
};
#elif defined(PFX_PROOF_PROTOCOL)
inline constexpr pfx::refinement::Domain domain = pfx::refinement::compile_time_protocol_domain;
inline constexpr auto prove = [](const pfx::refinement::Domain& d, const pfx::refinement::Slice& s) {
  return pfx::refinement::prove_protocol_over(d, s);
};
#if PFX_PROOF_CHUNK == 1 && PFX_PROOF_KEEP_MIN == 0 && PFX_PROOF_DECODE_ROWS_EXACT == 0
static_assert(pfx::refinement::prove_configure(3).failed == 0,
              "configure differs from the reference model or breaks an invariant");
#endif
#else
#error "define PFX_PROOF_RULE, PFX_PROOF_STEP or PFX_PROOF_PROTOCOL"
#endif

// The slice's counts, computed once (a Tally holds vectors, which cannot outlive the evaluation).
struct Counts {
  std::size_t failed;
  std::size_t granted;
  std::size_t lowered;
  std::size_t padding_mattered;
  std::size_t decode_rows_mattered;
};
inline constexpr Counts slice = [] {
  const pfx::refinement::Tally t =
      prove(domain, pfx::refinement::only(PFX_PROOF_CHUNK, PFX_PROOF_KEEP_MIN, PFX_PROOF_DECODE_ROWS_EXACT));
  return Counts{t.failed, t.granted, t.lowered, t.padding_mattered, t.decode_rows_mattered};
}();

// The object's name (pfx_compile_time_<proof>_proof_chunk<C>_keep_min<K>) says which proof and
// slice failed.
static_assert(slice.failed == 0,
              "the machine differs from the reference model, or breaks an invariant, on this slice "
              "of the bounded domain; run exhaustive_test for the counterexample");

// No slice is vacuous: each grants some non-zero aligned offset (INV-5 is checked on it).
static_assert(slice.granted > 0,
              "this slice of the bounded domain never grants a non-zero offset: it proves nothing");

// A slice of a domain with prefill steps sees the step lower some offset: INV-12 judges real cuts.
static_assert(domain.max_prefill_step == 0 || slice.lowered > 0,
              "this slice of the bounded domain never lets the prefill step lower an offset");

// A slice of a domain with an admission padding sees it change some answer: INV-12 judges padded
// resumes at len - 1, not only unpadded ones.
static_assert(domain.max_admission_padding == 0 || slice.padding_mattered > 0,
              "this slice of the bounded domain never lets the admission padding change an answer");

// A slice of a domain with decode rows exact sees the premise change some answer: INV-2 judges
// grants of rows decode wrote, not only rows below canonical_end.
static_assert(PFX_PROOF_DECODE_ROWS_EXACT == 0 || slice.decode_rows_mattered > 0,
              "this slice of the bounded domain never lets exact decode rows change an answer");

// Together the slices cover the whole domain, no more and no less.
static_assert(PFX_PROOF_MAX_CHUNK == domain.max_chunk && PFX_PROOF_MAX_KEEP_MIN == domain.max_keep_min &&
                  PFX_PROOF_DECODE_FACTS == (domain.decode_facts ? 1 : 0),
              "proptest/CMakeLists.txt must compile one slice per (chunk, keep_min, decode rows exact) of the "
              "domain");
