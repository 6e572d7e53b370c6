#pragma once

/// \file
/// Ranks as threads of one process: a ThreadsCollective group hands out one Collective per rank, each
/// to be used by one thread. The tests run a sharded lane per thread on it.

#include <pfx/driver/collective.hpp>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace pfx::driver {

class ThreadsCollective {
 public:
  /// A group of `ranks` ranks (std::invalid_argument when 0).
  explicit ThreadsCollective(std::size_t ranks);
  ThreadsCollective(const ThreadsCollective&) = delete;
  ThreadsCollective& operator=(const ThreadsCollective&) = delete;
  ~ThreadsCollective();

  [[nodiscard]] std::size_t size() const noexcept { return endpoints_.size(); }
  /// Rank r's end (std::out_of_range past the group).
  [[nodiscard]] Collective& rank(std::size_t r);

 private:
  class Endpoint;
  /// Rank `rank`'s part of one round: `mine` is its bytes, `all` receives every rank's, rank 0's first.
  void all_gather(std::size_t rank, std::span<const std::byte> mine, std::span<std::byte> all);

  std::mutex mutex_;
  std::condition_variable done_;
  std::vector<std::byte> gathering_;  ///< the bytes of the ranks that arrived in this round
  std::vector<std::byte> gathered_;   ///< the last finished round's bytes
  std::size_t arrived_ = 0;
  std::uint64_t round_ = 0;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

}  // namespace pfx::driver
