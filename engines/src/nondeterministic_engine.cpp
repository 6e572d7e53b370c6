#include <pfx/engines/nondeterministic_engine.hpp>

#include "reference_forward.hpp"

#include <utility>
#include <vector>

namespace pfx::engines {
namespace {

/// Fisher-Yates shuffle of `positions` driven by `draw`.
template <class Draw>
void permute(std::vector<std::size_t>& positions, Draw&& draw) {
  for (std::size_t i = positions.size(); i > 1; --i) {
    std::swap(positions[i - 1], positions[draw() % i]);
  }
}

}  // namespace

NondeterministicEngine::NondeterministicEngine(ReferenceModelShape shape, std::uint64_t seed)
    : shape_(shape), weights_(ReferenceWeights::generate(shape)), state_(seed) {}

std::unique_ptr<driver::KvState> NondeterministicEngine::make_kv_state(std::size_t capacity) const {
  return std::make_unique<driver::HostKvState>(driver::KvShape{capacity, shape_.layers, shape_.width});
}

std::uint64_t NondeterministicEngine::draw() noexcept {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

void NondeterministicEngine::prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
                                     std::span<float> logits) {
  reference::on_host_rows("NondeterministicEngine", shape_, kv, tokens, position, logits, [&](const auto& rows) {
    const float scale = reference::attention_scale(shape_);
    reference::Partial before, own;
    before.weighted.resize(shape_.width);
    own.weighted.resize(shape_.width);
    std::vector<std::size_t> positions;
    std::vector<float> scores;
    const auto next = [this] { return draw(); };
    reference::forward(shape_, weights_, rows, tokens, position, logits,
                       [&](std::size_t layer, std::size_t p, const float* q, float* o) {
                         positions.clear();
                         reference::attended_within(p, 0, position, positions);
                         permute(positions, next);
                         reference::reduce(before, rows, layer, q, positions, scale, scores);
                         positions.clear();
                         reference::attended_within(p, position, p + 1, positions);
                         permute(positions, next);
                         reference::reduce(own, rows, layer, q, positions, scale, scores);
                         reference::combine(before, own);
                         reference::normalise(o, before);
                       });
  });
}

void NondeterministicEngine::decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) {
  const std::span<const token> one(&next, 1);
  reference::on_host_rows("NondeterministicEngine", shape_, kv, one, position, logits, [&](const auto& rows) {
    const float scale = reference::attention_scale(shape_);
    std::vector<std::size_t> positions;
    const auto draw_next = [this] { return draw(); };
    reference::forward(shape_, weights_, rows, one, position, logits,
                       [&](std::size_t layer, std::size_t p, const float* q, float* o) {
                         positions.clear();
                         reference::attended_within(p, 0, p + 1, positions);
                         permute(positions, draw_next);
                         reference::online(o, rows, layer, q, positions, shape_.width, scale);
                       });
  });
}

}  // namespace pfx::engines
