#pragma once

/// \file
/// The reference engine as CUDA kernels, on a KvStateOnDevice. The header needs no CUDA headers;
/// when pfx was built without a CUDA compiler, the constructor throws CudaError saying so.

#include <pfx/driver/cuda.hpp>
#include <pfx/driver/engine.hpp>
#include <pfx/driver/kv_state.hpp>
#include <pfx/engines/reference_model.hpp>

#include <cstddef>
#include <memory>
#include <span>

namespace pfx::engines::cuda {

/// The reference engine (<pfx/engines/reference_model.hpp>) as CUDA kernels on the KV state's stream,
/// with the same weights as HostReferenceEngine. Every reduction has a fixed order (no atomics), so
/// a run is a deterministic function of its inputs on one device. It need not match the host engine
/// bit for bit. It keeps scratch buffers between calls, so one caller at a time (one lane).
class ReferenceEngineOnDevice final : public driver::Engine {
 public:
  /// Uploads the weights. Throws std::invalid_argument for an unusable shape, CudaError on a CUDA
  /// failure or when built without CUDA.
  explicit ReferenceEngineOnDevice(const ReferenceModelShape& shape = {});
  ~ReferenceEngineOnDevice() override;

  [[nodiscard]] std::size_t chunk() const noexcept override;
  [[nodiscard]] std::size_t vocab() const noexcept override;
  [[nodiscard]] const ReferenceModelShape& model() const noexcept;

  /// A KvStateOnDevice with this model's layers and width.
  [[nodiscard]] std::unique_ptr<driver::KvState> make_kv_state(std::size_t capacity) const override;
  /// `kv` must come from make_kv_state (std::invalid_argument otherwise); rows past its capacity and
  /// tokens outside the vocabulary are std::out_of_range. The logits are copied to the host, so they
  /// are ready when the call returns.
  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override;
  void decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pfx::engines::cuda
