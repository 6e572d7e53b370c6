#pragma once

/// \file
/// The reference engine on the host (pfx/engines/reference_model.hpp): fp32, single-threaded, with a
/// fixed order for every sum, so a run is a deterministic function of its inputs.

#include <pfx/driver/engine.hpp>
#include <pfx/driver/host_kv_state.hpp>
#include <pfx/engines/reference_model.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace pfx::engines {

class HostReferenceEngine final : public driver::Engine {
 public:
  /// Throws std::invalid_argument when the shape is unusable.
  explicit HostReferenceEngine(const ReferenceModelShape& shape = {});

  [[nodiscard]] std::size_t chunk() const noexcept override { return shape_.chunk; }
  [[nodiscard]] std::size_t vocab() const noexcept override { return shape_.vocab; }
  [[nodiscard]] const ReferenceModelShape& model() const noexcept { return shape_; }

  /// A HostKvState with this model's layers and width.
  [[nodiscard]] std::unique_ptr<driver::KvState> make_kv_state(std::size_t capacity) const override;

  /// `kv` must come from make_kv_state, or be a ShardedKvState whose shards do (its rows are read
  /// from their owners in position order, so the results do not depend on the layout);
  /// std::invalid_argument otherwise. Positions past its
  /// capacity and tokens outside the vocabulary are std::out_of_range.
  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override;
  void decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override;

 private:
  ReferenceModelShape shape_;
  ReferenceWeights weights_;
};

}  // namespace pfx::engines
