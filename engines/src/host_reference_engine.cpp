#include <pfx/engines/host_reference_engine.hpp>

#include "reference_forward.hpp"

#include <vector>

namespace pfx::engines {

HostReferenceEngine::HostReferenceEngine(const ReferenceModelShape& shape)
    : shape_(shape), weights_(ReferenceWeights::generate(shape)) {}

std::unique_ptr<driver::KvState> HostReferenceEngine::make_kv_state(std::size_t capacity) const {
  return std::make_unique<driver::HostKvState>(driver::KvShape{capacity, shape_.layers, shape_.width});
}

void HostReferenceEngine::prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
                                  std::span<float> logits) {
  reference::on_host_rows("HostReferenceEngine", shape_, kv, tokens, position, logits, [&](const auto& rows) {
    // The attended rows before the chunk and the chunk's own, each reduced on its own, then merged:
    // where a resumed prefill starts decides how the sums are split, so its floats follow the chunk.
    const std::size_t split = position;
    const float scale = reference::attention_scale(shape_);
    reference::Partial before, own;
    before.weighted.resize(shape_.width);
    own.weighted.resize(shape_.width);
    std::vector<std::size_t> positions;
    std::vector<float> scores;
    reference::forward(shape_, weights_, rows, tokens, position, logits,
                       [&](std::size_t layer, std::size_t p, const float* q, float* o) {
                         positions.clear();
                         reference::attended_within(p, 0, split, positions);
                         reference::reduce(before, rows, layer, q, positions, scale, scores);
                         positions.clear();
                         reference::attended_within(p, split, p + 1, positions);
                         reference::reduce(own, rows, layer, q, positions, scale, scores);
                         reference::combine(before, own);
                         reference::normalise(o, before);
                       });
  });
}

void HostReferenceEngine::decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) {
  const std::span<const token> one(&next, 1);
  reference::on_host_rows("HostReferenceEngine", shape_, kv, one, position, logits, [&](const auto& rows) {
    // One online-softmax pass over every attended row, as a decode kernel does.
    const float scale = reference::attention_scale(shape_);
    std::vector<std::size_t> positions;
    reference::forward(shape_, weights_, rows, one, position, logits,
                       [&](std::size_t layer, std::size_t p, const float* q, float* o) {
                         positions.clear();
                         reference::attended_within(p, 0, p + 1, positions);
                         reference::online(o, rows, layer, q, positions, shape_.width, scale);
                       });
  });
}

}  // namespace pfx::engines
