#pragma once

/// \file
/// A lane whose KV state is split over N shards, one rank of a group that serves every request
/// together (docs/driver.md, "The sharded lane"). Each rank keeps its own record and decides from
/// it; the ranks agree through one all-gather per request (offset, a digest of the record, a digest
/// of the request) and reuse only when they all agree; they commit only when every rank's write
/// succeeded (one all-gather of the outcomes).
///
/// Two forms:
///  - one rank per process (or thread), on a decode-context-parallel engine made for this rank
///    (Engine::context_parallel() is the layout, Engine::exchanges() true): the rank's KV state is
///    its own rows alone (a RankKvState), and after every engine call the ranks agree that it
///    succeeded on all of them, so that a failure on one stops every rank at the same call;
///  - single controller (a SoloCollective): one process drives all N shards with one record, on a
///    decode-context-parallel engine made without a group, or on any other engine over a
///    ShardedKvState (ShardedEngine), whose attention reads every row and so equals one state's.

#include <pfx/driver/collective.hpp>
#include <pfx/driver/engine.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/driver/sharded_engine.hpp>
#include <pfx/driver/sharded_kv_state.hpp>
#include <pfx/record.hpp>
#include <pfx/token.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>

namespace pfx::driver {

/// What a rank whose own write succeeded throws when another rank's failed: the request was
/// aborted on every rank.
class PeerFault : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ShardedResponse : Response {
  /// The ranks' decisions or records differed: every rank cleared its record and served the request
  /// cold (decision.offset is 0).
  bool diverged = false;
};

/// A digest of a record (its ids and canonical_end); equal records have equal digests.
[[nodiscard]] std::uint64_t record_digest(const Record& record) noexcept;

class ShardedLane {
 public:
  /// A Lane over `engine` when its context_parallel() is `layout`, else (single controller only) over
  /// a ShardedEngine(engine, layout). `collective` connects this rank with the others of its group;
  /// it and the engine must outlive the lane. Every rank builds its lane with the same options and
  /// layout, and the ranks check that they did (one all-gather).
  /// Throws: ConfigError when the ranks' layouts, capacities or chunks differ, when a group of more
  /// than one rank is given an engine that is not decode context parallel over `layout` (its ranks
  /// would each hold every row), or when the engine's KV state is not this rank's rows; what Lane
  /// and ShardedEngine throw.
  ShardedLane(Engine& engine, const LaneOptions& options, const ShardLayout& layout, Collective& collective);

  /// Serves one request on every rank of the group; every rank calls it with the same request. The
  /// ranks agree twice, the two steps a lone lane does not have:
  ///   1. on the decision, before anything is written: when the ranks' offsets or record digests
  ///      differ, every rank clears its record and serves the request cold (response.diverged);
  ///   2. on the writes, as the Lane's before-commit step (BeforeCommit).
  /// Refuses (RequestError, before anything is written): on every rank, requests that differ across
  /// the ranks; on every rank that sees it, what Lane::serve refuses.
  /// Effect: Lane::serve's, on this rank's shards and record.
  /// Throws: unless every rank's writes succeeded, every rank aborts, keeping rows [0, offset): the
  /// rank that failed rethrows its error, the others throw PeerFault.
  ShardedResponse serve(std::span<const token> prompt, std::size_t max_new_tokens);

  /// Forgets this rank's record.
  /// Refuses: nothing: always safe.
  /// Effect: this rank's record is empty; the ranks then disagree, and the next request is served cold.
  void clear() { lane_.clear(); }

  /// This rank's Lane, whose machine holds this rank's record (the tests compare it across ranks).
  [[nodiscard]] const Lane& lane() const noexcept { return lane_; }
  /// The decision of the last request that got one on this rank, also when it then failed.
  [[nodiscard]] const Decision& last_decision() const noexcept { return lane_.last_decision(); }
  /// The KV state this rank holds: its own rows (a RankKvState) in a group, every shard (a
  /// ShardedKvState) in a single controller.
  [[nodiscard]] const KvState& kv() const noexcept { return lane_.kv(); }
  /// The bytes of KV rows one rank holds: the state's own allocation in a group; the largest shard's
  /// in a single controller.
  [[nodiscard]] std::size_t kv_bytes_per_rank() const noexcept;
  /// Requests served cold because the ranks disagreed.
  [[nodiscard]] std::size_t divergences() const noexcept { return divergences_; }

 private:
  /// Step 2: one all-gather of whether each rank's writes succeeded, just before the lane commits.
  class AllWrote final : public BeforeCommit {
   public:
    explicit AllWrote(Collective& collective) : collective_(collective) {}
    void agree(bool wrote) override;

   private:
    Collective& collective_;
  };

  /// After each engine call, one all-gather of whether it succeeded on each rank: a rank whose call
  /// failed rethrows its error, the others throw PeerFault, all at the same call, so that no rank
  /// goes on to exchange with one that stopped. Only in a group of more than one rank.
  class AllCalled final : public Engine {
   public:
    AllCalled(Engine& inner, Collective& collective) : inner_(inner), collective_(collective) {}
    [[nodiscard]] std::size_t chunk() const noexcept override { return inner_.chunk(); }
    [[nodiscard]] std::size_t vocab() const noexcept override { return inner_.vocab(); }
    [[nodiscard]] std::unique_ptr<KvState> make_kv_state(std::size_t capacity) const override {
      return inner_.make_kv_state(capacity);
    }
    [[nodiscard]] std::optional<ShardLayout> context_parallel() const noexcept override {
      return inner_.context_parallel();
    }
    [[nodiscard]] bool exchanges() const noexcept override { return inner_.exchanges(); }
    void prefill(KvState& kv, std::span<const token> tokens, std::size_t position, std::span<float> logits) override;
    void decode(KvState& kv, token next, std::size_t position, std::span<float> logits) override;

   private:
    template <class Call>
    void agree_on(Call&& call);
    Engine& inner_;
    Collective& collective_;
  };

  /// The engine the lane runs on: `engine`, or a ShardedEngine over it (single controller).
  static Engine& served(Engine& engine, const ShardLayout& layout, Collective& collective,
                        std::unique_ptr<ShardedEngine>& sharded);

  Collective& collective_;
  AllWrote all_wrote_;
  std::unique_ptr<ShardedEngine> sharded_;  ///< single controller over an engine that reads every row
  AllCalled all_called_;
  Lane lane_;
  std::size_t divergences_ = 0;
};

}  // namespace pfx::driver
