#pragma once

/// \file
/// A lane whose KV state is split over N shards, one rank of a group that serves every request
/// together (docs/driver.md, "The sharded lane"). Each rank keeps its own record and decides from
/// it; the ranks agree through one all-gather per request (offset, a digest of the record, a digest
/// of the request) and reuse only when they all agree; they commit only when every rank's write
/// succeeded (one all-gather of the outcomes). With a SoloCollective, one process drives all N
/// shards with one record (single controller).

#include <pfx/driver/collective.hpp>
#include <pfx/driver/engine.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/driver/sharded_engine.hpp>
#include <pfx/driver/sharded_kv_state.hpp>
#include <pfx/record.hpp>
#include <pfx/token.hpp>

#include <cstddef>
#include <cstdint>
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
  /// A Lane over a ShardedEngine(engine, layout): the KV state has layout.ranks shards. `collective`
  /// connects this rank with the others of its group (every rank builds its lane with the same
  /// options and layout); it and the engine must outlive the lane. Throws what Lane and ShardedEngine
  /// throw.
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
  /// The KV state, rows gathered from their owners by copy_rows.
  [[nodiscard]] const ShardedKvState& kv() const noexcept;
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

  Collective& collective_;
  AllWrote all_wrote_;
  ShardedEngine engine_;
  Lane lane_;
  std::size_t divergences_ = 0;
};

}  // namespace pfx::driver
