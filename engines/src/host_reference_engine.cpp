#include <pfx/engines/host_reference_engine.hpp>

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

HostReferenceEngine::HostReferenceEngine(const ReferenceModelShape& shape, Reduction reduction, std::uint64_t seed)
    : shape_(shape), weights_(ReferenceWeights::generate(shape)), reduction_(reduction), state_(seed) {}

std::unique_ptr<driver::KvState> HostReferenceEngine::make_kv_state(std::size_t capacity) const {
  return std::make_unique<driver::HostKvState>(driver::KvShape{capacity, shape_.layers, shape_.width});
}

const char* HostReferenceEngine::name() const noexcept {
  switch (reduction_) {
    case Reduction::tiles: return "BlockedAttentionEngine";
    case Reduction::drawn: return "NondeterministicEngine";
    case Reduction::plain: break;
  }
  return "HostReferenceEngine";
}

std::uint64_t HostReferenceEngine::draw() noexcept {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

void HostReferenceEngine::read_within(std::size_t p, std::size_t from, std::size_t to, std::vector<std::size_t>& out) {
  if (reduction_ == Reduction::tiles) {
    reference::range(from, to, out);
  } else {
    reference::attended_within(p, from, to, out);
  }
  if (reduction_ == Reduction::drawn) permute(out, [this] { return draw(); });
}

void HostReferenceEngine::prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
                                  std::span<float> logits) {
  reference::on_host_rows(name(), shape_, kv, tokens, position, logits, [&](const auto& rows) {
    const float scale = reference::attention_scale(shape_);
    reference::Partial total, part;
    part.weighted.resize(shape_.width);
    std::vector<std::size_t> positions;
    std::vector<float> scores;
    reference::forward(shape_, weights_, rows, tokens, position, logits,
                       [&](std::size_t layer, std::size_t p, const float* q, float* o) {
                         // Each part of the rows p reads is reduced on its own and merged into the
                         // total in ascending order: where a prefill call starts (and, for tiles,
                         // how long it is) decides how the sums are split, so its floats follow the
                         // calls.
                         const auto merge = [&](std::size_t from, std::size_t to) {
                           positions.clear();
                           read_within(p, from, to, positions);
                           reference::reduce(part, rows, layer, q, positions, scale, scores);
                           reference::combine(total, part);
                         };
                         total = reference::Partial{.weighted = std::vector<float>(shape_.width)};
                         if (reduction_ == Reduction::tiles) {
                           // Tiles in ascending order: [0, position % tile) when not empty, then
                           // [position - m tile, position - (m - 1) tile) down to m = 1, then [position, p].
                           const std::size_t tile = tokens.size();  // the call's length
                           std::size_t from = 0;
                           std::size_t to = position % tile;
                           while (from < position) {
                             if (to > from) merge(from, to);
                             from = to;
                             to += tile;
                           }
                           merge(position, p + 1);
                         } else {
                           // The rows before the call, then the call's own.
                           const std::size_t split = position;
                           merge(0, split);
                           merge(split, p + 1);
                         }
                         reference::normalise(o, total);
                       });
  });
}

void HostReferenceEngine::decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) {
  const std::span<const token> one(&next, 1);
  reference::on_host_rows(name(), shape_, kv, one, position, logits, [&](const auto& rows) {
    // One online-softmax pass over every row read, as a decode kernel does.
    const float scale = reference::attention_scale(shape_);
    std::vector<std::size_t> positions;
    reference::forward(shape_, weights_, rows, one, position, logits,
                       [&](std::size_t layer, std::size_t p, const float* q, float* o) {
                         positions.clear();
                         read_within(p, 0, p + 1, positions);
                         reference::online(o, rows, layer, q, positions, shape_.width, scale);
                       });
  });
}

}  // namespace pfx::engines
