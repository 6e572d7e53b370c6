#include <pfx/driver/errors.hpp>
#include <pfx/driver/sharded_engine.hpp>

#include <stdexcept>
#include <utility>
#include <vector>

namespace pfx::driver {

ShardedEngine::ShardedEngine(Engine& inner, const ShardLayout& layout)
    : inner_(inner), layout_(layout) {
  if (layout.ranks == 0 || layout.interleave == 0) {
    throw std::invalid_argument("ShardedEngine: ranks and interleave must both be at least 1");
  }
}

std::unique_ptr<KvState> ShardedEngine::make_kv_state(std::size_t capacity) const {
  if (capacity == 0) throw ConfigError("ShardedEngine: capacity must be at least 1 token");
  std::vector<std::unique_ptr<KvState>> shards;
  shards.reserve(layout_.ranks);
  KvShape shape{};
  for (std::size_t r = 0; r < layout_.ranks; ++r) {
    shards.push_back(inner_.make_kv_state(layout_.shard_capacity(capacity)));
    if (shards.back() == nullptr) throw ConfigError("ShardedEngine: the inner engine made no KV state");
    shape = {capacity, shards.back()->shape().layers, shards.back()->shape().width};
  }
  return std::make_unique<ShardedKvState>(shape, layout_, std::move(shards));
}

}  // namespace pfx::driver
