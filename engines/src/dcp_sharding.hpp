#pragma once

/// \file
/// What a decode-context-parallel engine checks of its layout and of the KV state it is handed, for
/// the host engine (DcpReferenceEngine) and the one on the device (cuda::DcpReferenceEngineOnDevice)
/// alike: the layout against the group, and the shards the state holds for this process.

#include <pfx/driver/collective.hpp>
#include <pfx/driver/kv_state.hpp>
#include <pfx/driver/rank_kv_state.hpp>
#include <pfx/driver/shard_layout.hpp>
#include <pfx/driver/sharded_kv_state.hpp>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace pfx::engines {

/// Throws std::invalid_argument naming `engine` for ranks or interleave 0, or a group (`ranks`, null
/// for the single controller) whose size is not layout.ranks.
inline void check_dcp_layout(const char* engine, const driver::ShardLayout& layout, const driver::Collective* ranks) {
  if (layout.ranks == 0 || layout.interleave == 0) {
    throw std::invalid_argument(std::string(engine) + ": ranks and interleave must both be at least 1");
  }
  if (ranks != nullptr && ranks->size() != layout.ranks) {
    throw std::invalid_argument(std::string(engine) + ": a group of " + std::to_string(ranks->size()) +
                                " ranks cannot hold a layout of " + std::to_string(layout.ranks));
  }
}

/// The shards of `kv` this process holds, by rank, as `Rows` (the engine's own KV state type): every
/// rank's for the single controller (`ranks` null, `kv` a ShardedKvState of `layout`), this rank's
/// alone in a group (`kv` a RankKvState of `layout` and this rank; the others' are null). Throws
/// std::invalid_argument naming `engine` for any other state.
template <class Rows>
std::vector<Rows*> held_shards(const char* engine, driver::KvState& kv, const driver::ShardLayout& layout,
                               const driver::Collective* ranks) {
  std::vector<Rows*> shards(layout.ranks, nullptr);
  bool usable = false;
  if (auto* sharded = dynamic_cast<driver::ShardedKvState*>(&kv); sharded != nullptr && ranks == nullptr) {
    usable = sharded->layout() == layout;
    for (std::size_t r = 0; usable && r < layout.ranks; ++r) {
      shards[r] = dynamic_cast<Rows*>(&sharded->shard(r));
      usable = shards[r] != nullptr;
    }
  } else if (auto* mine = dynamic_cast<driver::RankKvState*>(&kv); mine != nullptr && ranks != nullptr) {
    usable = mine->layout() == layout && mine->rank() == ranks->rank();
    shards[ranks->rank()] = dynamic_cast<Rows*>(&mine->rows());
    usable = usable && shards[ranks->rank()] != nullptr;
  }
  if (!usable) {
    throw std::invalid_argument(std::string(engine) + ": the KV state is not one this engine made for its layout " +
                                "and rank (use make_kv_state)");
  }
  return shards;
}

}  // namespace pfx::engines
