#include <pfx/driver/shard_layout.hpp>

#include <algorithm>

namespace pfx::driver {

std::size_t ShardLayout::shard_capacity(std::size_t capacity) const noexcept {
  if (capacity == 0) return 0;
  // local(p) <= p, and local(p) < blocks * interleave with blocks the blocks of ranks * interleave
  // positions that reach `capacity`.
  const std::size_t last = capacity - 1;
  const std::size_t blocks = last / interleave / ranks + 1;
  if (blocks > capacity / interleave) return capacity;  // blocks * interleave would pass capacity
  return std::min(capacity, blocks * interleave);
}

}  // namespace pfx::driver
