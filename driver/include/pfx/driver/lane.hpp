#pragma once

/// \file
/// The Lane: serves one request at a time on one KV state, taking from it what the machine says may
/// be reused (docs/driver.md, "The protocol").

#include <pfx/driver/engine.hpp>
#include <pfx/driver/kv_state.hpp>
#include <pfx/config.hpp>
#include <pfx/machine.hpp>
#include <pfx/token.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

namespace pfx::driver {

#ifdef NDEBUG
inline constexpr bool poison_by_default = false;
#else
inline constexpr bool poison_by_default = true;
#endif

/// How a lane is set up.
struct LaneOptions {
  std::size_t capacity = 4096;  ///< token rows of the KV state, allocated once
  /// The rule's knobs, with pfx::Config's meanings and defaults (reuse on, keep_min 64;
  /// docs/configuration.md), given to the machine as they are, every knob but the chunk: that is
  /// rule_chunk's, and a config.chunk other than Config's default is refused rather than ignored.
  /// `options.config = config_from_environment(options.config)` applies TF_GLM53_PREFIX_CACHE and
  /// TF_GLM53_PREFIX_CACHE_MIN.
  Config config{};
  /// The rule's chunk (INV-5): absent, the default, the engine's prefill chunk, as THM-1 requires.
  /// A value (at least 1) is for showing why it does: the lane still prefills on the engine's grid,
  /// from whatever offset the rule grants, so a rule chunk that is not a multiple of the engine's
  /// lets resumes start off the grid and differ from a cold run (docs/spec.md, THM-1).
  std::optional<std::size_t> rule_chunk = std::nullopt;
  /// Fill rows a request gives up with NaN, so that an engine that reads one is caught. On in debug
  /// builds; the tests turn it on everywhere.
  bool poison = poison_by_default;
};

/// The rule's chunk of a lane given `rule_chunk` (LaneOptions::rule_chunk) on an engine whose prefill
/// chunk is `engine_chunk`: rule_chunk when given, the engine's chunk when absent (THM-1). The one place
/// that default is decided: the lane configures its machine with it, and what reports the rule's chunk
/// without a lane (the replay's settings, the conformance check and `pfx conform`) reads it here, so
/// none of them can name another chunk than the lane would use.
[[nodiscard]] std::size_t resolved_rule_chunk(std::optional<std::size_t> rule_chunk, std::size_t engine_chunk) noexcept;

/// Where the time of one request went. first_token is the time to first token: from the call to the
/// first generated token (or the prompt's logits when none is asked for).
struct Timings {
  std::chrono::nanoseconds protocol{};  ///< query, begin and commit on the machine
  std::chrono::nanoseconds poison{};
  std::chrono::nanoseconds prefill{};
  std::chrono::nanoseconds first_token{};
  std::chrono::nanoseconds decode{};
  std::chrono::nanoseconds total{};
};

struct Response {
  std::vector<token> generated;  ///< greedy, max_new_tokens of them
  Decision decision;             ///< the offset the request began at, and why
  std::size_t prefilled = 0;     ///< prompt tokens the engine computed: len(prompt) - offset
  std::vector<float> logits;     ///< the logits of the prompt's last row
  Timings timings;
};

/// A step of the lane's flow between the KV writes and the commit (docs/architecture.md): told
/// whether this request's writes all succeeded, it lets the lane commit by returning, or makes it
/// abort by throwing. A sharded lane's ranks agree here that every rank wrote (ShardedLane); a lone
/// lane has no such step.
class BeforeCommit {
 public:
  virtual ~BeforeCommit() = default;
  BeforeCommit() = default;
  BeforeCommit(const BeforeCommit&) = delete;
  BeforeCommit& operator=(const BeforeCommit&) = delete;
  /// Called once per request that got a decision: with true after its writes and synchronize
  /// succeeded (throw to refuse the commit), or with false after they failed and the lane aborted
  /// (the failure is rethrown after it returns).
  virtual void agree(bool wrote) = 0;
};

/// One lane serves one request at a time. serve() and clear() may be called from several threads:
/// they are serialized (each call waits for the one in progress), so that two requests never write
/// the KV state or the record at once (docs/driver.md, "Concurrent use"). The accessors below read
/// without locking: call them only while no serve() or clear() runs.
class Lane {
 public:
  /// A lane on `engine`: the machine is configured with options.config, its chunk the engine's (or
  /// options.rule_chunk). `before_commit`, if given, is the step between writes and commit; it must
  /// outlive the lane.
  /// Effect: the KV state is allocated (engine.make_kv_state(capacity)) and the record reserved, once;
  /// with poisoning on, every row is NaN.
  /// Throws: ConfigError when capacity, the engine's chunk or its vocabulary is 0, rule_chunk is 0,
  /// config.chunk is not Config's default, or the engine's KV state does not have the requested
  /// capacity; what the engine's allocation throws.
  Lane(Engine& engine, const LaneOptions& options, BeforeCommit* before_commit = nullptr);

  /// Serves one request: query, begin, poison, prefill on the chunk grid from the offset, greedy
  /// decode, synchronize, the before-commit step if any, commit(prompt + generated, len(prompt)).
  /// Refuses (RequestError, before anything is written): an empty prompt, a token outside
  /// the vocabulary, len(prompt) + max_new_tokens > capacity (the record holds the last generated
  /// token too, though it has no row).
  /// Effect: the rows from the offset on are rewritten (with poisoning, those the request gives up
  /// are NaN first); the record becomes prompt + generated with canonical_end len(prompt) (INV-2);
  /// last_decision() is this request's.
  /// Throws: on any failure after the decision (the engine throws, StaleRowRead on non-finite logits
  /// of any chunk or step, a device error, the before-commit step's refusal) the lane aborts, so the
  /// record keeps only rows [0, offset) (INV-8), and rethrows.
  Response serve(std::span<const token> prompt, std::size_t max_new_tokens);

  /// Forgets the record (the seed's clear).
  /// Refuses: nothing: always safe. Waits for a serve() in progress.
  /// Effect: the record is empty; the rows stay until a request gives them up.
  void clear();

  [[nodiscard]] const Machine& machine() const noexcept { return machine_; }
  [[nodiscard]] const KvState& kv() const noexcept { return *kv_; }
  [[nodiscard]] const LaneOptions& options() const noexcept { return options_; }
  [[nodiscard]] const Engine& engine() const noexcept { return engine_; }
  /// The decision of the last request that got one, also when it then failed: what a failure report
  /// names (no second query). A default Decision (offset 0) before any.
  [[nodiscard]] const Decision& last_decision() const noexcept { return last_decision_; }
  /// Rows [0, written_end()) may hold data; with poisoning on, rows past it are NaN.
  [[nodiscard]] std::size_t written_end() const noexcept { return written_end_; }

 private:
  void check_request(std::span<const token> prompt, std::size_t max_new_tokens) const;
  using Clock = std::chrono::steady_clock;
  void write(std::span<const token> prompt, std::size_t max_new_tokens, Response& response,
             Clock::time_point start);

  std::mutex serving_;  ///< held by serve() and clear() for their whole duration
  Engine& engine_;
  LaneOptions options_;
  BeforeCommit* before_commit_;
  std::unique_ptr<KvState> kv_;
  Machine machine_;
  std::size_t written_end_ = 0;
  Decision last_decision_{};
  std::vector<token> ids_;  ///< prompt + generated, kept to avoid an allocation per request
};

}  // namespace pfx::driver
