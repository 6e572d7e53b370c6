#pragma once

/// \file
/// The shape of a lane's KV state: how many token rows it holds, in how many layers, how wide.

#include <cstddef>

namespace pfx::driver {

/// A KV state holds, for each of `capacity` token positions and each of `layers` layers, one key row
/// and one value row of `width` floats. It is allocated once at full capacity (docs/driver.md).
struct KvShape {
  std::size_t capacity = 0;
  std::size_t layers = 0;
  std::size_t width = 0;

  /// Floats in one layer's key (or value) rows for every position.
  [[nodiscard]] constexpr std::size_t floats_per_plane() const noexcept { return capacity * width; }
  /// Floats in the whole state: layers x {K, V} x capacity x width.
  [[nodiscard]] constexpr std::size_t floats() const noexcept { return layers * 2 * floats_per_plane(); }
  [[nodiscard]] constexpr std::size_t bytes() const noexcept { return floats() * sizeof(float); }

  friend constexpr bool operator==(const KvShape&, const KvShape&) = default;
};

/// Which of a layer's two planes.
enum class Plane : std::size_t { key = 0, value = 1 };

/// Where row `position` of `plane` in `layer` starts, in floats from the start of the state. The
/// layout is [layer][plane][position][width], so one layer's keys are contiguous, as attention reads
/// them.
[[nodiscard]] constexpr std::size_t row_offset(const KvShape& shape, std::size_t layer, Plane plane,
                                               std::size_t position) noexcept {
  return ((layer * 2 + static_cast<std::size_t>(plane)) * shape.capacity + position) * shape.width;
}

}  // namespace pfx::driver
