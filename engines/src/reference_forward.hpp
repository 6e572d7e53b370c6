#pragma once

// The reference model's forward pass on the host (pfx/engines/reference_model.hpp), and the pieces
// of attention HostReferenceEngine's reductions are made of: they differ only in how a query reduces
// attention over the rows it reads, which the engine passes in as `attend`.
// Private to the engines component: not installed.

#include <pfx/driver/host_kv_state.hpp>
#include <pfx/driver/sharded_kv_state.hpp>
#include <pfx/engines/reference_model.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace pfx::engines::reference {

/// out[r] = sum_c m[r][c] x[c] for r in [first, last), summed in order of c.
inline void matvec_rows(float* out, const std::vector<float>& m, const float* x, std::size_t first, std::size_t last,
                        std::size_t columns) {
  for (std::size_t r = first; r < last; ++r) {
    float sum = 0.0f;
    for (std::size_t c = 0; c < columns; ++c) sum += m[r * columns + c] * x[c];
    out[r] = sum;
  }
}

/// out[r] = sum_c m[r][c] x[c], summed in order of c.
inline void matvec(float* out, const std::vector<float>& m, const float* x, std::size_t rows, std::size_t columns) {
  matvec_rows(out, m, x, 0, rows, columns);
}

/// The vocabulary from which unembed sums the logits on two threads.
inline constexpr std::size_t unembed_split_from = std::size_t{1} << 16;

/// The logits: matvec with the vocab x width unembedding, whose reading is most of a chunk's cost at
/// a large vocabulary (16 MB for 2^18 ids; docs/performance.md). From unembed_split_from ids on, the
/// rows are split between this thread and one more. Each row is summed alone, in order of c, whoever
/// sums it, so the bits are those of matvec; when no thread can be started, this thread sums them all.
inline void unembed(float* out, const std::vector<float>& m, const float* x, std::size_t rows, std::size_t columns) {
  if (rows < unembed_split_from) {
    matvec(out, m, x, rows, columns);
    return;
  }
  const std::size_t half = rows / 2;
  std::thread upper;
  try {
    upper = std::thread([&] { matvec_rows(out, m, x, half, rows, columns); });
  } catch (const std::system_error&) {
    matvec(out, m, x, rows, columns);
    return;
  }
  matvec_rows(out, m, x, 0, half, columns);
  upper.join();
}

inline void rmsnorm(float* out, const float* x, std::size_t width) {
  float squares = 0.0f;
  for (std::size_t d = 0; d < width; ++d) squares += x[d] * x[d];
  const float inverse = 1.0f / std::sqrt(squares / static_cast<float>(width) + 1e-6f);
  for (std::size_t d = 0; d < width; ++d) out[d] = x[d] * inverse;
}

/// The rows of a HostKvState.
struct HostRows {
  driver::HostKvState& state;
  [[nodiscard]] float* row(std::size_t layer, driver::Plane plane, std::size_t position) const noexcept {
    return state.row(layer, plane, position);
  }
};

/// The rows of a ShardedKvState whose shards are HostKvStates, each read from its owner: the engine
/// sees them in position order, as from one HostKvState, so its results do not depend on the layout.
struct ShardedHostRows {
  driver::ShardLayout layout;
  std::vector<driver::HostKvState*> shards;
  [[nodiscard]] float* row(std::size_t layer, driver::Plane plane, std::size_t position) const noexcept {
    return shards[layout.owner(position)]->row(layer, plane, layout.local(position));
  }
};

/// Checks the call of engine `name` (check_call) and runs body(rows) on the rows of `kv`: a
/// HostKvState, or a ShardedKvState of HostKvStates; std::invalid_argument for any other state.
template <class Body>
void on_host_rows(const char* name, const ReferenceModelShape& shape, driver::KvState& kv, std::span<const token> tokens,
                  std::size_t position, std::span<const float> logits, Body&& body) {
  if (auto* host = dynamic_cast<driver::HostKvState*>(&kv)) {
    check_call(name, shape, host->shape(), tokens, position, logits);
    body(HostRows{*host});
    return;
  }
  if (auto* sharded = dynamic_cast<driver::ShardedKvState*>(&kv)) {
    ShardedHostRows rows{sharded->layout(), {}};
    for (std::size_t r = 0; r < rows.layout.ranks; ++r) {
      rows.shards.push_back(dynamic_cast<driver::HostKvState*>(&sharded->shard(r)));
      if (rows.shards.back() == nullptr) break;
    }
    if (!rows.shards.empty() && rows.shards.back() != nullptr) {
      check_call(name, shape, sharded->shape(), tokens, position, logits);
      body(rows);
      return;
    }
  }
  throw std::invalid_argument(std::string(name) +
                              ": the KV state is neither a driver::HostKvState nor a driver::ShardedKvState of HostKvStates "
                              "(use make_kv_state)");
}

/// Appends to `out`, in ascending order, the rows the row of position p attends to
/// (attends(p, j) of reference_model.hpp) within [from, to): p - 2^k for k from the largest with
/// 2^k <= p down to 0, then p.
inline void attended_within(std::size_t p, std::size_t from, std::size_t to, std::vector<std::size_t>& out) {
  for (std::size_t step = std::bit_floor(p); step > 0; step >>= 1) {
    const std::size_t j = p - step;
    if (j >= from && j < to) out.push_back(j);
  }
  if (p >= from && p < to) out.push_back(p);
}

/// Appends the positions [from, to) to `out`.
inline void range(std::size_t from, std::size_t to, std::vector<std::size_t>& out) {
  for (std::size_t j = from; j < to; ++j) out.push_back(j);
}

/// A softmax-weighted sum over some rows, not yet normalised: max score, sum of exp(score - max),
/// and sum of exp(score - max) * value. Empty: max = -inf, sum = 0, values 0.
struct Partial {
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  std::vector<float> weighted;
};

/// The partial result of query `q` over the rows at `positions` of `layer`, in two passes (the max,
/// then the sums in the order of `positions`).
template <class Rows>
void reduce(Partial& p, const Rows& kv, std::size_t layer, const float* q, std::span<const std::size_t> positions,
            float scale, std::vector<float>& scores) {
  const std::size_t width = p.weighted.size();
  p.max = -std::numeric_limits<float>::infinity();
  p.sum = 0.0f;
  std::fill(p.weighted.begin(), p.weighted.end(), 0.0f);
  scores.resize(positions.size());
  for (std::size_t i = 0; i < positions.size(); ++i) {
    const float* k = kv.row(layer, driver::Plane::key, positions[i]);
    float dot = 0.0f;
    for (std::size_t d = 0; d < width; ++d) dot += q[d] * k[d];
    scores[i] = dot * scale;
    if (scores[i] > p.max) p.max = scores[i];
  }
  for (std::size_t i = 0; i < positions.size(); ++i) {
    const float weight = std::exp(scores[i] - p.max);
    p.sum += weight;
    const float* v = kv.row(layer, driver::Plane::value, positions[i]);
    for (std::size_t d = 0; d < width; ++d) p.weighted[d] += weight * v[d];
  }
}

/// Log-sum-exp merge of `later` into `into` (each over its own rows), not normalised. A part over
/// no rows (sum 0) contributes nothing.
inline void combine(Partial& into, const Partial& later) {
  const float max = std::max(into.max, later.max);
  const float into_scale = into.sum == 0.0f ? 0.0f : std::exp(into.max - max);
  const float later_scale = later.sum == 0.0f ? 0.0f : std::exp(later.max - max);
  into.sum = into.sum * into_scale + later.sum * later_scale;
  for (std::size_t d = 0; d < into.weighted.size(); ++d) {
    into.weighted[d] = into.weighted[d] * into_scale + later.weighted[d] * later_scale;
  }
  into.max = max;
}

/// out = the normalised attention output of `p`.
inline void normalise(float* out, const Partial& p) {
  for (std::size_t d = 0; d < p.weighted.size(); ++d) out[d] = p.weighted[d] / p.sum;
}

/// Attention of `q` over the rows at `positions` in one online-softmax pass in their order, as a
/// decode kernel does, normalised into `out`.
template <class Rows>
void online(float* out, const Rows& kv, std::size_t layer, const float* q, std::span<const std::size_t> positions,
            std::size_t width, float scale) {
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  std::fill(out, out + width, 0.0f);
  for (const std::size_t j : positions) {
    const float* k = kv.row(layer, driver::Plane::key, j);
    float dot = 0.0f;
    for (std::size_t d = 0; d < width; ++d) dot += q[d] * k[d];
    const float score = dot * scale;
    const float new_max = score > max ? score : max;
    const float rescale = std::exp(max - new_max);
    const float weight = std::exp(score - new_max);
    sum = sum * rescale + weight;
    const float* v = kv.row(layer, driver::Plane::value, j);
    for (std::size_t d = 0; d < width; ++d) out[d] = out[d] * rescale + weight * v[d];
    max = new_max;
  }
  for (std::size_t d = 0; d < width; ++d) out[d] /= sum;
}

/// Computes rows [position, position + tokens.size()) of `rows` and the last row's logits: per
/// layer every row's K and V first (the chunk's queries attend to them), then
/// before_attention(layer, queries) sees every query of the layer (tokens.size() x width floats),
/// then for each row in order attend(layer, p, q, o) writes the attention output `o` of the query
/// `q` at position p, and the rest of the layer follows.
template <class Rows, class BeforeAttention, class Attend>
void forward(const ReferenceModelShape& shape, const ReferenceWeights& weights, const Rows& rows,
             std::span<const token> tokens, std::size_t position, std::span<float> logits,
             BeforeAttention&& before_attention, Attend&& attend) {
  const std::size_t n = tokens.size();
  const std::size_t width = shape.width;
  std::vector<float> h(n * width), q(n * width), a(width), o(width), u(shape.hidden);
  for (std::size_t i = 0; i < n; ++i) {
    const float* e = &weights.embed[static_cast<std::size_t>(tokens[i]) * width];
    for (std::size_t d = 0; d < width; ++d) h[i * width + d] = e[d] + position_code(position + i, d);
  }
  for (std::size_t layer = 0; layer < shape.layers; ++layer) {
    const ReferenceWeights::Layer& w = weights.layers[layer];
    for (std::size_t i = 0; i < n; ++i) {
      rmsnorm(a.data(), &h[i * width], width);
      matvec(&q[i * width], w.wq, a.data(), width, width);
      matvec(rows.row(layer, driver::Plane::key, position + i), w.wk, a.data(), width, width);
      matvec(rows.row(layer, driver::Plane::value, position + i), w.wv, a.data(), width, width);
    }
    before_attention(layer, std::span<const float>(q));
    for (std::size_t i = 0; i < n; ++i) {
      float* hi = &h[i * width];
      attend(layer, position + i, static_cast<const float*>(&q[i * width]), o.data());
      matvec(a.data(), w.wo, o.data(), width, width);
      for (std::size_t d = 0; d < width; ++d) hi[d] += a[d];
      rmsnorm(a.data(), hi, width);
      matvec(u.data(), w.w1, a.data(), shape.hidden, width);
      for (float& x : u) x = std::max(x, 0.0f);
      matvec(a.data(), w.w2, u.data(), width, shape.hidden);
      for (std::size_t d = 0; d < width; ++d) hi[d] += a[d];
    }
  }
  rmsnorm(a.data(), &h[(n - 1) * width], width);
  unembed(logits.data(), weights.unembed, a.data(), shape.vocab, width);
}

/// forward with nothing to do before a layer's attention.
template <class Rows, class Attend>
void forward(const ReferenceModelShape& shape, const ReferenceWeights& weights, const Rows& rows,
             std::span<const token> tokens, std::size_t position, std::span<float> logits, Attend&& attend) {
  forward(shape, weights, rows, tokens, position, logits, [](std::size_t, std::span<const float>) {},
          std::forward<Attend>(attend));
}

/// 1 / sqrt(width), the attention scale.
inline float attention_scale(const ReferenceModelShape& shape) {
  return 1.0f / std::sqrt(static_cast<float>(shape.width));
}

}  // namespace pfx::engines::reference
