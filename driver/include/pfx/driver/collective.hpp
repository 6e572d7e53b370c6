#pragma once

/// \file
/// How the ranks of a sharded lane talk: one operation, an all-gather, of a few words (all the
/// agreement on a decision and on a commit needs) or of floats (the partial attention results a
/// decode-context-parallel engine exchanges; docs/driver.md, "The sharded lane"). There is no
/// reduction: an engine merges what it gathered itself, in rank order, so that the sum's order is
/// its own and not the order a collective's algorithm picks.
/// Implementations: SoloCollective (one rank: a single controller), ThreadsCollective (ranks as
/// threads of one process, for tests), MpiCollective (pfx/driver/mpi_collective.hpp) and
/// NcclCollective (pfx/driver/nccl_collective.hpp), built when their libraries are found.

#include <cstddef>
#include <cstdint>
#include <span>

namespace pfx::driver {

class Collective {
 public:
  virtual ~Collective() = default;
  Collective() = default;
  Collective(const Collective&) = delete;
  Collective& operator=(const Collective&) = delete;

  /// This rank, 0 .. size() - 1.
  [[nodiscard]] virtual std::size_t rank() const noexcept = 0;
  /// The number of ranks, at least 1.
  [[nodiscard]] virtual std::size_t size() const noexcept = 0;

  /// Every rank calls it with the same number of words, in the same order of calls; `all` (size() *
  /// mine.size() words) receives every rank's words, rank 0's first. Blocks until every rank called.
  /// std::invalid_argument, on this rank and before it communicates, when all.size() is not
  /// size() * mine.size().
  virtual void all_gather(std::span<const std::uint64_t> mine, std::span<std::uint64_t> all) = 0;
  /// The same for fp32 values, gathered bit for bit.
  virtual void all_gather(std::span<const float> mine, std::span<float> all) = 0;
};

/// Throws std::invalid_argument naming `who` unless all.size() == ranks * mine.size().
void check_all_gather(const char* who, std::size_t ranks, std::size_t mine, std::size_t all);

/// One rank alone: all_gather copies `mine` into `all`.
class SoloCollective final : public Collective {
 public:
  [[nodiscard]] std::size_t rank() const noexcept override { return 0; }
  [[nodiscard]] std::size_t size() const noexcept override { return 1; }
  void all_gather(std::span<const std::uint64_t> mine, std::span<std::uint64_t> all) override;
  void all_gather(std::span<const float> mine, std::span<float> all) override;
};

}  // namespace pfx::driver
