#pragma once

/// \file
/// The driver's CUDA backend: whether CUDA can run here, and a KV state in one device allocation with
/// its own stream. The header needs no CUDA headers, so every program can include it; when pfx was
/// built without a CUDA compiler, the constructor throws CudaError saying so. The reference engine on
/// the device is in pfx::engines (<pfx/engines/reference_engine_on_device.hpp>).

#include <pfx/driver/kv_state.hpp>

#include <cstddef>
#include <memory>
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
  void forget(std::size_t from) override;
  [[nodiscard]] bool owns_rows() const noexcept override { return true; }
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

}  // namespace pfx::driver::cuda
