#pragma once

/// \file
/// Where a decode-context-parallel layout puts each position's KV row: the row of position p lives on
/// rank (p / interleave) mod ranks, as vLLM lays it out (docs/driver.md, "The sharded lane").

#include <cstddef>

namespace pfx::driver {

/// ranks >= 1 and interleave >= 1.
struct ShardLayout {
  std::size_t ranks = 1;
  std::size_t interleave = 1;

  /// The rank that holds position p: (p / interleave) mod ranks.
  [[nodiscard]] constexpr std::size_t owner(std::size_t position) const noexcept {
    return (position / interleave) % ranks;
  }
  /// The row of position p inside its owner: the owner's earlier blocks, then p's place in its block.
  [[nodiscard]] constexpr std::size_t local(std::size_t position) const noexcept {
    return position / interleave / ranks * interleave + position % interleave;
  }
  /// The rows of positions below p that rank r holds: its rows [0, local_len(p, r)) are exactly
  /// those, so forgetting positions from p on is forgetting its rows from local_len(p, r) on. Not
  /// linear in p: it grows only across r's own blocks. local(p) == local_len(p, owner(p)).
  [[nodiscard]] constexpr std::size_t local_len(std::size_t position, std::size_t rank) const noexcept {
    // Blocks 0 .. block - 1 lie wholly below p; r holds those congruent to r mod ranks, each
    // `interleave` rows, and the part of p's own block below p when that block is r's. Counting
    // blocks, never multiplying ranks by interleave, keeps it within 64 bits for any layout.
    const std::size_t block = position / interleave;
    const std::size_t whole = block / ranks + (rank < block % ranks ? 1 : 0);
    return whole * interleave + (block % ranks == rank ? position % interleave : 0);
  }
  /// Rows each rank needs so that every position below `capacity` has a row on its owner (rank 0's
  /// count, rounded up to its last block); about capacity / ranks.
  [[nodiscard]] std::size_t shard_capacity(std::size_t capacity) const noexcept;

  friend constexpr bool operator==(const ShardLayout&, const ShardLayout&) = default;
};

}  // namespace pfx::driver
