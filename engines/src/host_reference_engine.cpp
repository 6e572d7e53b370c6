#include <pfx/driver/sharded_kv_state.hpp>
#include <pfx/engines/host_reference_engine.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace pfx::driver {
namespace {

/// out[r] = sum_c m[r][c] x[c], summed in order of c.
void matvec(float* out, const std::vector<float>& m, const float* x, std::size_t rows, std::size_t columns) {
  for (std::size_t r = 0; r < rows; ++r) {
    float sum = 0.0f;
    for (std::size_t c = 0; c < columns; ++c) sum += m[r * columns + c] * x[c];
    out[r] = sum;
  }
}

void rmsnorm(float* out, const float* x, std::size_t width) {
  float squares = 0.0f;
  for (std::size_t d = 0; d < width; ++d) squares += x[d] * x[d];
  const float inverse = 1.0f / std::sqrt(squares / static_cast<float>(width) + 1e-6f);
  for (std::size_t d = 0; d < width; ++d) out[d] = x[d] * inverse;
}

/// A softmax-weighted sum over some rows, not yet normalised: max score, sum of exp(score - max),
/// and sum of exp(score - max) * value. Empty: max = -inf, sum = 0, values 0.
struct Partial {
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  std::vector<float> weighted;
};

/// The rows of a HostKvState.
struct HostRows {
  HostKvState& state;
  [[nodiscard]] float* row(std::size_t layer, Plane plane, std::size_t position) const noexcept {
    return state.row(layer, plane, position);
  }
};

/// The rows of a ShardedKvState whose shards are HostKvStates, each read from its owner: the engine
/// sees them in position order, as from one HostKvState, so its results do not depend on the layout.
struct ShardedHostRows {
  ShardLayout layout;
  std::vector<HostKvState*> shards;
  [[nodiscard]] float* row(std::size_t layer, Plane plane, std::size_t position) const noexcept {
    return shards[layout.owner(position)]->row(layer, plane, layout.local(position));
  }
};

/// The partial result of query `q` over rows [from, to) of `layer`, in two passes (max, then sums).
template <class Rows>
void reduce_rows(Partial& p, const Rows& kv, std::size_t layer, const float* q, std::size_t from,
                 std::size_t to, float scale, std::vector<float>& scores) {
  const std::size_t width = p.weighted.size();
  p.max = -std::numeric_limits<float>::infinity();
  p.sum = 0.0f;
  std::fill(p.weighted.begin(), p.weighted.end(), 0.0f);
  scores.resize(to - from);
  for (std::size_t j = from; j < to; ++j) {
    const float* k = kv.row(layer, Plane::key, j);
    float dot = 0.0f;
    for (std::size_t d = 0; d < width; ++d) dot += q[d] * k[d];
    scores[j - from] = dot * scale;
    if (scores[j - from] > p.max) p.max = scores[j - from];
  }
  for (std::size_t j = from; j < to; ++j) {
    const float weight = std::exp(scores[j - from] - p.max);
    p.sum += weight;
    const float* v = kv.row(layer, Plane::value, j);
    for (std::size_t d = 0; d < width; ++d) p.weighted[d] += weight * v[d];
  }
}

/// Log-sum-exp merge of the rows before the chunk and the chunk's own rows, normalised into `out`.
void merge(float* out, const Partial& before, const Partial& own, std::size_t width) {
  const float max = std::max(before.max, own.max);
  const float before_scale = before.sum == 0.0f ? 0.0f : std::exp(before.max - max);
  const float own_scale = std::exp(own.max - max);
  const float total = before.sum * before_scale + own.sum * own_scale;
  for (std::size_t d = 0; d < width; ++d) {
    out[d] = (before.weighted[d] * before_scale + own.weighted[d] * own_scale) / total;
  }
}

}  // namespace

HostReferenceEngine::HostReferenceEngine(const ReferenceModelShape& shape)
    : shape_(shape), weights_(ReferenceWeights::generate(shape)) {}

std::unique_ptr<KvState> HostReferenceEngine::make_kv_state(std::size_t capacity) const {
  return std::make_unique<HostKvState>(KvShape{capacity, shape_.layers, shape_.width});
}

template <class Body>
void HostReferenceEngine::on_rows(KvState& kv, std::span<const token> tokens, std::size_t position,
                                  std::span<float> logits, Body&& body) const {
  if (auto* host = dynamic_cast<HostKvState*>(&kv)) {
    check_call("HostReferenceEngine", shape_, host->shape(), tokens, position, logits);
    body(HostRows{*host});
    return;
  }
  if (auto* sharded = dynamic_cast<ShardedKvState*>(&kv)) {
    ShardedHostRows rows{sharded->layout(), {}};
    for (std::size_t r = 0; r < rows.layout.ranks; ++r) {
      rows.shards.push_back(dynamic_cast<HostKvState*>(&sharded->shard(r)));
      if (rows.shards.back() == nullptr) break;
    }
    if (!rows.shards.empty() && rows.shards.back() != nullptr) {
      check_call("HostReferenceEngine", shape_, sharded->shape(), tokens, position, logits);
      body(rows);
      return;
    }
  }
  throw std::invalid_argument(
      "HostReferenceEngine: the KV state is neither a HostKvState nor a ShardedKvState of HostKvStates "
      "(use make_kv_state)");
}

void HostReferenceEngine::prefill(KvState& kv, std::span<const token> tokens, std::size_t position,
                                  std::span<float> logits) {
  on_rows(kv, tokens, position, logits, [&](const auto& state) { prefill_rows(state, tokens, position, logits); });
}

template <class Rows>
void HostReferenceEngine::prefill_rows(const Rows& state, std::span<const token> tokens, std::size_t position,
                                       std::span<float> logits) const {
  const std::size_t n = tokens.size();
  const std::size_t width = shape_.width;
  const float scale = 1.0f / std::sqrt(static_cast<float>(width));

  std::vector<float> h(n * width), q(n * width), a(width), o(width), u(shape_.hidden), scores;
  for (std::size_t i = 0; i < n; ++i) {
    const float* e = &weights_.embed[static_cast<std::size_t>(tokens[i]) * width];
    for (std::size_t d = 0; d < width; ++d) h[i * width + d] = e[d] + position_code(position + i, d);
  }
  Partial before, own;
  before.weighted.resize(width);
  own.weighted.resize(width);
  for (std::size_t layer = 0; layer < shape_.layers; ++layer) {
    const ReferenceWeights::Layer& w = weights_.layers[layer];
    for (std::size_t i = 0; i < n; ++i) {  // the chunk's rows first: its queries attend to them
      rmsnorm(a.data(), &h[i * width], width);
      matvec(&q[i * width], w.wq, a.data(), width, width);
      matvec(state.row(layer, Plane::key, position + i), w.wk, a.data(), width, width);
      matvec(state.row(layer, Plane::value, position + i), w.wv, a.data(), width, width);
    }
    for (std::size_t i = 0; i < n; ++i) {
      float* hi = &h[i * width];
      reduce_rows(before, state, layer, &q[i * width], 0, position, scale, scores);
      reduce_rows(own, state, layer, &q[i * width], position, position + i + 1, scale, scores);
      merge(o.data(), before, own, width);
      matvec(a.data(), w.wo, o.data(), width, width);
      for (std::size_t d = 0; d < width; ++d) hi[d] += a[d];
      rmsnorm(a.data(), hi, width);
      matvec(u.data(), w.w1, a.data(), shape_.hidden, width);
      for (float& x : u) x = std::max(x, 0.0f);
      matvec(a.data(), w.w2, u.data(), width, shape_.hidden);
      for (std::size_t d = 0; d < width; ++d) hi[d] += a[d];
    }
  }
  rmsnorm(a.data(), &h[(n - 1) * width], width);
  matvec(logits.data(), weights_.unembed, a.data(), shape_.vocab, width);
}

void HostReferenceEngine::decode(KvState& kv, token next, std::size_t position, std::span<float> logits) {
  on_rows(kv, std::span<const token>(&next, 1), position, logits,
          [&](const auto& state) { decode_rows(state, next, position, logits); });
}

template <class Rows>
void HostReferenceEngine::decode_rows(const Rows& state, token next, std::size_t position,
                                      std::span<float> logits) const {
  const std::size_t width = shape_.width;
  const float scale = 1.0f / std::sqrt(static_cast<float>(width));

  std::vector<float> h(width), q(width), a(width), o(width), u(shape_.hidden);
  const float* e = &weights_.embed[static_cast<std::size_t>(next) * width];
  for (std::size_t d = 0; d < width; ++d) h[d] = e[d] + position_code(position, d);
  for (std::size_t layer = 0; layer < shape_.layers; ++layer) {
    const ReferenceWeights::Layer& w = weights_.layers[layer];
    rmsnorm(a.data(), h.data(), width);
    matvec(q.data(), w.wq, a.data(), width, width);
    matvec(state.row(layer, Plane::key, position), w.wk, a.data(), width, width);
    matvec(state.row(layer, Plane::value, position), w.wv, a.data(), width, width);
    // One online-softmax pass over rows 0..position, as a decode kernel does.
    float max = -std::numeric_limits<float>::infinity();
    float sum = 0.0f;
    std::fill(o.begin(), o.end(), 0.0f);
    for (std::size_t j = 0; j <= position; ++j) {
      const float* k = state.row(layer, Plane::key, j);
      float dot = 0.0f;
      for (std::size_t d = 0; d < width; ++d) dot += q[d] * k[d];
      const float score = dot * scale;
      const float new_max = score > max ? score : max;
      const float rescale = std::exp(max - new_max);
      const float weight = std::exp(score - new_max);
      sum = sum * rescale + weight;
      const float* v = state.row(layer, Plane::value, j);
      for (std::size_t d = 0; d < width; ++d) o[d] = o[d] * rescale + weight * v[d];
      max = new_max;
    }
    for (std::size_t d = 0; d < width; ++d) o[d] /= sum;
    matvec(a.data(), w.wo, o.data(), width, width);
    for (std::size_t d = 0; d < width; ++d) h[d] += a[d];
    rmsnorm(a.data(), h.data(), width);
    matvec(u.data(), w.w1, a.data(), shape_.hidden, width);
    for (float& x : u) x = std::max(x, 0.0f);
    matvec(a.data(), w.w2, u.data(), width, shape_.hidden);
    for (std::size_t d = 0; d < width; ++d) h[d] += a[d];
  }
  rmsnorm(a.data(), h.data(), width);
  matvec(logits.data(), weights_.unembed, a.data(), shape_.vocab, width);
}

}  // namespace pfx::driver
