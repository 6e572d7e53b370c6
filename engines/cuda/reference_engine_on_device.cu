// The reference engine (pfx/engines/reference_model.hpp) as CUDA kernels, queued on the KV state's
// stream. It ports HostReferenceEngine step for step: the same weights, the same prefill split of
// attention into the rows before the chunk and the chunk's own rows (two-pass partial softmax
// results merged by log-sum-exp), the same one-pass online softmax for decode. Every sum is taken
// by one thread in a fixed order and there are no atomics, so a run is a deterministic function of
// its inputs on one device; the floats need not equal the host engine's. A query at position p
// reads the rows A(p) = {p} and every p - 2^k >= 0 (attends() of reference_model.hpp), in ascending
// order, as the host does: O(log p) rows per token.
//
// Kernels, per call: embed_rows, then per layer project_qkv (writes the chunk's K/V rows) and
// prefill_attend or decode_attend (reads them: the kernel boundary orders the writes before the
// reads), then compute_logits for the last row. Row kernels run one block per row. The kernels and
// device functions it shares with the DCP engine are in reference_kernels.cuh.

#include <pfx/engines/reference_engine_on_device.hpp>

#include <pfx/driver/cuda.hpp>
#include <pfx/driver/cuda/check.cuh>

#include "reference_kernels.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>

namespace pfx::engines::cuda {
namespace {

/// The log-sum-exp merge of the host's `merge`, for one dimension: rows before the chunk, then the
/// chunk's own rows. An empty `before` (sum 0) contributes nothing.
__device__ float merge(const Partial& before, const Partial& own) {
  const float max = before.max < own.max ? own.max : before.max;  // std::max(before.max, own.max)
  const float before_scale = before.sum == 0.0f ? 0.0f : expf(before.max - max);
  const float own_scale = expf(own.max - max);
  const float total = before.sum * before_scale + own.sum * own_scale;
  return (before.weighted * before_scale + own.weighted * own_scale) / total;
}

/// Attention of `q` over the rows of `attended` in one online-softmax pass in ascending row order, as
/// HostReferenceEngine::decode: each tile's scores are computed in parallel into `tile`, then every
/// thread folds them in row order into its own copy of the running max and sum (the same in every
/// thread) and its dimension's output. Returns the normalised output of the thread's dimension
/// (meaningless past the width). Every thread of the block must call it: it has barriers.
__device__ float online_attention(const float* q, const LayerRows& rows, const Attended& attended,
                                  std::size_t width, float scale, const RowScratch& s) {
  const std::size_t t = threadIdx.x;
  const std::size_t count = attended.count();
  float max = -INFINITY;
  float sum = 0.0f;
  float out = 0.0f;
  for (std::size_t base = 0; base < count; base += blockDim.x) {
    if (base + t < count) s.tile[t] = score(q, rows, attended.at(base + t), width, scale);
    __syncthreads();
    const std::size_t tile_rows = count - base < blockDim.x ? count - base : blockDim.x;
    for (std::size_t k = 0; k < tile_rows; ++k) {
      const float x = s.tile[k];
      const float new_max = x > max ? x : max;
      const float rescale = expf(max - new_max);
      const float weight = expf(x - new_max);
      sum = sum * rescale + weight;
      if (t < width) out = out * rescale + weight * rows.values[attended.at(base + k) * width + t];
      max = new_max;
    }
    __syncthreads();  // the tile is rewritten by the next round
  }
  return out / sum;
}

/// For each row i < n of a chunk that starts at `position`: attention over the attended rows
/// A(position + i) within [0, position) and within the chunk's rows [position, position + i],
/// merged; then finish_row. Reads q[i] and K/V rows up to position + i, all written by earlier
/// kernels; writes only h[i]. Shared: RowScratch.
__global__ void __launch_bounds__(max_row_threads)
    prefill_attend(float* h, const float* q, LayerRows rows, LayerWeights w, std::size_t n, std::size_t position,
                   Dims dims, float scale) {
  extern __shared__ float shared[];
  const RowScratch s = carve(shared, dims.width, dims.hidden);
  const std::size_t t = threadIdx.x;
  for (std::size_t i = blockIdx.x; i < n; i += gridDim.x) {
    load_row(s.h, h + i * dims.width, dims.width);
    load_row(s.q, q + i * dims.width, dims.width);
    __syncthreads();
    const Attended attended(position + i);
    const Partial before = reduce_rows(s.q, rows, attended, 0, position, dims.width, scale, s);
    const Partial own = reduce_rows(s.q, rows, attended, position, position + i + 1, dims.width, scale, s);
    if (t < dims.width) s.o[t] = merge(before, own);
    __syncthreads();
    finish_row(s, w, dims);
    for (std::size_t r = t; r < dims.width; r += blockDim.x) h[i * dims.width + r] = s.h[r];
    __syncthreads();  // s.h is reloaded for the block's next row
  }
}

/// The decode row at `position`: attention over its attended rows A(position) in one online-softmax
/// pass, then finish_row. One block. Shared: RowScratch.
__global__ void __launch_bounds__(max_row_threads)
    decode_attend(float* h, const float* q, LayerRows rows, LayerWeights w, std::size_t position, Dims dims,
                  float scale) {
  extern __shared__ float shared[];
  const RowScratch s = carve(shared, dims.width, dims.hidden);
  load_row(s.h, h, dims.width);
  load_row(s.q, q, dims.width);
  __syncthreads();
  const float out = online_attention(s.q, rows, Attended(position), dims.width, scale, s);
  if (threadIdx.x < dims.width) s.o[threadIdx.x] = out;
  __syncthreads();
  finish_row(s, w, dims);
  for (std::size_t r = threadIdx.x; r < dims.width; r += blockDim.x) h[r] = s.h[r];
}

}  // namespace

struct ReferenceEngineOnDevice::Impl {
  DeviceModel model;
  // Rows of the current call. No call returns, normally or by an exception, while a kernel may
  // still use them, so the next call (maybe on another KV state's stream) may.
  RowBuffers buffers;

  explicit Impl(const ReferenceModelShape& s) : model(s) {}

  /// The device counterpart of reference::on_host_rows (reference_forward.hpp): checks the call and finds
  /// this engine's KV state on the device.
  driver::cuda::KvStateOnDevice& checked(driver::KvState& kv, std::span<const token> chunk, std::size_t position,
                           std::span<float> out) const {
    auto* device = dynamic_cast<driver::cuda::KvStateOnDevice*>(&kv);
    if (device == nullptr) {
      throw std::invalid_argument(
          "ReferenceEngineOnDevice: the KV state is not a driver::cuda::KvStateOnDevice (use make_kv_state)");
    }
    check_call("ReferenceEngineOnDevice", model.shape, device->shape(), chunk, position, out);
    return *device;
  }

  enum class Path { prefill, decode };

  /// Computes rows [position, position + chunk.size()) of `kv` and the last row's logits into `out`.
  /// Waits for the stream before returning, and before rethrowing a failure, so the scratch buffers
  /// are idle whenever no call is running.
  void run(driver::cuda::KvStateOnDevice& kv, std::span<const token> chunk, std::size_t position, std::span<float> out,
           Path path) {
    buffers.reserve(chunk.size(), model.shape.width);
    const auto stream = static_cast<cudaStream_t>(kv.stream());
    try {
      queue(kv, stream, chunk, position, path);
      const float* last = buffers.h.get() + (chunk.size() - 1) * model.shape.width;
      model.queue_logits(stream, last, out);
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    } catch (...) {
      driver::cuda::detail::ignore(cudaStreamSynchronize(stream));
      throw;
    }
  }

  /// Queues the token upload and every kernel of one call but the logits' on `stream`.
  void queue(const driver::cuda::KvStateOnDevice& kv, cudaStream_t stream, std::span<const token> chunk,
             std::size_t position, Path path) {
    const std::size_t n = chunk.size();
    float* h = buffers.h.get();
    float* q = buffers.q.get();
    model.queue_embed(stream, buffers.tokens.get(), h, chunk, position);
    for (std::size_t layer = 0; layer < model.shape.layers; ++layer) {
      const LayerRows rows = layer_rows(kv, layer);
      // All of the chunk's K/V rows of this layer are written before any of its rows attends.
      model.queue_project(stream, h, q, rows, layer, n, position);
      const LayerWeights& w = model.layers[layer];
      if (path == Path::decode) {
        decode_attend<<<1, model.threads, model.row_shared_bytes, stream>>>(h, q, rows, w, position, model.dims,
                                                                            model.scale);
        check_launch("decode_attend");
      } else {
        prefill_attend<<<row_blocks(n), model.threads, model.row_shared_bytes, stream>>>(h, q, rows, w, n, position,
                                                                                        model.dims, model.scale);
        check_launch("prefill_attend");
      }
    }
  }
};

ReferenceEngineOnDevice::ReferenceEngineOnDevice(const ReferenceModelShape& shape)
    : impl_(std::make_unique<Impl>(shape)) {}

ReferenceEngineOnDevice::~ReferenceEngineOnDevice() = default;

std::size_t ReferenceEngineOnDevice::chunk() const noexcept { return impl_->model.shape.chunk; }

std::size_t ReferenceEngineOnDevice::vocab() const noexcept { return impl_->model.shape.vocab; }

const ReferenceModelShape& ReferenceEngineOnDevice::model() const noexcept { return impl_->model.shape; }

std::unique_ptr<driver::KvState> ReferenceEngineOnDevice::make_kv_state(std::size_t capacity) const {
  return std::make_unique<driver::cuda::KvStateOnDevice>(driver::KvShape{capacity, impl_->model.shape.layers, impl_->model.shape.width});
}

void ReferenceEngineOnDevice::prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
                                      std::span<float> logits) {
  driver::cuda::KvStateOnDevice& state = impl_->checked(kv, tokens, position, logits);
  impl_->run(state, tokens, position, logits, Impl::Path::prefill);
}

void ReferenceEngineOnDevice::decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) {
  const std::span<const token> one(&next, 1);
  driver::cuda::KvStateOnDevice& state = impl_->checked(kv, one, position, logits);
  impl_->run(state, one, position, logits, Impl::Path::decode);
}

}  // namespace pfx::engines::cuda
