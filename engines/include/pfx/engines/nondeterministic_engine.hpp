#pragma once

/// \file
/// An engine that is not a function of its inputs: the reference model
/// (pfx/engines/reference_model.hpp, the same weights, the same rows attended) whose attention sums
/// its rows in an order drawn afresh for every call, as kernels that split a reduction across
/// threads and add the parts as they finish (atomics, split-K) do. Floating-point addition is not
/// associative, so two cold runs of the same prompt differ in some bits; no offset rule can make a
/// resume equal a cold run of such an engine, and a check of determinism must say so.
///
/// The orders come from a splitmix64 stream of `seed` advanced by every call, so one engine object
/// repeats no order, and two objects of the same seed make the same calls give the same floats.

#include <pfx/driver/engine.hpp>
#include <pfx/engines/reference_model.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace pfx::engines {

class NondeterministicEngine final : public driver::Engine {
 public:
  /// Throws std::invalid_argument when the shape is unusable.
  explicit NondeterministicEngine(ReferenceModelShape shape, std::uint64_t seed = 1);

  [[nodiscard]] std::size_t chunk() const noexcept override { return shape_.chunk; }
  [[nodiscard]] std::size_t vocab() const noexcept override { return shape_.vocab; }
  [[nodiscard]] const ReferenceModelShape& model() const noexcept { return shape_; }

  /// A HostKvState with this model's layers and width.
  [[nodiscard]] std::unique_ptr<driver::KvState> make_kv_state(std::size_t capacity) const override;

  /// As HostReferenceEngine's, except that each partial softmax result sums its rows in a
  /// permuted order.
  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override;
  /// As HostReferenceEngine's, except that the online pass visits the rows in a permuted order.
  void decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override;

 private:
  /// The next value of the order stream.
  std::uint64_t draw() noexcept;

  ReferenceModelShape shape_;
  ReferenceWeights weights_;
  std::uint64_t state_;
};

}  // namespace pfx::engines
