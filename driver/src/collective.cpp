#include <pfx/driver/collective.hpp>
#include <pfx/driver/threads_collective.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace pfx::driver {

void check_all_gather(const char* who, std::size_t ranks, std::size_t mine, std::size_t all) {
  if (mine > 0 && all / mine != ranks) {
    throw std::invalid_argument(std::string(who) + "::all_gather: " + std::to_string(all) +
                                " words cannot hold " + std::to_string(ranks) + " ranks' " +
                                std::to_string(mine) + " words");
  }
  if (all != ranks * mine) {
    throw std::invalid_argument(std::string(who) + "::all_gather: " + std::to_string(all) + " words for " +
                                std::to_string(ranks) + " ranks of " + std::to_string(mine));
  }
}

void SoloCollective::all_gather(std::span<const std::uint64_t> mine, std::span<std::uint64_t> all) {
  check_all_gather("SoloCollective", 1, mine.size(), all.size());
  std::copy(mine.begin(), mine.end(), all.begin());
}

void SoloCollective::all_gather(std::span<const float> mine, std::span<float> all) {
  check_all_gather("SoloCollective", 1, mine.size(), all.size());
  std::copy(mine.begin(), mine.end(), all.begin());
}

class ThreadsCollective::Endpoint final : public Collective {
 public:
  Endpoint(ThreadsCollective& group, std::size_t rank) : group_(group), rank_(rank) {}
  [[nodiscard]] std::size_t rank() const noexcept override { return rank_; }
  [[nodiscard]] std::size_t size() const noexcept override { return group_.size(); }
  void all_gather(std::span<const std::uint64_t> mine, std::span<std::uint64_t> all) override {
    check_all_gather("ThreadsCollective", group_.size(), mine.size(), all.size());
    group_.all_gather(rank_, std::as_bytes(mine), std::as_writable_bytes(all));
  }
  void all_gather(std::span<const float> mine, std::span<float> all) override {
    check_all_gather("ThreadsCollective", group_.size(), mine.size(), all.size());
    group_.all_gather(rank_, std::as_bytes(mine), std::as_writable_bytes(all));
  }

 private:
  ThreadsCollective& group_;
  std::size_t rank_;
};

ThreadsCollective::ThreadsCollective(std::size_t ranks) {
  if (ranks == 0) throw std::invalid_argument("ThreadsCollective: a group needs at least 1 rank");
  for (std::size_t r = 0; r < ranks; ++r) endpoints_.push_back(std::make_unique<Endpoint>(*this, r));
}

ThreadsCollective::~ThreadsCollective() = default;

Collective& ThreadsCollective::rank(std::size_t r) { return *endpoints_.at(r); }

void ThreadsCollective::all_gather(std::size_t rank, std::span<const std::byte> mine, std::span<std::byte> all) {
  const std::size_t ranks = size();
  std::unique_lock lock(mutex_);
  gathering_.resize(ranks * mine.size());
  std::copy(mine.begin(), mine.end(), gathering_.begin() + static_cast<std::ptrdiff_t>(rank * mine.size()));
  const std::uint64_t round = round_;
  if (++arrived_ == ranks) {
    // The last to arrive publishes. A rank cannot start the round after next before every rank
    // copied this one, since that round needs all of them.
    gathered_ = gathering_;
    arrived_ = 0;
    ++round_;
    done_.notify_all();
  } else {
    done_.wait(lock, [&] { return round_ != round; });
  }
  std::copy(gathered_.begin(), gathered_.end(), all.begin());
}

}  // namespace pfx::driver
