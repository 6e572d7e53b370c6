// The KV state in device memory: one cudaMalloc of shape.bytes(), laid out as row_offset() says,
// with its own non-blocking stream on which every fill, copy and engine kernel is queued, so that
// stream order alone orders the writes and reads of one lane's rows. Also whether CUDA can run here.

#include <pfx/driver/cuda.hpp>
#include <pfx/driver/cuda/check.cuh>
#include <pfx/driver/errors.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace pfx::driver::cuda {
namespace {

using detail::check;
using detail::check_launch;
using detail::DeviceArray;

constexpr unsigned fill_threads = 256;
constexpr std::size_t max_fill_blocks = 4096;  // enough to fill the device; the kernel strides

/// Sets rows [from, from + rows) of each of `planes` planes to `value`. Plane p starts at
/// p * plane_floats; a row is `width` floats. Grid-stride, so any size fits one launch.
__global__ void fill_rows(float* data, std::size_t planes, std::size_t plane_floats, std::size_t from,
                          std::size_t rows, std::size_t width, float value) {
  const std::size_t per_plane = rows * width;
  const std::size_t total = planes * per_plane;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const std::size_t plane = i / per_plane;
    data[plane * plane_floats + from * width + i % per_plane] = value;
  }
}

void validate(const KvShape& shape) {
  check_shape(shape, "KvStateOnDevice");
}

}  // namespace

bool built_with_cuda() noexcept { return true; }

std::string unavailable_reason() {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess) {
    detail::ignore(status);  // reported in the returned text, not left for the next check
    return std::string("no CUDA device: ") + cudaGetErrorString(status);
  }
  if (devices < 1) return "no CUDA device: the driver reports 0 devices";
  return {};
}

struct KvStateOnDevice::Impl {
  KvShape shape;
  DeviceArray<float> rows;  // freed as a member, after ~Impl has drained and destroyed the stream
  cudaStream_t stream = nullptr;

  explicit Impl(const KvShape& s) : shape(s), rows(s.floats()) {
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }

  /// Work still queued may write the rows: it is waited for before they are freed.
  ~Impl() {
    if (stream != nullptr) {
      detail::ignore(cudaStreamSynchronize(stream));
      detail::ignore(cudaStreamDestroy(stream));
    }
  }

  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  /// Queues the fill of rows [from, to) of every layer's keys and values; checked by the caller.
  void queue_fill(std::size_t from, std::size_t to, float value) {
    const std::size_t total = shape.layers * 2 * (to - from) * shape.width;
    if (total == 0) return;  // a launch with no blocks is an error, and there is nothing to do
    const std::size_t wanted = (total + fill_threads - 1) / fill_threads;
    const auto blocks = static_cast<unsigned>(wanted < max_fill_blocks ? wanted : max_fill_blocks);
    fill_rows<<<blocks, fill_threads, 0, stream>>>(rows.get(), shape.layers * 2, shape.floats_per_plane(), from,
                                                   to - from, shape.width, value);
    check_launch("fill_rows");
  }

  void wait() const { check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }
};

KvStateOnDevice::KvStateOnDevice(const KvShape& shape) {
  validate(shape);
  impl_ = std::make_unique<Impl>(shape);
  // Every row starts poisoned, so that a row read before it is written shows up as NaN logits.
  impl_->queue_fill(0, shape.capacity, std::numeric_limits<float>::quiet_NaN());
  impl_->wait();
}

KvStateOnDevice::~KvStateOnDevice() = default;

const KvShape& KvStateOnDevice::shape() const noexcept { return impl_->shape; }

// Nothing to drop: the rows are pfx's (forget_rows poisons them where poisoning is on).
void KvStateOnDevice::forget(std::size_t from) { check_rows(impl_->shape, from, impl_->shape.capacity, "KvStateOnDevice::forget"); }

void KvStateOnDevice::fill(std::size_t from, std::size_t to, float value) {
  check_rows(impl_->shape, from, to, "KvStateOnDevice::fill");
  impl_->queue_fill(from, to, value);
}

std::vector<float> KvStateOnDevice::copy_rows(std::size_t from, std::size_t to) const {
  const KvShape& shape = impl_->shape;
  check_rows(shape, from, to, "KvStateOnDevice::copy_rows");
  // Each plane's rows [from, to) are one contiguous run on the device; the host copy packs the runs
  // in the order layer 0 keys, layer 0 values, layer 1 keys, ... as HostKvState::copy_rows does.
  const std::size_t run = (to - from) * shape.width;
  const std::size_t planes = shape.layers * 2;
  std::vector<float> out(planes * run);
  if (run != 0) {
    // A copy into pageable memory returns once it has landed, so no copy into `out` is left in
    // flight if a later one fails and `out` is destroyed.
    for (std::size_t plane = 0; plane < planes; ++plane) {
      const float* source = impl_->rows.get() + plane * shape.floats_per_plane() + from * shape.width;
      check(cudaMemcpyAsync(out.data() + plane * run, source, run * sizeof(float), cudaMemcpyDeviceToHost,
                            impl_->stream),
            "cudaMemcpyAsync", run * sizeof(float));
    }
  }
  impl_->wait();  // the copy, and every write queued before it, has finished
  return out;
}

void KvStateOnDevice::synchronize() { impl_->wait(); }

std::size_t KvStateOnDevice::memory_bytes() const noexcept { return impl_->shape.bytes(); }

float* KvStateOnDevice::device_data() const noexcept { return impl_->rows.get(); }

void* KvStateOnDevice::stream() const noexcept { return impl_->stream; }

}  // namespace pfx::driver::cuda
