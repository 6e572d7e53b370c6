#pragma once

/// \file
/// One rank's KV state in a decode-context-parallel group (docs/driver.md, "The sharded lane"): the
/// rows of the positions the layout gives this rank, and no other. Its positions are the lane's, so a
/// Lane drives it as it drives one whole state, and each operation acts on this rank's own rows by
/// their local length: forget(p) forgets its rows from layout.local_len(p, rank) on, fill and
/// copy_rows over [from, to) touch its rows [local_len(from), local_len(to)).

#include <pfx/driver/kv_state.hpp>
#include <pfx/driver/shard_layout.hpp>

#include <cstddef>
#include <memory>
#include <vector>

namespace pfx::driver {

class RankKvState final : public KvState {
 public:
  /// Rank `rank` of `layout` for a lane of `capacity` positions; `rows` must have
  /// layout.shard_capacity(capacity) rows and own them (std::invalid_argument naming the problem
  /// otherwise, as for ranks or interleave 0 or rank >= ranks).
  RankKvState(std::size_t capacity, const ShardLayout& layout, std::size_t rank, std::unique_ptr<KvState> rows);

  /// capacity: the lane's positions; layers and width: the rows'.
  [[nodiscard]] const KvShape& shape() const noexcept override { return shape_; }
  [[nodiscard]] const ShardLayout& layout() const noexcept { return layout_; }
  [[nodiscard]] std::size_t rank() const noexcept { return rank_; }
  /// This rank's rows, by local row (the row of position p is layout().local(p)).
  [[nodiscard]] KvState& rows() noexcept { return *rows_; }
  [[nodiscard]] const KvState& rows() const noexcept { return *rows_; }

  /// Its rows from local_len(from, rank) on no longer hold anything.
  void forget(std::size_t from) override;
  [[nodiscard]] bool owns_rows() const noexcept override { return true; }
  [[nodiscard]] bool holds(std::size_t position) const noexcept override {
    return position < shape_.capacity && layout_.owner(position) == rank_;
  }
  /// Fills its rows among positions [from, to).
  void fill(std::size_t from, std::size_t to, float value) override;
  /// Its rows among positions [from, to), in position order, in KvState's layout.
  [[nodiscard]] std::vector<float> copy_rows(std::size_t from, std::size_t to) const override;
  void synchronize() override { rows_->synchronize(); }
  /// The bytes of its rows alone: about 1/ranks of the whole state's.
  [[nodiscard]] std::size_t memory_bytes() const noexcept override { return rows_->memory_bytes(); }

 protected:
  /// Each of its rows among [from, to), named by its position.
  void visit_rows(std::size_t from, std::size_t to, const RowVisitor& visit) const override;

 private:
  KvShape shape_;
  ShardLayout layout_;
  std::size_t rank_;
  std::unique_ptr<KvState> rows_;
};

}  // namespace pfx::driver
