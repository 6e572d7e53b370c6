// DcpReferenceEngine's computation (pfx/engines/dcp_reference_engine.hpp describes it) as CUDA
// kernels, with the reference engine's device functions (reference_kernels.cuh). Per call, on one
// stream: embed_rows; per layer project_qkv (the chunk's queries, and its K/V rows into a buffer of
// their own, as the host's DcpRows keeps them), then rank_partials for each rank this process holds
// (its own rows before the chunk, read from its shard by local row), in a group the all-gather of the
// partials through the host, then merge_attend (the merge, then finish_row); after the last layer
// store_owned writes each held rank's rows of the chunk into its shard, and compute_logits the last
// row's logits. Each row kernel runs one block per row, each sum is taken by one thread in a fixed
// order, and there are no atomics.

#include <pfx/engines/dcp_reference_engine_on_device.hpp>

#include <pfx/driver/cuda.hpp>
#include <pfx/driver/cuda/check.cuh>
#include <pfx/driver/cuda_shards.hpp>
#include <pfx/driver/errors.hpp>

#include "dcp_sharding.hpp"
#include "reference_kernels.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace pfx::engines::cuda {
namespace {

/// ShardLayout's owner and local, callable on the device (ShardLayout's are host code). The
/// static_asserts below pin them to the originals.
struct DeviceLayout {
  std::size_t ranks;
  std::size_t interleave;

  __host__ __device__ constexpr std::size_t owner(std::size_t position) const {
    return (position / interleave) % ranks;
  }
  __host__ __device__ constexpr std::size_t local(std::size_t position) const {
    return position / interleave / ranks * interleave + position % interleave;
  }
};

/// Whether DeviceLayout places positions [0, positions) and a few near the top of 64 bits as `layout` does.
constexpr bool places_as(const driver::ShardLayout& layout, std::size_t positions) {
  const DeviceLayout device{layout.ranks, layout.interleave};
  for (std::size_t p = 0; p < positions; ++p) {
    if (device.owner(p) != layout.owner(p) || device.local(p) != layout.local(p)) return false;
  }
  for (std::size_t p = ~std::size_t{0} - positions; p != 0; ++p) {
    if (device.owner(p) != layout.owner(p) || device.local(p) != layout.local(p)) return false;
  }
  return true;
}
static_assert(places_as({1, 1}, 64) && places_as({2, 1}, 64) && places_as({4, 4}, 256) && places_as({2, 16}, 256));
static_assert(places_as({3, 5}, 256) && places_as({8, 16}, 512) && places_as({4, 1}, 64));

/// One layer's rows of rank `rank`'s shard, by position: it holds the positions it owns, at their
/// local rows.
struct ShardRows {
  LayerRows rows;
  DeviceLayout layout;
  std::size_t rank;

  __device__ bool holds(std::size_t position) const { return layout.owner(position) == rank; }
  __device__ float* key(std::size_t position, std::size_t width) const {
    return rows.key(layout.local(position), width);
  }
  __device__ float* value(std::size_t position, std::size_t width) const {
    return rows.value(layout.local(position), width);
  }
};

/// One layer's K/V rows of the chunk that starts at `start`, by position, in their own buffer.
struct ChunkRows {
  LayerRows rows;
  std::size_t start;

  __device__ static constexpr bool holds(std::size_t /*position*/) { return true; }
  __device__ float* key(std::size_t position, std::size_t width) const { return rows.key(position - start, width); }
  __device__ float* value(std::size_t position, std::size_t width) const {
    return rows.value(position - start, width);
  }
};

/// A partial result as the ranks exchange it (the host engine's to_part): the thread's dimension of
/// the normalised output, and the log-sum-exp; over no rows 0 and -inf.
__device__ float part_output(const Partial& p) { return p.sum == 0.0f ? 0.0f : p.weighted / p.sum; }
__device__ float part_lse(const Partial& p) { return p.sum == 0.0f ? -INFINITY : p.max + logf(p.sum); }

/// For each query i < n of the chunk at `position`: rank `rows.rank`'s partial over its own rows
/// among A(position + i) before the chunk, into parts[i * (width + 1) ...]: width floats of
/// normalised output, then the log-sum-exp. Shared: RowScratch.
__global__ void __launch_bounds__(max_row_threads)
    rank_partials(float* parts, const float* q, ShardRows rows, std::size_t n, std::size_t position, Dims dims,
                  float scale) {
  extern __shared__ float shared[];
  const RowScratch s = carve(shared, dims.width, dims.hidden);
  const std::size_t t = threadIdx.x;
  for (std::size_t i = blockIdx.x; i < n; i += gridDim.x) {
    load_row(s.q, q + i * dims.width, dims.width);
    __syncthreads();
    const Partial partial = reduce_rows(s.q, rows, Attended(position + i), 0, position, dims.width, scale, s);
    float* part = parts + i * (dims.width + 1);
    if (t < dims.width) part[t] = part_output(partial);
    if (t == 0) part[dims.width] = part_lse(partial);
    __syncthreads();  // s.q is reloaded for the block's next row
  }
}

/// For each row i < n of the chunk at `position`: the host engine's merge of the `ranks` partials of
/// parts ([rank][query][width + 1]) in rank order, then of the chunk's own causal part (A(p) within
/// [position, p]), a part over no rows skipped (it adds exactly nothing); then finish_row. Reads q[i]
/// and the chunk's K/V rows; writes only h[i]. Shared: RowScratch.
__global__ void __launch_bounds__(max_row_threads)
    merge_attend(float* h, const float* q, const float* parts, ChunkRows chunk, LayerWeights w, std::size_t n,
                 std::size_t position, std::size_t ranks, Dims dims, float scale) {
  extern __shared__ float shared[];
  const RowScratch s = carve(shared, dims.width, dims.hidden);
  const std::size_t t = threadIdx.x;
  const std::size_t part_floats = dims.width + 1;
  for (std::size_t i = blockIdx.x; i < n; i += gridDim.x) {
    load_row(s.h, h + i * dims.width, dims.width);
    load_row(s.q, q + i * dims.width, dims.width);
    __syncthreads();
    const Partial own = reduce_rows(s.q, chunk, Attended(position + i), position, position + i + 1, dims.width,
                                    scale, s);
    // Part r < ranks is rank r's; part `ranks` the chunk's own. Every thread computes the same
    // weights in the same order; each adds its own dimension.
    const auto lse_of = [&](std::size_t r) {
      return r < ranks ? parts[(r * n + i) * part_floats + dims.width] : part_lse(own);
    };
    const auto output_of = [&](std::size_t r) {
      return r < ranks ? parts[(r * n + i) * part_floats + t] : part_output(own);
    };
    float m = -INFINITY;
    for (std::size_t r = 0; r <= ranks; ++r) {
      const float lse = lse_of(r);
      m = m < lse ? lse : m;  // std::max(m, lse)
    }
    float total = 0.0f;
    float out = 0.0f;
    for (std::size_t r = 0; r <= ranks; ++r) {
      const float lse = lse_of(r);
      if (lse == -INFINITY) continue;
      const float weight = expf(lse - m);
      total += weight;
      if (t < dims.width) out += weight * output_of(r);
    }
    if (t < dims.width) s.o[t] = out / total;
    __syncthreads();
    finish_row(s, w, dims);
    for (std::size_t r = t; r < dims.width; r += blockDim.x) h[i * dims.width + r] = s.h[r];
    __syncthreads();  // s.h is reloaded for the block's next row
  }
}

/// Copies the rows of the chunk at `position` (n of them) that `shard.rank` owns into its shard, at
/// their local rows. One block per row.
__global__ void __launch_bounds__(max_row_threads)
    store_owned(ShardRows shard, ChunkRows chunk, std::size_t n, std::size_t position, std::size_t width) {
  for (std::size_t i = blockIdx.x; i < n; i += gridDim.x) {
    const std::size_t p = position + i;
    if (!shard.holds(p)) continue;
    for (std::size_t d = threadIdx.x; d < width; d += blockDim.x) {
      shard.key(p, width)[d] = chunk.key(p, width)[d];
      shard.value(p, width)[d] = chunk.value(p, width)[d];
    }
  }
}

constexpr const char* engine_name = "DcpReferenceEngineOnDevice";

/// Makes `device` current.
void use_device(int device) { check(cudaSetDevice(device), "cudaSetDevice"); }

/// The device of the engine: the current one, or for one rank of a group, rank mod the visible
/// devices. Checks the layout first, so a bad one is std::invalid_argument before any CUDA call.
int engine_device(const driver::ShardLayout& layout, const driver::Collective* group) {
  check_dcp_layout(engine_name, layout, group);
  const std::string why_not = driver::cuda::unavailable_reason();
  if (!why_not.empty()) throw driver::CudaError(why_not);
  int device = 0;
  if (group == nullptr) {
    check(cudaGetDevice(&device), "cudaGetDevice");
  } else {
    device = static_cast<int>(group->rank() % driver::cuda::visible_devices());
  }
  use_device(device);
  return device;
}

}  // namespace

struct DcpReferenceEngineOnDevice::Impl {
  driver::ShardLayout layout;
  driver::Collective* group;  // null: the single controller
  int device;
  DeviceModel model;

  // Scratch of the current call, grown on demand. No call returns, normally or by an exception,
  // while a kernel may still use them.
  RowBuffers buffers;
  DeviceArray<float> chunk;  // the chunk's K/V rows: [layer][plane][row][width]
  DeviceArray<float> parts;  // every rank's partials: [rank][query][width + 1]
  std::vector<float> mine;   // this rank's partials, on the host
  std::vector<float> all;    // every rank's, as all_gather returns them

  Impl(const ReferenceModelShape& shape, const driver::ShardLayout& l, driver::Collective* g)
      : layout(l), group(g), device(engine_device(l, g)), model(shape) {}

  [[nodiscard]] std::size_t part_floats() const { return model.shape.width + 1; }

  /// The shards of `kv` this process holds, by rank (null for the others' in a group), after
  /// checking that `kv` is one this engine made for its layout and rank, on its device.
  std::vector<driver::cuda::KvStateOnDevice*> shards_of(driver::KvState& kv) const {
    std::vector<driver::cuda::KvStateOnDevice*> shards =
        held_shards<driver::cuda::KvStateOnDevice>(engine_name, kv, layout, group);
    for (const driver::cuda::KvStateOnDevice* shard : shards) {
      if (shard == nullptr || shard->device_data() == nullptr) continue;  // no rows: nothing to place
      cudaPointerAttributes where{};
      check(cudaPointerGetAttributes(&where, shard->device_data()), "cudaPointerGetAttributes");
      if (where.device != device) {
        throw std::invalid_argument(std::string(engine_name) + ": a shard's rows are on device " +
                                    std::to_string(where.device) + ", not on the engine's device " +
                                    std::to_string(device) + " (use make_kv_state)");
      }
    }
    return shards;
  }

  /// Room for a chunk of n rows in every scratch buffer.
  void reserve(std::size_t n) {
    const ReferenceModelShape& shape = model.shape;
    buffers.reserve(n, shape.width);
    if (chunk.size() < shape.layers * 2 * n * shape.width) chunk = DeviceArray<float>(shape.layers * 2 * n * shape.width);
    if (parts.size() < layout.ranks * n * part_floats()) parts = DeviceArray<float>(layout.ranks * n * part_floats());
    mine.resize(n * part_floats());
    all.resize(layout.ranks * n * part_floats());
  }

  /// Layer `layer` of the chunk's K/V rows, for a chunk of n rows at `position`.
  [[nodiscard]] ChunkRows chunk_rows(std::size_t layer, std::size_t n, std::size_t position) const {
    float* base = chunk.get() + layer * 2 * n * model.shape.width;
    return {{base, base + n * model.shape.width}, position};
  }

  [[nodiscard]] ShardRows shard_rows(const driver::cuda::KvStateOnDevice& shard, std::size_t layer,
                                     std::size_t rank) const {
    return {layer_rows(shard, layer), {layout.ranks, layout.interleave}, rank};
  }

  /// Computes the chunk at `position`, writes each held rank's rows of it, and the last row's logits
  /// into `out`. Waits for the stream before returning, and before rethrowing a failure, so the
  /// scratch buffers are idle whenever no call is running.
  void run(std::span<driver::cuda::KvStateOnDevice* const> shards, std::span<const token> tokens,
           std::size_t position, std::span<float> out) {
    use_device(device);
    // Work queued on a shard's own stream (a fill, a forget) is done before this call reads it.
    for (driver::cuda::KvStateOnDevice* shard : shards) {
      if (shard != nullptr) check(cudaStreamSynchronize(static_cast<cudaStream_t>(shard->stream())), "cudaStreamSynchronize");
    }
    reserve(tokens.size());
    // The call's stream: the first held shard's (shards_of found at least one).
    const driver::cuda::KvStateOnDevice* first = nullptr;
    for (const driver::cuda::KvStateOnDevice* shard : shards) {
      if (first == nullptr && shard != nullptr) first = shard;
    }
    const auto stream = static_cast<cudaStream_t>(first->stream());
    try {
      queue(shards, stream, tokens, position);
      const float* last = buffers.h.get() + (tokens.size() - 1) * model.shape.width;
      model.queue_logits(stream, last, out);
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    } catch (...) {
      driver::cuda::detail::ignore(cudaStreamSynchronize(stream));
      throw;
    }
  }

  /// Queues every kernel of one call but the logits' on `stream`; in a group, waits for it at each
  /// layer's all-gather.
  void queue(std::span<driver::cuda::KvStateOnDevice* const> shards, cudaStream_t stream,
             std::span<const token> tokens, std::size_t position) {
    const std::size_t n = tokens.size();
    const std::size_t block = n * part_floats();  // one rank's partials
    float* h = buffers.h.get();
    float* q = buffers.q.get();
    model.queue_embed(stream, buffers.tokens.get(), h, tokens, position);
    for (std::size_t layer = 0; layer < model.shape.layers; ++layer) {
      const ChunkRows own = chunk_rows(layer, n, position);
      model.queue_project(stream, h, q, own.rows, layer, n, 0);
      for (std::size_t r = 0; r < layout.ranks; ++r) {  // single controller: every rank's, in turn
        if (shards[r] == nullptr) continue;
        rank_partials<<<row_blocks(n), model.threads, model.row_shared_bytes, stream>>>(
            parts.get() + r * block, q, shard_rows(*shards[r], layer, r), n, position, model.dims, model.scale);
        check_launch("rank_partials");
      }
      if (group != nullptr) exchange(stream, block);
      merge_attend<<<row_blocks(n), model.threads, model.row_shared_bytes, stream>>>(
          h, q, parts.get(), own, model.layers[layer], n, position, layout.ranks, model.dims, model.scale);
      check_launch("merge_attend");
    }
    // Each rank writes its own rows of the chunk, and no other.
    for (std::size_t r = 0; r < layout.ranks; ++r) {
      if (shards[r] == nullptr) continue;
      for (std::size_t layer = 0; layer < model.shape.layers; ++layer) {
        store_owned<<<row_blocks(n), model.threads, 0, stream>>>(shard_rows(*shards[r], layer, r),
                                                                 chunk_rows(layer, n, position), n, position,
                                                                 model.shape.width);
        check_launch("store_owned");
      }
    }
  }

  /// This rank's partials to the host once the stream has computed them, every rank's through the
  /// all-gather, and back into `parts` in rank order.
  void exchange(cudaStream_t stream, std::size_t block) {
    const float* own = parts.get() + group->rank() * block;
    check(cudaMemcpyAsync(mine.data(), own, block * sizeof(float), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync",
          block * sizeof(float));
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    group->all_gather(std::span<const float>(mine.data(), block), std::span<float>(all.data(), layout.ranks * block));
    // From pageable memory the copy returns once `all` is staged, so the next layer may rewrite it.
    check(cudaMemcpyAsync(parts.get(), all.data(), layout.ranks * block * sizeof(float), cudaMemcpyHostToDevice,
                          stream),
          "cudaMemcpyAsync", layout.ranks * block * sizeof(float));
  }
};

DcpReferenceEngineOnDevice::DcpReferenceEngineOnDevice(const ReferenceModelShape& shape,
                                                       const driver::ShardLayout& layout, driver::Collective* group)
    : impl_(std::make_unique<Impl>(shape, layout, group)) {}

DcpReferenceEngineOnDevice::~DcpReferenceEngineOnDevice() = default;

std::size_t DcpReferenceEngineOnDevice::chunk() const noexcept { return impl_->model.shape.chunk; }

std::size_t DcpReferenceEngineOnDevice::vocab() const noexcept { return impl_->model.shape.vocab; }

const ReferenceModelShape& DcpReferenceEngineOnDevice::model() const noexcept { return impl_->model.shape; }

std::optional<driver::ShardLayout> DcpReferenceEngineOnDevice::context_parallel() const noexcept {
  return impl_->layout;
}

bool DcpReferenceEngineOnDevice::exchanges() const noexcept {
  return impl_->group != nullptr && impl_->group->size() > 1;
}

std::unique_ptr<driver::KvState> DcpReferenceEngineOnDevice::make_kv_state(std::size_t capacity) const {
  use_device(impl_->device);  // the shards' rows are allocated on the engine's device
  return make_dcp_kv_state<driver::cuda::KvStateOnDevice>(impl_->model.shape, impl_->layout, impl_->group, capacity);
}

void DcpReferenceEngineOnDevice::prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
                                         std::span<float> logits) {
  const std::vector<driver::cuda::KvStateOnDevice*> shards = impl_->shards_of(kv);
  check_call(engine_name, impl_->model.shape, kv.shape(), tokens, position, logits);
  impl_->run(shards, tokens, position, logits);
}

void DcpReferenceEngineOnDevice::decode(driver::KvState& kv, token next, std::size_t position,
                                        std::span<float> logits) {
  prefill(kv, std::span<const token>(&next, 1), position, logits);
}

}  // namespace pfx::engines::cuda
