#include <pfx/driver/sharded_kv_state.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace pfx::driver {

ShardedKvState::ShardedKvState(const KvShape& shape, const ShardLayout& layout,
                               std::vector<std::unique_ptr<KvState>> shards)
    : shape_(shape), layout_(layout), shards_(std::move(shards)) {
  check_shape(shape, "ShardedKvState");
  if (layout.ranks == 0 || layout.interleave == 0) {
    throw std::invalid_argument("ShardedKvState: ranks and interleave must both be at least 1");
  }
  if (shards_.size() != layout.ranks) {
    throw std::invalid_argument("ShardedKvState: " + std::to_string(shards_.size()) + " shards for " +
                                std::to_string(layout.ranks) + " ranks");
  }
  const KvShape expected{layout.shard_capacity(shape.capacity), shape.layers, shape.width};
  for (std::size_t r = 0; r < shards_.size(); ++r) {
    if (shards_[r] == nullptr || shards_[r]->shape() != expected) {
      throw std::invalid_argument("ShardedKvState: shard " + std::to_string(r) + " must have " +
                                  std::to_string(expected.capacity) + " rows of " + std::to_string(shape.layers) +
                                  " layers of width " + std::to_string(shape.width));
    }
  }
}

template <class Step>
void ShardedKvState::for_each_run(std::size_t from, std::size_t to, Step&& step) const {
  const std::size_t interleave = layout_.interleave;
  for (std::size_t p = from; p < to;) {
    const std::size_t block_end = p / interleave * interleave + interleave;  // > p, within capacity's range
    const std::size_t end = std::min(to, block_end < p ? to : block_end);
    const std::size_t local = layout_.local(p);
    step(layout_.owner(p), local, local + (end - p), p);
    p = end;
  }
}

void ShardedKvState::forget(std::size_t from) {
  check_rows(shape_, from, shape_.capacity, "ShardedKvState::forget");
  // On each shard, the rows of positions below `from` are its first ones.
  for (std::size_t rank = 0; rank < layout_.ranks; ++rank) shards_[rank]->forget(layout_.local_len(from, rank));
}

void ShardedKvState::fill(std::size_t from, std::size_t to, float value) {
  check_rows(shape_, from, to, "ShardedKvState::fill");
  for_each_run(from, to, [&](std::size_t owner, std::size_t local_from, std::size_t local_to, std::size_t) {
    shards_[owner]->fill(local_from, local_to, value);
  });
}

std::vector<float> ShardedKvState::copy_rows(std::size_t from, std::size_t to) const {
  check_rows(shape_, from, to, "ShardedKvState::copy_rows");
  const std::size_t rows = to - from;
  const std::size_t width = shape_.width;
  std::vector<float> out(shape_.layers * 2 * rows * width);
  for_each_run(from, to, [&](std::size_t owner, std::size_t local_from, std::size_t local_to, std::size_t p) {
    const std::vector<float> run = shards_[owner]->copy_rows(local_from, local_to);
    const std::size_t length = local_to - local_from;
    for (std::size_t plane = 0; plane < shape_.layers * 2; ++plane) {  // layer-major: keys, then values
      std::copy_n(run.begin() + static_cast<std::ptrdiff_t>(plane * length * width), length * width,
                  out.begin() + static_cast<std::ptrdiff_t>((plane * rows + (p - from)) * width));
    }
  });
  return out;
}

void ShardedKvState::synchronize() {
  for (const auto& shard : shards_) shard->synchronize();
}

std::size_t ShardedKvState::memory_bytes() const noexcept {
  std::size_t bytes = 0;
  for (const auto& shard : shards_) bytes += shard->memory_bytes();
  return bytes;
}

}  // namespace pfx::driver
