#include <pfx/driver/errors.hpp>
#include <pfx/driver/rank_kv_state.hpp>
#include <pfx/driver/sharded_lane.hpp>

#include <algorithm>
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

Engine& ShardedLane::served(Engine& engine, const ShardLayout& layout, Collective& collective,
                            std::unique_ptr<ShardedEngine>& sharded) {
  const auto describe_layout = [](const ShardLayout& l) {
    return std::to_string(l.ranks) + " ranks, interleave " + std::to_string(l.interleave);
  };
  if (const std::optional<ShardLayout> own = engine.context_parallel()) {
    if (*own != layout) {
      throw ConfigError("ShardedLane: the engine splits its KV rows over " + describe_layout(*own) + ", the lane over " +
                        describe_layout(layout));
    }
    return engine;
  }
  if (collective.size() > 1) {
    throw ConfigError("ShardedLane: rank " + std::to_string(collective.rank()) + " of " +
                      std::to_string(collective.size()) + " needs a decode-context-parallel engine (its KV state "
                      "holds the rank's rows alone): an engine whose attention reads every row would need every "
                      "rank to hold them all");
  }
  sharded = std::make_unique<ShardedEngine>(engine, layout);
  return *sharded;
}

ShardedLane::ShardedLane(Engine& engine, const LaneOptions& options, const ShardLayout& layout,
                         Collective& collective)
    : collective_(collective),
      all_wrote_(collective),
      all_called_(served(engine, layout, collective, sharded_), collective),
      lane_(all_called_, options, &all_wrote_) {
  // What the ranks must agree on before any request: the layout, the positions, the chunk grid.
  const std::array<std::uint64_t, 4> mine{layout.ranks, layout.interleave, options.capacity, engine.chunk()};
  std::vector<std::uint64_t> all(mine.size() * collective.size());
  collective.all_gather(mine, all);
  for (std::size_t r = 0; r < collective.size(); ++r) {
    if (!std::equal(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(r * mine.size()))) {
      throw ConfigError("ShardedLane: rank " + std::to_string(r) + "'s layout, capacity or chunk differs from rank " +
                        std::to_string(collective.rank()) + "'s");
    }
  }
  if (collective.size() > 1) {
    const auto* own = dynamic_cast<const RankKvState*>(&lane_.kv());
    if (own == nullptr || own->layout() != layout || own->rank() != collective.rank()) {
      throw ConfigError("ShardedLane: rank " + std::to_string(collective.rank()) +
                        "'s KV state is not its own rows of the layout: give the engine this rank's collective");
    }
  }
}

std::size_t ShardedLane::kv_bytes_per_rank() const noexcept {
  if (const auto* shards = dynamic_cast<const ShardedKvState*>(&lane_.kv())) {
    std::size_t most = 0;
    for (std::size_t r = 0; r < shards->layout().ranks; ++r) most = std::max(most, shards->shard(r).memory_bytes());
    return most;
  }
  return lane_.kv().memory_bytes();
}

template <class Call>
void ShardedLane::AllCalled::agree_on(Call&& call) {
  if (collective_.size() == 1) {
    call();
    return;
  }
  const auto everyone_called = [this](bool called) {
    const std::array<std::uint64_t, 1> mine{called ? 1U : 0U};
    std::vector<std::uint64_t> all(collective_.size());
    collective_.all_gather(mine, all);
    return std::all_of(all.begin(), all.end(), [](std::uint64_t word) { return word == 1; });
  };
  try {
    call();
  } catch (...) {
    (void)everyone_called(false);  // the others learn of it at this call, and stop here too
    throw;
  }
  if (!everyone_called(true)) {
    throw PeerFault("ShardedLane::serve: another rank's engine call failed; the request was aborted on every rank");
  }
}

void ShardedLane::AllCalled::prefill(KvState& kv, std::span<const token> tokens, std::size_t position,
                                     std::span<float> logits) {
  agree_on([&] { inner_.prefill(kv, tokens, position, logits); });
}

void ShardedLane::AllCalled::decode(KvState& kv, token next, std::size_t position, std::span<float> logits) {
  agree_on([&] { inner_.decode(kv, next, position, logits); });
}

void ShardedLane::AllWrote::agree(bool wrote) {
  const std::array<std::uint64_t, 1> mine{wrote ? 1U : 0U};
  std::vector<std::uint64_t> all(collective_.size());
  collective_.all_gather(mine, all);
  const bool every_rank_wrote = std::all_of(all.begin(), all.end(), [](std::uint64_t word) { return word == 1; });
  // A rank that failed rethrows its own error once this returns; the others refuse the commit.
  if (wrote && !every_rank_wrote) {
    throw PeerFault("ShardedLane::serve: another rank's write failed; the request was aborted on every rank");
  }
}

ShardedResponse ShardedLane::serve(std::span<const token> prompt, std::size_t max_new_tokens) {
  // Step 1: the ranks agree on the decision before anything is written.
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

  // The lane's flow; step 2, the agreement on the writes, is its before-commit step (AllWrote).
  static_cast<Response&>(response) = lane_.serve(prompt, max_new_tokens);
  return response;
}

}  // namespace pfx::driver
