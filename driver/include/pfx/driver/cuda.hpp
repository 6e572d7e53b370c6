#pragma once

/// \file
/// The CUDA backend: a KV state in one device allocation with its own stream, and the reference
/// engine's algorithm as CUDA kernels. The header needs no CUDA headers, so every program can include
/// it; when pfx was built without a CUDA compiler, every constructor throws CudaError saying so.

#include <pfx/driver/engine.hpp>
#include <pfx/driver/kv_state.hpp>
#include <pfx/engines/reference_model.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace pfx::driver::cuda {

/// True when pfx was built with a CUDA compiler.
[[nodiscard]] bool built_with_cuda() noexcept;

/// Empty when CUDA work can run here. Otherwise why not: "pfx was built without a CUDA compiler",
/// or "no CUDA device: <CUDA's message>".
[[nodiscard]] std::string unavailable_reason();

/// One cudaMalloc of shape.bytes() at construction on the current device, its own non-blocking
/// stream, every row NaN at the start. Every CUDA call is checked; a failure throws CudaError naming
/// the call and CUDA's message.
class KvStateOnDevice final : public KvState {
 public:
  explicit KvStateOnDevice(const KvShape& shape);
  ~KvStateOnDevice() override;

  [[nodiscard]] const KvShape& shape() const noexcept override;
  void fill(std::size_t from, std::size_t to, float value) override;
  [[nodiscard]] std::vector<float> copy_rows(std::size_t from, std::size_t to) const override;
  void synchronize() override;
  [[nodiscard]] std::size_t memory_bytes() const noexcept override;

  /// The device allocation, laid out as row_offset() says.
  [[nodiscard]] float* device_data() const noexcept;
  /// The stream every operation on this state is queued on (a cudaStream_t).
  [[nodiscard]] void* stream() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The reference engine (pfx/driver/reference_model.hpp) as CUDA kernels on the KV state's stream,
/// with the same weights as HostReferenceEngine. Every reduction has a fixed order (no atomics), so
/// a run is a deterministic function of its inputs on one device. It need not match the host engine
/// bit for bit. It keeps scratch buffers between calls, so one caller at a time (one lane).
class ReferenceEngineOnDevice final : public Engine {
 public:
  /// Uploads the weights. Throws std::invalid_argument for an unusable shape, CudaError on a CUDA
  /// failure or when built without CUDA.
  explicit ReferenceEngineOnDevice(const ReferenceModelShape& shape = {});
  ~ReferenceEngineOnDevice() override;

  [[nodiscard]] std::size_t chunk() const noexcept override;
  [[nodiscard]] std::size_t vocab() const noexcept override;
  [[nodiscard]] const ReferenceModelShape& model() const noexcept;

  /// A KvStateOnDevice with this model's layers and width.
  [[nodiscard]] std::unique_ptr<KvState> make_kv_state(std::size_t capacity) const override;
  /// `kv` must come from make_kv_state (std::invalid_argument otherwise); rows past its capacity and
  /// tokens outside the vocabulary are std::out_of_range. The logits are copied to the host, so they
  /// are ready when the call returns.
  void prefill(KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override;
  void decode(KvState& kv, token next, std::size_t position, std::span<float> logits) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pfx::driver::cuda
