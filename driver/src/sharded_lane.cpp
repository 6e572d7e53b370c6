#include <pfx/driver/errors.hpp>
#include <pfx/driver/sharded_lane.hpp>

#include <array>
#include <string>
#include <vector>

namespace pfx::driver {
namespace {

/// FNV-1a over 64-bit words, each mixed whole: enough to tell records apart, not a cryptographic hash.
struct Digest {
  std::uint64_t value = 14695981039346656037ULL;
  void add(std::uint64_t word) noexcept {
    for (int shift = 0; shift < 64; shift += 8) {
      value ^= (word >> shift) & 0xffU;
      value *= 1099511628211ULL;
    }
  }
};

std::uint64_t request_digest(std::span<const token> prompt, std::size_t max_new_tokens) noexcept {
  Digest d;
  d.add(prompt.size());
  for (const token t : prompt) d.add(static_cast<std::uint64_t>(t));
  d.add(max_new_tokens);
  return d.value;
}

}  // namespace

std::uint64_t record_digest(const Record& record) noexcept {
  Digest d;
  d.add(record.canonical_end);
  d.add(record.ids.size());
  for (const token t : record.ids) d.add(static_cast<std::uint64_t>(t));
  return d.value;
}

ShardedLane::ShardedLane(Engine& engine, const LaneOptions& options, const ShardLayout& layout,
                         Collective& collective)
    : collective_(collective), vote_(*this), engine_(engine, layout, &vote_), lane_(engine_, options) {}

const ShardedKvState& ShardedLane::kv() const noexcept {
  return static_cast<const ShardedKvState&>(lane_.kv());  // the ShardedEngine made it
}

bool ShardedLane::all_of(bool ok) {
  const std::array<std::uint64_t, 1> mine{ok ? 1U : 0U};
  std::vector<std::uint64_t> all(collective_.size());
  collective_.all_gather(mine, all);
  for (const std::uint64_t word : all) {
    if (word != 1) return false;
  }
  return true;
}

void ShardedLane::Vote::vote(bool local_ok) {
  if (!armed) return;
  armed = false;  // one vote per request
  if (!lane_.all_of(local_ok) && local_ok) {
    ++lane_.peer_faults_;
    throw PeerFault("ShardedLane::serve: another rank's write failed; the request was aborted on every rank");
  }
}

ShardedResponse ShardedLane::serve(std::span<const token> prompt, std::size_t max_new_tokens) {
  const Outcome answer = lane_.machine().query(prompt);
  if (!answer.accepted()) {
    throw std::logic_error("ShardedLane: the machine refused query: " + std::string(describe(answer.refusal)));
  }
  const std::array<std::uint64_t, 3> mine{answer.decision.offset, record_digest(lane_.machine().held()),
                                          request_digest(prompt, max_new_tokens)};
  std::vector<std::uint64_t> all(mine.size() * collective_.size());
  collective_.all_gather(mine, all);  // the one agreement per request

  ShardedResponse response;
  for (std::size_t r = 0; r < collective_.size(); ++r) {
    if (all[r * mine.size() + 2] != mine[2]) {
      throw RequestError("ShardedLane::serve: rank " + std::to_string(r) + " was given another request than rank " +
                         std::to_string(collective_.rank()));
    }
    if (all[r * mine.size()] != mine[0] || all[r * mine.size() + 1] != mine[1]) response.diverged = true;
  }
  if (response.diverged) {
    lane_.clear();  // every rank sees the same words, so every rank clears: never a silent mix
    ++divergences_;
  }

  vote_.armed = true;
  try {
    static_cast<Response&>(response) = lane_.serve(prompt, max_new_tokens);
  } catch (...) {
    // This rank failed before its synchronize voted: it still takes part in the one outcome exchange.
    if (vote_.armed) vote_.vote(false);
    throw;
  }
  return response;
}

}  // namespace pfx::driver
