#pragma once

// Error checks shared by the CUDA backend's translation units: every CUDA call's status goes
// through check(), which throws CudaError naming the call and CUDA's own description, and every
// device allocation is owned by a DeviceArray, whose destructor frees it without throwing.

#include <pfx/driver/errors.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

namespace pfx::driver::cuda::detail {

/// "<call>: <error name>: <error description>", the text of every CudaError this backend throws.
inline std::string describe(cudaError_t status, const std::string& call) {
  return call + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status);
}

/// Throws CudaError unless `status` is cudaSuccess. The failed call also left its status in CUDA's
/// per-thread "last error"; it is cleared here, so that the launch check after the next kernel
/// does not report this failure a second time under the kernel's name.
inline void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    throw CudaError(describe(status, call));
  }
}

/// check() for a call that moves or allocates `bytes`: the message reads "<call>(<bytes> bytes)".
inline void check(cudaError_t status, const char* call, std::size_t bytes) {
  if (status != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    throw CudaError(describe(status, std::string(call) + "(" + std::to_string(bytes) + " bytes)"));
  }
}

/// Checks the launch of `kernel` just queued: a bad configuration or a missing device image is
/// reported by cudaGetLastError, not by the launch itself.
inline void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) throw CudaError(describe(status, std::string("launch of kernel ") + kernel));
}

/// For destructors and unwinding, which must not throw: the status is dropped and CUDA's last
/// error cleared, so that it is not reported later under another call's name.
inline void ignore(cudaError_t status) noexcept {
  if (status != cudaSuccess) static_cast<void>(cudaGetLastError());
}

/// `count` elements of T in device memory, from one checked cudaMalloc; freed on destruction.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() noexcept = default;
  explicit DeviceArray(std::size_t count) : count_(count) {
    if (count == 0) return;  // cudaMalloc(0) may hand back null or not; own nothing instead
    void* raw = nullptr;
    check(cudaMalloc(&raw, count * sizeof(T)), "cudaMalloc", count * sizeof(T));
    data_ = static_cast<T*>(raw);
  }
  ~DeviceArray() {
    if (data_ != nullptr) ignore(cudaFree(data_));
  }
  DeviceArray(DeviceArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    DeviceArray(std::move(other)).swap(*this);
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  void swap(DeviceArray& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
  }

  [[nodiscard]] T* get() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace pfx::driver::cuda::detail
