#pragma once

/// \file
/// An engine of the class the original Python class failed on: the host reference engine (the same
/// weights) with full causal attention reduced in tiles of each prefill call's length
/// (HostReferenceEngine::Reduction::tiles), whose floating-point results depend on how the prompt was
/// cut into prefill calls.
///
/// Why an unaligned resume differs: a prefill call for rows [s, s + n) reduces each query's attention
/// in tiles of n rows anchored at the call's start, each tile a partial softmax result. Floating-point
/// addition is not associative, so rows reduced in other tiles round differently. A cold run
/// prefills [k C, (k + 1) C) (C = chunk(), the last call cut at the prompt's end); a resume at a
/// multiple of C makes exactly the same calls for the rows it computes, so it equals the cold run bit
/// for bit. A resume at an unaligned offset r first prefills [r, next multiple of C): another start
/// and another length, so other tiles, other floats in the rows it writes, and through them in every
/// later row and in the logits.
///
/// Decode reduces every row 0..p in one online-softmax pass. Deterministic: a run is a fixed
/// function of its calls. Cost: O(p) rows read per token (for tests and `pfx conform`, not for long
/// traces).

#include <pfx/engines/host_reference_engine.hpp>

namespace pfx::engines {

class BlockedAttentionEngine final : public HostReferenceEngine {
 public:
  /// shape.chunk: the grid on which a resume equals a cold run. Throws std::invalid_argument when
  /// the shape is unusable.
  explicit BlockedAttentionEngine(const ReferenceModelShape& shape) : HostReferenceEngine(shape, Reduction::tiles) {}
};

}  // namespace pfx::engines
