#include <pfx/engines/blocked_attention_engine.hpp>

#include "reference_forward.hpp"

#include <vector>

namespace pfx::engines {

BlockedAttentionEngine::BlockedAttentionEngine(ReferenceModelShape shape)
    : shape_(shape), weights_(ReferenceWeights::generate(shape)) {}

std::unique_ptr<driver::KvState> BlockedAttentionEngine::make_kv_state(std::size_t capacity) const {
  return std::make_unique<driver::HostKvState>(driver::KvShape{capacity, shape_.layers, shape_.width});
}

void BlockedAttentionEngine::prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
                                     std::span<float> logits) {
  reference::on_host_rows("BlockedAttentionEngine", shape_, kv, tokens, position, logits, [&](const auto& rows) {
    const float scale = reference::attention_scale(shape_);
    const std::size_t tile = tokens.size();  // the call's length: the tiles follow its boundaries
    reference::Partial total, part;
    total.weighted.resize(shape_.width);
    part.weighted.resize(shape_.width);
    std::vector<std::size_t> positions;
    std::vector<float> scores;
    reference::forward(shape_, weights_, rows, tokens, position, logits,
                       [&](std::size_t layer, std::size_t p, const float* q, float* o) {
                         // Tiles in ascending order: [0, position % tile) when not empty, then
                         // [position - m tile, position - (m - 1) tile) down to m = 1, then [position, p].
                         std::size_t from = 0;
                         std::size_t to = position % tile;
                         total = reference::Partial{.weighted = std::vector<float>(shape_.width)};
                         while (from < position) {
                           if (to > from) {
                             positions.clear();
                             reference::range(from, to, positions);
                             reference::reduce(part, rows, layer, q, positions, scale, scores);
                             reference::combine(total, part);
                           }
                           from = to;
                           to += tile;
                         }
                         positions.clear();
                         reference::range(position, p + 1, positions);
                         reference::reduce(part, rows, layer, q, positions, scale, scores);
                         reference::combine(total, part);
                         reference::normalise(o, total);
                       });
  });
}

void BlockedAttentionEngine::decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) {
  const std::span<const token> one(&next, 1);
  reference::on_host_rows("BlockedAttentionEngine", shape_, kv, one, position, logits, [&](const auto& rows) {
    const float scale = reference::attention_scale(shape_);
    std::vector<std::size_t> positions;
    reference::forward(shape_, weights_, rows, one, position, logits,
                       [&](std::size_t layer, std::size_t p, const float* q, float* o) {
                         positions.clear();
                         reference::range(0, p + 1, positions);
                         reference::online(o, rows, layer, q, positions, shape_.width, scale);
                       });
  });
}

}  // namespace pfx::engines
