#include <pfx/engines/dcp_reference_engine.hpp>

#include <pfx/driver/host_kv_state.hpp>

#include "dcp_sharding.hpp"
#include "reference_forward.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace pfx::engines {
namespace {

constexpr const char* engine_name = "DcpReferenceEngine";

/// The rows one call reads and writes: the chunk's own in a block of its own, which every rank
/// computes whole; those before the chunk on their owners (in a group, this rank's alone: the
/// others' are null and never read).
struct DcpRows {
  driver::ShardLayout layout;
  std::vector<driver::HostKvState*> shards;  ///< by rank
  std::size_t start = 0;                     ///< the chunk's first position
  std::size_t length = 0;                    ///< its positions
  std::size_t width = 0;
  std::vector<float>* chunk = nullptr;       ///< [layer][plane][position - start][width]

  [[nodiscard]] float* row(std::size_t layer, driver::Plane plane, std::size_t position) const noexcept {
    if (position >= start) {
      return chunk->data() + ((layer * 2 + static_cast<std::size_t>(plane)) * length + (position - start)) * width;
    }
    return shards[layout.owner(position)]->row(layer, plane, layout.local(position));
  }
};

/// A partial result as the ranks exchange it: width floats of normalised output, then the
/// log-sum-exp; a part over no rows is 0 ... 0, -inf.
void to_part(const reference::Partial& partial, float* part) {
  const std::size_t width = partial.weighted.size();
  if (partial.sum == 0.0f) {
    std::fill(part, part + width, 0.0f);
    part[width] = -std::numeric_limits<float>::infinity();
    return;
  }
  for (std::size_t d = 0; d < width; ++d) part[d] = partial.weighted[d] / partial.sum;
  part[width] = partial.max + std::log(partial.sum);
}

/// The merge of `parts` (each width + 1 floats, in the order given) into the output `out`, in fp32:
/// m = the largest log-sum-exp, each part weighted exp(lse - m), every sum in the parts' order. A
/// part over no rows adds exactly nothing.
void merge(std::span<const float* const> parts, std::size_t width, float* out) {
  float m = -std::numeric_limits<float>::infinity();
  for (const float* part : parts) m = std::max(m, part[width]);
  float total = 0.0f;
  std::fill(out, out + width, 0.0f);
  for (const float* part : parts) {
    if (part[width] == -std::numeric_limits<float>::infinity()) continue;
    const float weight = std::exp(part[width] - m);
    total += weight;
    for (std::size_t d = 0; d < width; ++d) out[d] += weight * part[d];
  }
  for (std::size_t d = 0; d < width; ++d) out[d] /= total;
}

}  // namespace

DcpReferenceEngine::DcpReferenceEngine(const ReferenceModelShape& shape, const driver::ShardLayout& layout,
                                       driver::Collective* group)
    : shape_(shape), weights_(ReferenceWeights::generate(shape)), layout_(layout), group_(group) {
  check_dcp_layout(engine_name, layout, group);
}

std::unique_ptr<driver::KvState> DcpReferenceEngine::make_kv_state(std::size_t capacity) const {
  return make_dcp_kv_state<driver::HostKvState>(shape_, layout_, group_, capacity);
}

void DcpReferenceEngine::prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
                                 std::span<float> logits) {
  // The rows this process holds, by rank.
  const std::vector<driver::HostKvState*> shards = held_shards<driver::HostKvState>(engine_name, kv, layout_, group_);
  check_call(engine_name, shape_, kv.shape(), tokens, position, logits);

  const std::size_t n = tokens.size();
  const std::size_t width = shape_.width;
  std::vector<float> chunk(shape_.layers * 2 * n * width);
  const DcpRows rows{layout_, shards, position, n, width, &chunk};
  const float scale = reference::attention_scale(shape_);
  const std::size_t part = width + 1;
  std::vector<float> mine(n * part);
  std::vector<float> all(layout_.ranks * n * part);  // [rank][query][output, lse]
  reference::Partial partial{.weighted = std::vector<float>(width)};
  std::vector<std::size_t> positions;
  std::vector<float> scores;
  std::vector<float> own(part);
  std::vector<const float*> parts(layout_.ranks + 1);

  // Rank r's partial for query i of `layer`: its own rows among A(p) before the chunk, ascending.
  const auto summarize = [&](std::size_t layer, std::span<const float> queries, std::size_t r, std::size_t i,
                             float* out) {
    const std::size_t p = position + i;
    positions.clear();
    reference::attended_within(p, 0, position, positions);
    std::erase_if(positions, [&](std::size_t j) { return layout_.owner(j) != r; });
    reference::reduce(partial, rows, layer, &queries[i * width], positions, scale, scores);
    to_part(partial, out);
  };
  reference::forward(
      shape_, weights_, rows, tokens, position, logits,
      [&](std::size_t layer, std::span<const float> queries) {
        if (group_ == nullptr) {  // every rank's partials, computed here in turn
          for (std::size_t r = 0; r < layout_.ranks; ++r) {
            for (std::size_t i = 0; i < n; ++i) summarize(layer, queries, r, i, &all[(r * n + i) * part]);
          }
          return;
        }
        for (std::size_t i = 0; i < n; ++i) summarize(layer, queries, group_->rank(), i, &mine[i * part]);
        group_->all_gather(std::span<const float>(mine), std::span<float>(all));
      },
      [&](std::size_t layer, std::size_t p, const float* q, float* o) {
        // Every rank's part in rank order, then the chunk's own causal part.
        const std::size_t i = p - position;
        positions.clear();
        reference::attended_within(p, position, p + 1, positions);
        reference::reduce(partial, rows, layer, q, positions, scale, scores);
        to_part(partial, own.data());
        for (std::size_t r = 0; r < layout_.ranks; ++r) parts[r] = &all[(r * n + i) * part];
        parts[layout_.ranks] = own.data();
        merge(parts, width, o);
      });

  // Each rank writes its own rows of the chunk, and no other.
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t p = position + i;
    driver::HostKvState* owner = shards[layout_.owner(p)];
    if (owner == nullptr) continue;
    for (std::size_t layer = 0; layer < shape_.layers; ++layer) {
      for (const driver::Plane plane : {driver::Plane::key, driver::Plane::value}) {
        std::copy_n(rows.row(layer, plane, p), width, owner->row(layer, plane, layout_.local(p)));
      }
    }
  }
}

void DcpReferenceEngine::decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) {
  prefill(kv, std::span<const token>(&next, 1), position, logits);
}

}  // namespace pfx::engines
