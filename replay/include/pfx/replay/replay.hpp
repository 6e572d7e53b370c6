#pragma once

/// \file
/// A replay: serve a trace or a generated stream through a lane on one engine, optionally comparing
/// responses with a cold run bit for bit (THM-1), optionally with engine failures injected (DRV-4),
/// optionally sharded (SHARD-1..3). Reports each request to a callback. `pfx replay` and `pfx soak`
/// add their input and output.

#include <pfx/decision.hpp>
#include <pfx/driver/collective.hpp>
#include <pfx/driver/engine.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/driver/verify.hpp>
#include <pfx/replay/item.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace pfx::replay {

struct ReplaySettings {
  driver::LaneOptions lane{.poison = true};  ///< the resumed lane's; the cold side uses its capacity only
  bool verify = false;     ///< also serve requests cold and compare bit for bit: which, verify_every says
  /// With verify, request n is compared when n is a multiple of this, and so is every request that
  /// follows a failed one (the recovery is what failures put at risk) and the source's last.
  std::size_t verify_every = 1;
  double fault_rate = 0;   ///< probability that an engine call of the resumed lane fails (0..1)
  std::uint64_t seed = 253;///< of the injected failures
  /// Shards of the KV state (docs/driver.md, "The sharded lane"); with `collective` null and dcp > 1
  /// this process drives them all (single controller). The engine decides how attention reads them:
  /// a decode-context-parallel engine over this layout (Engine::context_parallel()) attends each
  /// rank's rows apart and merges, any other engine reads every row.
  std::size_t dcp = 1;
  std::size_t interleave = 1;
  /// The ranks of an SPMD run (one rank per process, under mpirun): every rank replays the same trace,
  /// and injected failures hit one rank per request, chosen from the seed. The engine must be this
  /// rank's of a decode-context-parallel group: each rank holds its own rows alone.
  driver::Collective* collective = nullptr;
  /// Asked between two requests; true ends the run there (the program: a signal arrived). None: the
  /// run ends with its source.
  std::function<bool()> stop{};
};

/// What happened to one request.
struct RequestReport {
  std::size_t number = 0;  ///< 1-based, among the trace's requests
  std::size_t line = 0;
  std::string label;
  std::string id;                   ///< the trace's "id" field as JSON text ("" when absent)
  std::size_t prompt_tokens = 0;
  std::size_t max_new_tokens = 0;
  Decision decision{};              ///< the offset the request began (or, failed, was to begin) at, and why
  std::size_t prefill_tokens = 0;   ///< prompt tokens the engine computed
  std::size_t generated_tokens = 0;
  double ttft_ms = 0;               ///< time to first token
  double prefill_ms = 0;
  /// With verification: whether the response equals the cold run bit for bit, and if not, what
  /// differs. Absent when not verified (or the request failed).
  std::optional<bool> bitexact{};
  std::string mismatch{};
  double cold_ttft_ms = 0;
  double cold_prefill_ms = 0;
  /// Non-empty when the request failed: the error. `injected` tells an injected failure from a
  /// real one (a stale-row read, which counts as a failed check).
  std::string error{};
  bool injected = false;
};

/// The first request whose response differed from its cold run: pfx::driver::verify's, so that both
/// name it alike (request 0: none).
using FirstMismatch = driver::VerifyMismatch;

/// The totals of a replay.
struct ReplaySummary {
  std::size_t requests = 0;       ///< requests in the trace
  std::size_t clears = 0;
  std::size_t failures = 0;       ///< requests that failed (injected or not)
  std::size_t stale_reads = 0;    ///< failures that were not injected: the engine read a poisoned row
  std::size_t prompt_tokens = 0;  ///< of the requests served
  std::size_t reused_tokens = 0;
  std::size_t prefill_tokens = 0;
  std::size_t verified = 0;       ///< requests compared with a cold run
  std::size_t mismatches = 0;
  FirstMismatch first_mismatch;
  std::size_t divergences = 0;    ///< sharded: requests served cold because the ranks disagreed
  /// The KV rows' bytes of the lane's state (the cold side's, with verify, are as many again): those
  /// this rank holds, measured from its state's own allocation (in a single controller, the largest
  /// shard's); each rank's, in rank order; and all of them together.
  std::size_t kv_bytes_per_rank = 0;
  std::vector<std::size_t> kv_bytes_by_rank;
  std::size_t kv_bytes_total = 0;
  double prefill_ms = 0;          ///< resumed, over the verified requests
  double cold_prefill_ms = 0;
  double ttft_ms = 0;             ///< resumed, over the verified requests
  double cold_ttft_ms = 0;
  double elapsed_s = 0;

  /// Whether no check failed: no mismatch, no stale read. A run that checked nothing fails no check:
  /// see unchecked().
  [[nodiscard]] bool ok() const noexcept { return mismatches == 0 && stale_reads == 0; }
  /// Why the run vouches for nothing though no check failed, or "" when it does: every request
  /// failed (nothing was served), or, with verification, no response was compared with a cold run.
  /// Such a run does not pass (exit status 1): a check that compared nothing is no check.
  [[nodiscard]] std::string unchecked(bool verify) const;
  /// ok() and not unchecked(verify): what a finished run that passed is.
  [[nodiscard]] bool passed(bool verify) const { return ok() && unchecked(verify).empty(); }
};

/// Told of every request, served or failed, verified or not, as soon as it is done.
using OnRequest = std::function<void(const RequestReport&)>;

/// Serves the items of `next` in order, until it gives nothing or settings.stop ends the run between
/// two requests. An injected failure or a stale-row read fails its request (the lane aborts it),
/// which is reported, and the run goes on.
/// Effect: on a lane (or sharded lane) and, with verify, a cold KV state, both made by the run.
/// Throws: driver::ConfigError for unusable settings; what the engine throws that is not a request
/// failure (a device error).
ReplaySummary run(const ItemSource& next, driver::Engine& engine, const ReplaySettings& settings,
                  const OnRequest& on_request = {});
/// The same over a trace held whole.
ReplaySummary run(std::span<const TraceItem> items, driver::Engine& engine, const ReplaySettings& settings,
                  const OnRequest& on_request = {});

}  // namespace pfx::replay
