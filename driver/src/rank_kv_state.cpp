#include <pfx/driver/rank_kv_state.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace pfx::driver {

RankKvState::RankKvState(std::size_t capacity, const ShardLayout& layout, std::size_t rank, std::unique_ptr<KvState> rows)
    : layout_(layout), rank_(rank), rows_(std::move(rows)) {
  if (layout.ranks == 0 || layout.interleave == 0) {
    throw std::invalid_argument("RankKvState: ranks and interleave must both be at least 1");
  }
  if (rank >= layout.ranks) {
    throw std::invalid_argument("RankKvState: rank " + std::to_string(rank) + " is not one of " +
                                std::to_string(layout.ranks) + " ranks");
  }
  if (rows_ == nullptr || !rows_->owns_rows() || rows_->shape().capacity != layout.shard_capacity(capacity)) {
    throw std::invalid_argument("RankKvState: rank " + std::to_string(rank) + " needs rows of its own for " +
                                std::to_string(layout.shard_capacity(capacity)) + " positions of " +
                                std::to_string(capacity));
  }
  shape_ = {capacity, rows_->shape().layers, rows_->shape().width};
  check_shape(shape_, "RankKvState");
}

void RankKvState::forget(std::size_t from) {
  check_rows(shape_, from, shape_.capacity, "RankKvState::forget");
  rows_->forget(layout_.local_len(from, rank_));
}

void RankKvState::fill(std::size_t from, std::size_t to, float value) {
  check_rows(shape_, from, to, "RankKvState::fill");
  rows_->fill(layout_.local_len(from, rank_), layout_.local_len(to, rank_), value);
}

std::vector<float> RankKvState::copy_rows(std::size_t from, std::size_t to) const {
  check_rows(shape_, from, to, "RankKvState::copy_rows");
  return rows_->copy_rows(layout_.local_len(from, rank_), layout_.local_len(to, rank_));
}

void RankKvState::visit_rows(std::size_t from, std::size_t to, const RowVisitor& visit) const {
  // Its local rows [local_len(from), local_len(to)) are its positions in [from, to), in order.
  std::size_t position = from;
  rows_->for_each_row(layout_.local_len(from, rank_), layout_.local_len(to, rank_),
                      [&](std::size_t, std::span<const std::byte> bytes) {
                        while (position < to && !holds(position)) ++position;
                        visit(position++, bytes);
                      });
}

}  // namespace pfx::driver
