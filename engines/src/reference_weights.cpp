#include <pfx/driver/kv_state.hpp>
#include <pfx/engines/reference_model.hpp>

#include <cmath>
#include <stdexcept>
#include <string>

namespace pfx::engines {
namespace {

/// splitmix64: a small, well-known generator, so the weights are the same on every platform.
class WeightStream {
 public:
  explicit WeightStream(std::uint64_t seed) : state_(seed) {}

  /// Uniform in [-scale, scale).
  float next(float scale) {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    const float unit = static_cast<float>(z >> 40) / static_cast<float>(1ULL << 24);  // [0, 1)
    return (2.0f * unit - 1.0f) * scale;
  }

  std::vector<float> matrix(std::size_t rows, std::size_t columns) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(columns));
    std::vector<float> m(rows * columns);
    for (float& x : m) x = next(scale);
    return m;
  }

 private:
  std::uint64_t state_;
};

void require(bool ok, const char* field, const char* rule, std::size_t value) {
  if (!ok) {
    throw std::invalid_argument(std::string("ReferenceModelShape: ") + field + " = " +
                                std::to_string(value) + ", but it must be " + rule);
  }
}

}  // namespace

void validate(const ReferenceModelShape& shape) {
  require(shape.vocab >= 2, "vocab", "at least 2", shape.vocab);
  require(shape.vocab <= (1U << 24), "vocab", "at most 2^24", shape.vocab);
  require(shape.width >= 1 && shape.width <= 1024, "width", "1..1024", shape.width);
  require(shape.hidden >= 1 && shape.hidden <= 4096, "hidden", "1..4096", shape.hidden);
  require(shape.layers >= 2 && shape.layers <= 64, "layers", "2..64", shape.layers);
  require(shape.chunk >= 1, "chunk", "at least 1", shape.chunk);
}

void check_call(const char* engine, const ReferenceModelShape& shape, const driver::KvShape& kv,
                std::span<const token> tokens, std::size_t position, std::span<const float> logits) {
  const std::string name = engine;
  if (kv.layers != shape.layers || kv.width != shape.width) {
    throw std::invalid_argument(name + ": the KV state's layers or width differ from the model's");
  }
  if (tokens.empty()) throw std::invalid_argument(name + ": no tokens to compute");
  driver::check_rows(kv, position, position + tokens.size(), engine);
  if (logits.size() != shape.vocab) {
    throw std::invalid_argument(name + ": logits hold " + std::to_string(logits.size()) + " floats, the vocabulary " +
                                std::to_string(shape.vocab));
  }
  for (const token t : tokens) {
    if (t < 0 || static_cast<std::size_t>(t) >= shape.vocab) {
      throw std::out_of_range(name + ": token " + std::to_string(t) + " is outside the vocabulary 0.." +
                              std::to_string(shape.vocab - 1));
    }
  }
}

ReferenceWeights ReferenceWeights::generate(const ReferenceModelShape& shape) {
  validate(shape);
  WeightStream stream(shape.seed);
  ReferenceWeights w;
  w.embed = stream.matrix(shape.vocab, shape.width);
  for (std::size_t l = 0; l < shape.layers; ++l) {
    Layer layer;
    layer.wq = stream.matrix(shape.width, shape.width);
    layer.wk = stream.matrix(shape.width, shape.width);
    layer.wv = stream.matrix(shape.width, shape.width);
    layer.wo = stream.matrix(shape.width, shape.width);
    layer.w1 = stream.matrix(shape.hidden, shape.width);
    layer.w2 = stream.matrix(shape.width, shape.hidden);
    w.layers.push_back(std::move(layer));
  }
  w.unembed = stream.matrix(shape.vocab, shape.width);
  return w;
}

}  // namespace pfx::engines
