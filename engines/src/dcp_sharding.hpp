#pragma once

/// \file
/// How the decode-context-parallel reference engines, on the host (DcpReferenceEngine) and on the
/// device (cuda::DcpReferenceEngineOnDevice), spread a KV state over the ranks: the layout checked
/// against the group, the KV state each makes, and the shards of a KV state this process holds. The
/// two differ only in the type of a shard (`Rows`: driver::HostKvState, driver::cuda::KvStateOnDevice).
/// Private to engines/ (not installed): the host engine's source and the CUDA one include it.
///
/// `group` is this rank's end of a Collective of layout.ranks ranks, one process or thread per rank,
/// or null for the single controller, one process that holds every rank's rows.

#include <pfx/driver/collective.hpp>
#include <pfx/driver/kv_shape.hpp>
#include <pfx/driver/kv_state.hpp>
#include <pfx/driver/rank_kv_state.hpp>
#include <pfx/driver/shard_layout.hpp>
#include <pfx/driver/sharded_kv_state.hpp>
#include <pfx/engines/reference_model.hpp>

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace pfx::engines {

/// Throws std::invalid_argument naming `engine` for ranks or interleave 0, or a group whose size is
/// not layout.ranks.
inline void check_dcp_layout(const char* engine, const driver::ShardLayout& layout, const driver::Collective* group) {
  if (layout.ranks == 0 || layout.interleave == 0) {
    throw std::invalid_argument(std::string(engine) + ": ranks and interleave must both be at least 1");
  }
  if (group != nullptr && group->size() != layout.ranks) {
    throw std::invalid_argument(std::string(engine) + ": a group of " + std::to_string(group->size()) +
                                " ranks cannot hold a layout of " + std::to_string(layout.ranks));
  }
}

/// The KV state of `capacity` positions a DCP engine of `shape` makes, each shard a `Rows` of
/// layout.shard_capacity(capacity) rows: every rank's in a ShardedKvState for the single controller,
/// this rank's alone in a RankKvState in a group.
template <class Rows>
std::unique_ptr<driver::KvState> make_dcp_kv_state(const ReferenceModelShape& shape, const driver::ShardLayout& layout,
                                                   const driver::Collective* group, std::size_t capacity) {
  const driver::KvShape rows{layout.shard_capacity(capacity), shape.layers, shape.width};
  if (group != nullptr) {
    return std::make_unique<driver::RankKvState>(capacity, layout, group->rank(), std::make_unique<Rows>(rows));
  }
  std::vector<std::unique_ptr<driver::KvState>> shards;
  for (std::size_t r = 0; r < layout.ranks; ++r) shards.push_back(std::make_unique<Rows>(rows));
  return std::make_unique<driver::ShardedKvState>(driver::KvShape{capacity, shape.layers, shape.width}, layout,
                                                  std::move(shards));
}

/// The shards of `kv` this process holds, by rank: every rank's for the single controller (`kv` a
/// ShardedKvState of `layout`), this rank's alone in a group (`kv` a RankKvState of `layout` and this
/// rank; the others' are null). Throws std::invalid_argument naming `engine` for any other state.
template <class Rows>
std::vector<Rows*> held_shards(const char* engine, driver::KvState& kv, const driver::ShardLayout& layout,
                               const driver::Collective* group) {
  std::vector<Rows*> shards(layout.ranks, nullptr);
  bool usable = false;
  if (auto* sharded = dynamic_cast<driver::ShardedKvState*>(&kv); sharded != nullptr && group == nullptr) {
    usable = sharded->layout() == layout;
    for (std::size_t r = 0; usable && r < layout.ranks; ++r) {
      shards[r] = dynamic_cast<Rows*>(&sharded->shard(r));
      usable = shards[r] != nullptr;
    }
  } else if (auto* mine = dynamic_cast<driver::RankKvState*>(&kv); mine != nullptr && group != nullptr) {
    usable = mine->layout() == layout && mine->rank() == group->rank();
    shards[group->rank()] = dynamic_cast<Rows*>(&mine->rows());
    usable = usable && shards[group->rank()] != nullptr;
  }
  if (!usable) {
    throw std::invalid_argument(std::string(engine) + ": the KV state is not one this engine made for its layout " +
                                "and rank (use make_kv_state)");
  }
  return shards;
}

}  // namespace pfx::engines
