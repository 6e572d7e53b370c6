#pragma once

/// \file
/// The reference engine's model: a small deterministic transformer whose numerics depend on where
/// prefill chunks start and on whether a row was written by prefill or by decode, as a real engine's
/// do. That is what makes THM-1 a claim that can fail (docs/driver.md, "The reference engine").
///
/// Per token at position p:  h = embed[token] + position_code(p)
/// Per layer:  a = rmsnorm(h); q, k, v = Wq a, Wk a, Wv a; row p of the layer's K and V := k, v
///             h += Wo attention(q, rows A(p));  h += W2 relu(W1 rmsnorm(h))
/// Logits:     Wout rmsnorm(h)
///
/// A(p), the rows position p attends to, is {p} and every p - 2^k >= 0 (k >= 0): at most
/// log2(p) + 2 rows, spread over the whole prefix (attends()). A token costs O(log p), so a cold
/// prefill of n tokens costs O(n log n), and a row at any earlier position still reaches every later
/// one: j reaches p in layer 1 when p - j is a power of two, and through the intermediate rows'
/// layer-1 outputs in the layers above (the binary digits of p - j, one hop per layer).
///
/// Prefill of a chunk [s, e) reduces attention over the attended rows before the chunk (A(p) within
/// 0..s-1) and over the chunk's own (A(p) within s..p) as two partial softmax results, merged by
/// log-sum-exp, as prefill kernels over a KV cache do. Decode reduces A(p) in one online-softmax
/// pass, as decode kernels do. Rows are summed in ascending position order.

#include <pfx/driver/kv_shape.hpp>
#include <pfx/token.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace pfx::engines {

/// Sizes of the reference model. Defaults are small enough for property tests.
struct ReferenceModelShape {
  std::size_t vocab = 64;
  std::size_t width = 16;   ///< model width = head width (one head per layer)
  std::size_t hidden = 32;  ///< MLP width
  std::size_t layers = 2;   ///< at least 2, so that layer-2 rows depend on layer-1 attention
  std::size_t chunk = 8;    ///< canonical prefill chunk
  std::uint64_t seed = 253; ///< the weights are a fixed function of the seed and the sizes

  friend constexpr bool operator==(const ReferenceModelShape&, const ReferenceModelShape&) = default;
};

/// Throws std::invalid_argument naming the field unless every size is usable (layers >= 2, ...).
void validate(const ReferenceModelShape& shape);

/// The arguments of one prefill or decode call of a reference engine named `engine`, checked the same
/// way on every backend: the KV state (of shape `kv`) has the model's layers and width
/// (std::invalid_argument), at least one token (std::invalid_argument), rows [position, position +
/// tokens.size()) within the state (std::out_of_range), vocab logits (std::invalid_argument), every
/// token in the vocabulary (std::out_of_range). Each message starts with `engine`.
void check_call(const char* engine, const ReferenceModelShape& shape, const driver::KvShape& kv,
                std::span<const token> tokens, std::size_t position, std::span<const float> logits);

/// The weights, row-major, generated from the seed. Host and CUDA engines use the same weights.
struct ReferenceWeights {
  struct Layer {
    std::vector<float> wq, wk, wv, wo;  ///< width x width
    std::vector<float> w1;              ///< hidden x width
    std::vector<float> w2;              ///< width x hidden
  };
  std::vector<float> embed;    ///< vocab x width
  std::vector<Layer> layers;
  std::vector<float> unembed;  ///< vocab x width

  /// Validates `shape`, then draws every weight from a splitmix64 stream of shape.seed.
  [[nodiscard]] static ReferenceWeights generate(const ReferenceModelShape& shape);
};

/// Whether the row of position p attends to the row of position j: j = p, or j = p - 2^k for some
/// k >= 0.
[[nodiscard]] constexpr bool attends(std::uint64_t p, std::uint64_t j) noexcept {
  return j == p || (j < p && std::has_single_bit(p - j));
}

/// The position code added to the embedding: an integer hash of (position, dimension) mapped to
/// [-0.25, 0.25). Integer arithmetic, so host and device compute the same floats.
[[nodiscard]] constexpr float position_code(std::uint64_t position, std::uint64_t dimension) noexcept {
  std::uint64_t z = position * 0x9E3779B97F4A7C15ULL + dimension * 0xBF58476D1CE4E5B9ULL + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) / static_cast<float>(1ULL << 24) * 0.5f - 0.25f;
}

}  // namespace pfx::engines
