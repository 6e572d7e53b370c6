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
// reads), then compute_logits for the last row. Row kernels run one block per row.

#include <pfx/engines/reference_engine_on_device.hpp>

#include <pfx/driver/cuda.hpp>
#include <pfx/driver/cuda/check.cuh>
#include <pfx/driver/errors.hpp>
#include <pfx/driver/kv_shape.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace pfx::engines::cuda {
namespace {

using driver::cuda::detail::check;
using driver::cuda::detail::check_launch;
using driver::cuda::detail::DeviceArray;

/// Row kernels use between min_row_threads and max_row_threads threads, at least one per model
/// dimension (validate() caps the width at 1024), so that each thread owns at most one dimension
/// of the attention output.
constexpr unsigned min_row_threads = 128;
constexpr unsigned max_row_threads = 1024;
constexpr std::size_t max_row_blocks = 65535;  // row kernels stride over rows past this
constexpr unsigned logit_threads = 256;
constexpr std::size_t max_logit_blocks = 4096;  // compute_logits strides over the vocabulary

/// The model's sizes, as the kernels need them.
struct Dims {
  std::size_t width;
  std::size_t hidden;
  std::size_t vocab;
};

/// One layer's weights in device memory, row-major as in ReferenceWeights::Layer.
struct LayerWeights {
  const float* wq;
  const float* wk;
  const float* wv;
  const float* wo;
  const float* w1;  // hidden x width
  const float* w2;  // width x hidden
};

/// One layer's rows of a KV state: row j of the keys starts at keys + j * width (row_offset()'s
/// layout keeps a layer's keys, and its values, contiguous).
struct LayerRows {
  float* keys;
  float* values;
};

/// position_code() of reference_model.hpp with the same integer arithmetic, callable on the device
/// (the header's constexpr function is host code). The static_asserts below pin it to the original.
__host__ __device__ constexpr float device_position_code(std::uint64_t position, std::uint64_t dimension) {
  std::uint64_t z = position * 0x9E3779B97F4A7C15ULL + dimension * 0xBF58476D1CE4E5B9ULL + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) / static_cast<float>(1ULL << 24) * 0.5f - 0.25f;
}
static_assert(device_position_code(0, 0) == position_code(0, 0));
static_assert(device_position_code(1, 15) == position_code(1, 15));
static_assert(device_position_code(4093, 1023) == position_code(4093, 1023));
static_assert(device_position_code(~0ULL, 7) == position_code(~0ULL, 7));

/// As std::max(x, 0.0f) on the host: NaN stays NaN (fmaxf would drop it and hide a poisoned row).
__device__ float relu(float x) { return x < 0.0f ? 0.0f : x; }

/// Sum over c of m[c] * x[c], in order of c.
__device__ float dot(const float* m, const float* x, std::size_t n) {
  float sum = 0.0f;
  for (std::size_t c = 0; c < n; ++c) sum += m[c] * x[c];
  return sum;
}

/// out = rmsnorm(x), eps 1e-6, by the whole block: thread 0 sums the squares in order into `slot`
/// (one shared float). `x` must be visible to thread 0. Ends with a barrier, so `out` is ready.
__device__ void rmsnorm_block(float* out, const float* x, std::size_t width, float* slot) {
  if (threadIdx.x == 0) {
    float squares = 0.0f;
    for (std::size_t d = 0; d < width; ++d) squares += x[d] * x[d];
    *slot = 1.0f / sqrtf(squares / static_cast<float>(width) + 1e-6f);
  }
  __syncthreads();
  const float inverse = *slot;
  for (std::size_t d = threadIdx.x; d < width; d += blockDim.x) out[d] = x[d] * inverse;
  __syncthreads();
}

/// The largest `value` over the block's threads, the same in every thread. `>` skips NaN, as the
/// host's `if (score > max)` does, so the result does not depend on how rows were split.
__device__ float block_max(float value, float* per_thread) {
  per_thread[threadIdx.x] = value;
  __syncthreads();
  float max = -INFINITY;
  for (unsigned t = 0; t < blockDim.x; ++t) {
    if (per_thread[t] > max) max = per_thread[t];
  }
  __syncthreads();  // every thread has read per_thread before anyone rewrites it
  return max;
}

/// scale * (q . key row j), the product summed in order of dimension, as the host does.
__device__ float score(const float* q, const LayerRows& rows, std::size_t j, std::size_t width, float scale) {
  return dot(rows.keys + j * width, q, width) * scale;
}

/// A softmax-weighted sum over some rows, not yet normalised, as one thread holds it: the max
/// score, the sum of exp(score - max), and for the thread's own dimension the sum of
/// exp(score - max) * value. Over no rows: -inf, 0, 0.
struct Partial {
  float max;
  float sum;
  float weighted;
};

/// One block's shared memory for the row it computes.
struct RowScratch {
  float* h;           // width: the row's hidden state
  float* q;           // width: its query
  float* o;           // width: its attention output
  float* a;           // width: a normalised vector
  float* u;           // hidden: the MLP's activations
  float* tile;        // blockDim.x: one float per row of a tile of K/V rows
  float* per_thread;  // blockDim.x: one float per thread, for block_max
  float* slot;        // 1: rmsnorm's scale
};

/// Floats of RowScratch, for the launch. With validate()'s caps (width 1024, hidden 4096) that is at
/// most 40 KiB, within the 48 KiB a launch may ask for without opting in.
constexpr std::size_t row_scratch_floats(std::size_t width, std::size_t hidden, unsigned threads) {
  return 4 * width + hidden + 2 * std::size_t{threads} + 1;
}

__device__ RowScratch carve(float* shared, std::size_t width, std::size_t hidden) {
  RowScratch s{};
  s.h = shared;
  s.q = s.h + width;
  s.o = s.q + width;
  s.a = s.o + width;
  s.u = s.a + width;
  s.tile = s.u + hidden;
  s.per_thread = s.tile + blockDim.x;
  s.slot = s.per_thread + blockDim.x;
  return s;
}

/// The rows the query at position p attends to, A(p), in ascending order: entry i < top is
/// p - 2^(top - 1 - i) (top = the bits of p: p - 2^floor(log2 p) first, p - 1 last), entry top is
/// p itself. The host's attended_within lists the same rows in the same order.
struct Attended {
  std::size_t p;
  unsigned top;

  __host__ __device__ constexpr explicit Attended(std::size_t position) : p(position), top(0) {
    for (std::size_t x = position; x > 0; x >>= 1) ++top;
  }
  __host__ __device__ constexpr std::size_t count() const { return std::size_t{top} + 1; }
  __host__ __device__ constexpr std::size_t at(std::size_t i) const {
    return i < top ? p - (std::size_t{1} << (top - 1 - i)) : p;
  }
  /// The first entry at or past row `row` (count() when none).
  __host__ __device__ constexpr std::size_t first_at_or_past(std::size_t row) const {
    std::size_t i = 0;
    while (i < count() && at(i) < row) ++i;
    return i;
  }
};

/// Whether Attended(p) lists exactly the rows attends(p, j) of reference_model.hpp, in ascending order.
constexpr bool lists_the_attended_rows(std::size_t p) {
  const Attended attended(p);
  std::size_t i = 0;
  for (std::size_t j = 0; j <= p; ++j) {
    if (!attends(p, j)) continue;
    if (i >= attended.count() || attended.at(i) != j) return false;
    ++i;
  }
  return i == attended.count();
}
static_assert(lists_the_attended_rows(0) && lists_the_attended_rows(1) && lists_the_attended_rows(2));
static_assert(lists_the_attended_rows(7) && lists_the_attended_rows(8) && lists_the_attended_rows(1000));
static_assert(Attended(1000).first_at_or_past(1000 - 8) == Attended(1000).count() - 5);  // 992 996 998 999 1000

/// The partial result of query `q` over the rows of `attended` within [from, to), in two passes as
/// the host's reduce: the max score, then the sums in ascending row order. Each tile of blockDim.x
/// rows has its weights computed in parallel, one row per thread, into `tile`; then every thread
/// adds the tile in row order to its own copy of the sum (the same in every thread) and to its
/// dimension's weighted value. Every thread of the block must call it: it has barriers.
__device__ Partial reduce_rows(const float* q, const LayerRows& rows, const Attended& attended, std::size_t from,
                               std::size_t to, std::size_t width, float scale, const RowScratch& s) {
  const std::size_t t = threadIdx.x;
  const std::size_t first = attended.first_at_or_past(from);
  const std::size_t end = attended.first_at_or_past(to);
  float local_max = -INFINITY;
  for (std::size_t i = first + t; i < end; i += blockDim.x) {
    const float x = score(q, rows, attended.at(i), width, scale);
    if (x > local_max) local_max = x;
  }
  Partial p{block_max(local_max, s.per_thread), 0.0f, 0.0f};
  for (std::size_t base = first; base < end; base += blockDim.x) {
    if (base + t < end) s.tile[t] = expf(score(q, rows, attended.at(base + t), width, scale) - p.max);
    __syncthreads();
    const std::size_t count = end - base < blockDim.x ? end - base : blockDim.x;
    for (std::size_t k = 0; k < count; ++k) {
      const float weight = s.tile[k];
      p.sum += weight;
      if (t < width) p.weighted += weight * rows.values[attended.at(base + k) * width + t];
    }
    __syncthreads();  // the tile is rewritten by the next round
  }
  return p;
}

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

/// The rest of a layer for the row in `s`, whose attention output is in s.o:
/// h += Wo o; h += W2 relu(W1 rmsnorm(h)). Every thread of the block must call it: it has barriers,
/// and ends with one, so s.h is final.
__device__ void finish_row(const RowScratch& s, const LayerWeights& w, const Dims& dims) {
  for (std::size_t r = threadIdx.x; r < dims.width; r += blockDim.x) {
    s.h[r] += dot(w.wo + r * dims.width, s.o, dims.width);
  }
  __syncthreads();
  rmsnorm_block(s.a, s.h, dims.width, s.slot);
  for (std::size_t r = threadIdx.x; r < dims.hidden; r += blockDim.x) {
    s.u[r] = relu(dot(w.w1 + r * dims.width, s.a, dims.width));
  }
  __syncthreads();
  for (std::size_t r = threadIdx.x; r < dims.width; r += blockDim.x) {
    s.h[r] += dot(w.w2 + r * dims.hidden, s.u, dims.hidden);
  }
  __syncthreads();
}

/// Copies `width` floats from global to shared memory, strided over the block (no barrier).
__device__ void load_row(float* to, const float* from, std::size_t width) {
  for (std::size_t d = threadIdx.x; d < width; d += blockDim.x) to[d] = from[d];
}

/// h[i] = embed[tokens[i]] + position_code(position + i) for each row i < n. Tokens were checked to
/// be in the vocabulary.
__global__ void __launch_bounds__(max_row_threads)
    embed_rows(float* h, const token* tokens, std::size_t n, std::size_t position, const float* embed,
               std::size_t width) {
  for (std::size_t i = blockIdx.x; i < n; i += gridDim.x) {
    const float* e = embed + static_cast<std::size_t>(tokens[i]) * width;
    for (std::size_t d = threadIdx.x; d < width; d += blockDim.x) {
      h[i * width + d] = e[d] + device_position_code(position + i, d);
    }
  }
}

/// For each row i < n: a = rmsnorm(h[i]); q[i] = Wq a; K and V row position + i := Wk a, Wv a.
/// Shared memory: width + 1 floats.
__global__ void __launch_bounds__(max_row_threads)
    project_qkv(const float* h, float* q, LayerRows rows, LayerWeights w, std::size_t n, std::size_t position,
                std::size_t width) {
  extern __shared__ float shared[];
  float* a = shared;
  float* slot = shared + width;
  for (std::size_t i = blockIdx.x; i < n; i += gridDim.x) {
    rmsnorm_block(a, h + i * width, width, slot);
    float* key = rows.keys + (position + i) * width;
    float* value = rows.values + (position + i) * width;
    for (std::size_t r = threadIdx.x; r < width; r += blockDim.x) {
      q[i * width + r] = dot(w.wq + r * width, a, width);
      key[r] = dot(w.wk + r * width, a, width);
      value[r] = dot(w.wv + r * width, a, width);
    }
    __syncthreads();  // `a` is rewritten for the block's next row
  }
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

/// logits[r] = unembed[r] . rmsnorm(h) for each r < vocab. Every block normalises h itself (the
/// same floats in each). Shared memory: width + 1 floats.
__global__ void compute_logits(float* logits, const float* h, const float* unembed, Dims dims) {
  extern __shared__ float shared[];
  float* a = shared;
  rmsnorm_block(a, h, dims.width, shared + dims.width);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t r = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < dims.vocab; r += stride) {
    logits[r] = dot(unembed + r * dims.width, a, dims.width);
  }
}

/// Threads of a row kernel: a multiple of 32 that covers the width, at least min_row_threads.
unsigned row_threads(std::size_t width) {
  const std::size_t warps = (width + 31) / 32 * 32;
  return static_cast<unsigned>(warps < min_row_threads ? min_row_threads : warps);
}

unsigned row_blocks(std::size_t n) { return static_cast<unsigned>(n < max_row_blocks ? n : max_row_blocks); }

/// Appends `m` to `all`; returns where it starts.
std::size_t append(std::vector<float>& all, const std::vector<float>& m) {
  const std::size_t at = all.size();
  all.insert(all.end(), m.begin(), m.end());
  return at;
}

}  // namespace

struct ReferenceEngineOnDevice::Impl {
  ReferenceModelShape shape;
  Dims dims;
  float scale;  // 1 / sqrt(width), computed as the host engine does
  unsigned threads;
  std::size_t row_shared_bytes;
  std::size_t vector_shared_bytes;  // project_qkv and compute_logits: width + 1 floats

  DeviceArray<float> weights;  // every weight, in one allocation
  const float* embed = nullptr;
  const float* unembed = nullptr;
  std::vector<LayerWeights> layers;
  DeviceArray<float> logits;  // vocab floats

  // Rows of the current call, grown on demand. No call returns, normally or by an exception, while
  // a kernel may still use them, so the next call (maybe on another KV state's stream) may.
  DeviceArray<token> tokens;
  DeviceArray<float> h;
  DeviceArray<float> q;

  explicit Impl(const ReferenceModelShape& s)
      : shape(s),
        dims{s.width, s.hidden, s.vocab},
        scale(1.0f / std::sqrt(static_cast<float>(s.width))),
        threads(row_threads(s.width)),
        row_shared_bytes(row_scratch_floats(s.width, s.hidden, threads) * sizeof(float)),
        vector_shared_bytes((s.width + 1) * sizeof(float)) {
    upload(ReferenceWeights::generate(s));  // validates the shape before any CUDA call
    logits = DeviceArray<float>(s.vocab);
  }

  /// Copies every weight into one allocation and records where each matrix starts.
  void upload(const ReferenceWeights& w) {
    std::vector<float> all;
    const std::size_t embed_at = append(all, w.embed);
    std::vector<std::size_t> layer_at;
    for (const ReferenceWeights::Layer& layer : w.layers) {
      for (const std::vector<float>* m : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w1, &layer.w2}) {
        layer_at.push_back(append(all, *m));
      }
    }
    const std::size_t unembed_at = append(all, w.unembed);

    weights = DeviceArray<float>(all.size());
    check(cudaMemcpy(weights.get(), all.data(), all.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy",
          all.size() * sizeof(float));
    const float* base = weights.get();
    embed = base + embed_at;
    unembed = base + unembed_at;
    for (std::size_t l = 0; l < w.layers.size(); ++l) {
      const std::size_t* at = &layer_at[l * 6];
      layers.push_back({base + at[0], base + at[1], base + at[2], base + at[3], base + at[4], base + at[5]});
    }
  }

  /// The device counterpart of reference::on_host_rows (reference_forward.hpp): checks the call and finds
  /// this engine's KV state on the device.
  driver::cuda::KvStateOnDevice& checked(driver::KvState& kv, std::span<const token> chunk, std::size_t position,
                           std::span<float> out) const {
    auto* device = dynamic_cast<driver::cuda::KvStateOnDevice*>(&kv);
    if (device == nullptr) {
      throw std::invalid_argument(
          "ReferenceEngineOnDevice: the KV state is not a driver::cuda::KvStateOnDevice (use make_kv_state)");
    }
    check_call("ReferenceEngineOnDevice", shape, device->shape(), chunk, position, out);
    return *device;
  }

  /// Room for n rows in the scratch buffers. Each grows on its own: after a failed allocation every
  /// buffer still holds as many elements as its size() says.
  void reserve(std::size_t n) {
    if (tokens.size() < n) tokens = DeviceArray<token>(n);
    if (h.size() < n * shape.width) h = DeviceArray<float>(n * shape.width);
    if (q.size() < n * shape.width) q = DeviceArray<float>(n * shape.width);
  }

  /// Layer `layer` of the KV state's rows.
  static LayerRows rows_of(const driver::cuda::KvStateOnDevice& kv, std::size_t layer) {
    float* base = kv.device_data();
    return {base + driver::row_offset(kv.shape(), layer, driver::Plane::key, 0),
            base + driver::row_offset(kv.shape(), layer, driver::Plane::value, 0)};
  }

  enum class Path { prefill, decode };

  /// Computes rows [position, position + chunk.size()) of `kv` and the last row's logits into `out`.
  /// Waits for the stream before returning, and before rethrowing a failure, so the scratch buffers
  /// are idle whenever no call is running.
  void run(driver::cuda::KvStateOnDevice& kv, std::span<const token> chunk, std::size_t position, std::span<float> out,
           Path path) {
    reserve(chunk.size());
    const auto stream = static_cast<cudaStream_t>(kv.stream());
    try {
      queue(kv, stream, chunk, position, path);
      check(cudaMemcpyAsync(out.data(), logits.get(), out.size() * sizeof(float), cudaMemcpyDeviceToHost, stream),
            "cudaMemcpyAsync", out.size() * sizeof(float));
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    } catch (...) {
      driver::cuda::detail::ignore(cudaStreamSynchronize(stream));
      throw;
    }
  }

  /// Queues the token upload and every kernel of one call on `stream`.
  void queue(const driver::cuda::KvStateOnDevice& kv, cudaStream_t stream, std::span<const token> chunk, std::size_t position,
             Path path) {
    const std::size_t n = chunk.size();
    // From pageable memory the copy returns once `chunk` is staged, so the caller may reuse it.
    check(cudaMemcpyAsync(tokens.get(), chunk.data(), n * sizeof(token), cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync", n * sizeof(token));
    embed_rows<<<row_blocks(n), threads, 0, stream>>>(h.get(), tokens.get(), n, position, embed, shape.width);
    check_launch("embed_rows");
    for (std::size_t layer = 0; layer < shape.layers; ++layer) {
      const LayerRows rows = rows_of(kv, layer);
      // All of the chunk's K/V rows of this layer are written before any of its rows attends.
      project_qkv<<<row_blocks(n), threads, vector_shared_bytes, stream>>>(h.get(), q.get(), rows, layers[layer], n,
                                                                           position, shape.width);
      check_launch("project_qkv");
      if (path == Path::decode) {
        decode_attend<<<1, threads, row_shared_bytes, stream>>>(h.get(), q.get(), rows, layers[layer], position, dims,
                                                                scale);
        check_launch("decode_attend");
      } else {
        prefill_attend<<<row_blocks(n), threads, row_shared_bytes, stream>>>(h.get(), q.get(), rows, layers[layer], n,
                                                                             position, dims, scale);
        check_launch("prefill_attend");
      }
    }
    const std::size_t wanted = (shape.vocab + logit_threads - 1) / logit_threads;
    const auto blocks = static_cast<unsigned>(wanted < max_logit_blocks ? wanted : max_logit_blocks);
    const float* last = h.get() + (n - 1) * shape.width;
    compute_logits<<<blocks, logit_threads, vector_shared_bytes, stream>>>(logits.get(), last, unembed, dims);
    check_launch("compute_logits");
  }
};

ReferenceEngineOnDevice::ReferenceEngineOnDevice(const ReferenceModelShape& shape)
    : impl_(std::make_unique<Impl>(shape)) {}

ReferenceEngineOnDevice::~ReferenceEngineOnDevice() = default;

std::size_t ReferenceEngineOnDevice::chunk() const noexcept { return impl_->shape.chunk; }

std::size_t ReferenceEngineOnDevice::vocab() const noexcept { return impl_->shape.vocab; }

const ReferenceModelShape& ReferenceEngineOnDevice::model() const noexcept { return impl_->shape; }

std::unique_ptr<driver::KvState> ReferenceEngineOnDevice::make_kv_state(std::size_t capacity) const {
  return std::make_unique<driver::cuda::KvStateOnDevice>(driver::KvShape{capacity, impl_->shape.layers, impl_->shape.width});
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
