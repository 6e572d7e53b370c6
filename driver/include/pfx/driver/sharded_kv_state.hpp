#pragma once

/// \file
/// A KV state split over N shards, as decode-context-parallel engines lay it out: the row of position
/// p lives on shard (p / interleave) mod N (docs/driver.md, "The sharded lane"). Seen through the
/// KvState interface it is one state of the whole capacity: fill and copy_rows address positions,
/// and each touches the rows on their owners.

#include <pfx/driver/kv_state.hpp>
#include <pfx/driver/shard_layout.hpp>

#include <cstddef>
#include <memory>
#include <vector>

namespace pfx::driver {

class ShardedKvState final : public KvState {
 public:
  /// `shape` is the whole state's; every shard must have shape.layers, shape.width and
  /// layout.shard_capacity(shape.capacity) rows, and there must be layout.ranks of them
  /// (std::invalid_argument naming the problem otherwise, as for a zero dimension, ranks or interleave).
  ShardedKvState(const KvShape& shape, const ShardLayout& layout, std::vector<std::unique_ptr<KvState>> shards);

  [[nodiscard]] const KvShape& shape() const noexcept override { return shape_; }
  [[nodiscard]] const ShardLayout& layout() const noexcept { return layout_; }
  [[nodiscard]] KvState& shard(std::size_t rank) { return *shards_.at(rank); }
  [[nodiscard]] const KvState& shard(std::size_t rank) const { return *shards_.at(rank); }

  /// Forgets, on every shard, the rows of positions at or past `from`.
  void forget(std::size_t from) override;
  [[nodiscard]] bool owns_rows() const noexcept override { return true; }
  /// Fills rows [from, to) on their owners.
  void fill(std::size_t from, std::size_t to, float value) override;
  /// Rows [from, to) gathered from their owners in position order, in KvState's layout.
  [[nodiscard]] std::vector<float> copy_rows(std::size_t from, std::size_t to) const override;
  /// Synchronizes every shard.
  void synchronize() override;
  /// The shards' bytes together.
  [[nodiscard]] std::size_t memory_bytes() const noexcept override;

 private:
  /// Calls step(owner, local_from, local_to, from) for each run of consecutive positions in
  /// [from, to) that one block of one shard holds.
  template <class Step>
  void for_each_run(std::size_t from, std::size_t to, Step&& step) const;

  KvShape shape_;
  ShardLayout layout_;
  std::vector<std::unique_ptr<KvState>> shards_;
};

}  // namespace pfx::driver
