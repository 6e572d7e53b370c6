#pragma once

/// \file
/// An engine of the class the original Python class failed on: the reference model
/// (pfx/engines/reference_model.hpp, the same weights) with full causal attention, whose
/// floating-point results depend on how the prompt was cut into prefill calls.
///
/// Why an unaligned resume differs: a prefill call for rows [s, s + n) reduces each query's attention
/// in tiles of n rows anchored at the call's start, as a kernel that tiles the KV cache by its query
/// block does: the tiles [s - (m + 1) n, s - m n) for m = 0, 1, ... (the first one cut at 0), then
/// the chunk's own rows [s, p], each tile a partial softmax result, merged in ascending order by
/// log-sum-exp. Floating-point addition is not associative, so rows reduced in other tiles round
/// differently. A cold run prefills [k C, (k + 1) C) (C = chunk(), the last call cut at the prompt's
/// end); a resume at a multiple of C makes exactly the same calls for the rows it computes, so it
/// equals the cold run bit for bit. A resume at an unaligned offset r first prefills [r, next
/// multiple of C): another start and another length, so other tiles, other floats in the rows it
/// writes, and through them in every later row and in the logits.
///
/// Decode reduces every row 0..p in one online-softmax pass. Deterministic: a run is a fixed
/// function of its calls. Cost: O(p) rows read per token (for tests and `pfx conform`, not for long
/// traces).

#include <pfx/driver/engine.hpp>
#include <pfx/engines/reference_model.hpp>

#include <cstddef>
#include <memory>
#include <span>

namespace pfx::engines {

class BlockedAttentionEngine final : public driver::Engine {
 public:
  /// Throws std::invalid_argument when the shape is unusable.
  explicit BlockedAttentionEngine(ReferenceModelShape shape);

  /// shape.chunk: the grid on which a resume equals a cold run.
  [[nodiscard]] std::size_t chunk() const noexcept override { return shape_.chunk; }
  [[nodiscard]] std::size_t vocab() const noexcept override { return shape_.vocab; }
  [[nodiscard]] const ReferenceModelShape& model() const noexcept { return shape_; }

  /// A HostKvState with this model's layers and width.
  [[nodiscard]] std::unique_ptr<driver::KvState> make_kv_state(std::size_t capacity) const override;

  /// As HostReferenceEngine's: `kv` from make_kv_state (or a ShardedKvState of HostKvStates);
  /// positions past its capacity and tokens outside the vocabulary are std::out_of_range.
  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override;
  void decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override;

 private:
  ReferenceModelShape shape_;
  ReferenceWeights weights_;
};

}  // namespace pfx::engines
