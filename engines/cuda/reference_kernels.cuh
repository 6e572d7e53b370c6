#pragma once

// The pieces of the reference model on the device that its CUDA engines share: the model's device
// functions and row kernels, in which every sum is taken by one thread in a fixed order and there
// are no atomics, and the weights on the device (DeviceModel). Included by the .cu files of
// engines/cuda/ alone; everything has internal linkage, so each includes its own copy of the kernels.

#include <pfx/driver/cuda.hpp>
#include <pfx/driver/cuda/check.cuh>
#include <pfx/driver/kv_shape.hpp>
#include <pfx/engines/reference_model.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace pfx::engines::cuda {
namespace {  // NOLINT(google-build-namespaces,misc-anonymous-namespace-in-header): kernels, one copy per .cu

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
/// layout keeps a layer's keys, and its values, contiguous). The rows reduce_rows reads are any type
/// with holds(j) (whether row j is there to read), key(j, width) and value(j, width); here every row
/// is, at its own index.
struct LayerRows {
  float* keys;
  float* values;

  __device__ static constexpr bool holds(std::size_t /*row*/) { return true; }
  __device__ float* key(std::size_t row, std::size_t width) const { return keys + row * width; }
  __device__ float* value(std::size_t row, std::size_t width) const { return values + row * width; }
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
template <class Rows>
__device__ float score(const float* q, const Rows& rows, std::size_t j, std::size_t width, float scale) {
  return dot(rows.key(j, width), q, width) * scale;
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
/// dimension's weighted value. Rows that `rows` does not hold are left out, as if not listed. Every
/// thread of the block must call it: it has barriers.
template <class Rows>
__device__ Partial reduce_rows(const float* q, const Rows& rows, const Attended& attended, std::size_t from,
                               std::size_t to, std::size_t width, float scale, const RowScratch& s) {
  const std::size_t t = threadIdx.x;
  const std::size_t first = attended.first_at_or_past(from);
  const std::size_t end = attended.first_at_or_past(to);
  float local_max = -INFINITY;
  for (std::size_t i = first + t; i < end; i += blockDim.x) {
    if (!rows.holds(attended.at(i))) continue;
    const float x = score(q, rows, attended.at(i), width, scale);
    if (x > local_max) local_max = x;
  }
  Partial p{block_max(local_max, s.per_thread), 0.0f, 0.0f};
  for (std::size_t base = first; base < end; base += blockDim.x) {
    if (base + t < end && rows.holds(attended.at(base + t))) {
      s.tile[t] = expf(score(q, rows, attended.at(base + t), width, scale) - p.max);
    }
    __syncthreads();
    const std::size_t count = end - base < blockDim.x ? end - base : blockDim.x;
    for (std::size_t k = 0; k < count; ++k) {
      const std::size_t row = attended.at(base + k);
      if (!rows.holds(row)) continue;  // its tile entry was not written
      const float weight = s.tile[k];
      p.sum += weight;
      if (t < width) p.weighted += weight * rows.value(row, width)[t];
    }
    __syncthreads();  // the tile is rewritten by the next round
  }
  return p;
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

/// Layer `layer` of a KV state's rows on the device.
inline LayerRows layer_rows(const driver::cuda::KvStateOnDevice& kv, std::size_t layer) {
  float* base = kv.device_data();
  return {base + driver::row_offset(kv.shape(), layer, driver::Plane::key, 0),
          base + driver::row_offset(kv.shape(), layer, driver::Plane::value, 0)};
}

/// The reference model on the current device: its weights, uploaded once, the launch sizes of its
/// row kernels, and the logits of the last row computed.
struct DeviceModel {
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

  explicit DeviceModel(const ReferenceModelShape& s)
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

  /// Queues the upload of `chunk` into `tokens` and embed_rows of its rows at `position` into `h`.
  void queue_embed(cudaStream_t stream, token* tokens, float* h, std::span<const token> chunk,
                   std::size_t position) const {
    const std::size_t n = chunk.size();
    // From pageable memory the copy returns once `chunk` is staged, so the caller may reuse it.
    check(cudaMemcpyAsync(tokens, chunk.data(), n * sizeof(token), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync",
          n * sizeof(token));
    embed_rows<<<row_blocks(n), threads, 0, stream>>>(h, tokens, n, position, embed, shape.width);
    check_launch("embed_rows");
  }

  /// Queues project_qkv of n rows of `h`: their queries into `q`, their K/V rows into `rows` from
  /// row `first` on.
  void queue_project(cudaStream_t stream, const float* h, float* q, const LayerRows& rows, std::size_t layer,
                     std::size_t n, std::size_t first) const {
    project_qkv<<<row_blocks(n), threads, vector_shared_bytes, stream>>>(h, q, rows, layers[layer], n, first,
                                                                         shape.width);
    check_launch("project_qkv");
  }

  /// Queues compute_logits of the row `last` and the copy of the logits into `out`, on the host.
  void queue_logits(cudaStream_t stream, const float* last, std::span<float> out) const {
    const std::size_t wanted = (shape.vocab + logit_threads - 1) / logit_threads;
    const auto blocks = static_cast<unsigned>(wanted < max_logit_blocks ? wanted : max_logit_blocks);
    compute_logits<<<blocks, logit_threads, vector_shared_bytes, stream>>>(logits.get(), last, unembed, dims);
    check_launch("compute_logits");
    check(cudaMemcpyAsync(out.data(), logits.get(), out.size() * sizeof(float), cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync", out.size() * sizeof(float));
  }
};

/// The rows of one call: its tokens, hidden states and queries, grown on demand. Each grows on its
/// own: after a failed allocation every buffer still holds as many elements as its size() says.
struct RowBuffers {
  DeviceArray<token> tokens;
  DeviceArray<float> h;
  DeviceArray<float> q;

  void reserve(std::size_t n, std::size_t width) {
    if (tokens.size() < n) tokens = DeviceArray<token>(n);
    if (h.size() < n * width) h = DeviceArray<float>(n * width);
    if (q.size() < n * width) q = DeviceArray<float>(n * width);
  }
};

}  // namespace
}  // namespace pfx::engines::cuda
