#pragma once

/// \file
/// A KV state in host memory: one allocation of shape.bytes() at construction, never resized.

#include <pfx/driver/kv_state.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace pfx::driver {

class HostKvState final : public KvState {
 public:
  /// Allocates the whole state and fills it with NaN, so that a row read before it is written is
  /// caught like a poisoned one. Throws std::invalid_argument on a zero dimension.
  explicit HostKvState(const KvShape& shape);

  [[nodiscard]] const KvShape& shape() const noexcept override { return shape_; }
  /// Nothing to drop: the rows are pfx's (forget_rows poisons them where poisoning is on).
  void forget(std::size_t from) override { check_rows(shape_, from, shape_.capacity, "HostKvState::forget"); }
  [[nodiscard]] bool owns_rows() const noexcept override { return true; }
  void fill(std::size_t from, std::size_t to, float value) override;
  [[nodiscard]] std::vector<float> copy_rows(std::size_t from, std::size_t to) const override;
  void synchronize() override {}
  [[nodiscard]] std::size_t memory_bytes() const noexcept override { return shape_.bytes(); }

  /// Row `position` of `plane` in `layer` (width floats). Unchecked, for engines' inner loops.
  [[nodiscard]] float* row(std::size_t layer, Plane plane, std::size_t position) noexcept {
    return data_.get() + row_offset(shape_, layer, plane, position);
  }
  [[nodiscard]] const float* row(std::size_t layer, Plane plane, std::size_t position) const noexcept {
    return data_.get() + row_offset(shape_, layer, plane, position);
  }
  /// The one allocation (its address never changes).
  [[nodiscard]] const float* data() const noexcept { return data_.get(); }

 private:
  KvShape shape_;
  std::unique_ptr<float[]> data_;
};

}  // namespace pfx::driver
