#pragma once

/// \file
/// Checks an engine end to end (docs/driver.md, "Checking your engine end to end"): serves a trace
/// through a Lane on the engine, then serves each request cold, and compares every response with its
/// cold run: the generated tokens (decode included), the prompt's logits bit for bit, and, where the
/// KV state can be read, every row the response vouches for, as bytes in the engine's format.

#include <pfx/driver/engine.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/token.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace pfx::driver {

/// What a response vouches for, kept to be compared with its cold run: its generated tokens, the
/// logits of its prompt's last row, and one digest (FNV-1a) of each KV row it wrote that the state
/// holds (one rank's state holds its own rows alone), as bytes in the state's own format, with the
/// row's position. A long trace holds 16 bytes per row, not the rows.
struct Vouched {
  std::vector<token> generated;
  std::vector<float> logits;
  std::vector<std::uint64_t> rows;        ///< none where the state cannot read rows back
  std::vector<std::size_t> positions;     ///< of each of `rows`

  /// `generated` and `logits` with the digests of rows [0, rows) of `kv`.
  [[nodiscard]] static Vouched of(std::vector<token> generated, std::vector<float> logits, const KvState& kv,
                                  std::size_t rows);
};

/// How `resumed` differs from `cold`, or "" when it equals it bit for bit: the first differing
/// generated token ("generated token 3: 17 vs 12 cold"), else logit ("logit 5: 0.25 (0x3e800000) vs
/// ..."), else KV row ("KV row 9 differs from the cold run's"). Rows are compared where both sides
/// could read them.
[[nodiscard]] std::string difference(const Vouched& resumed, const Vouched& cold);

/// One request of a trace: a prompt, and how many tokens to generate greedily after it.
struct TraceRequest {
  std::vector<token> prompt;
  std::size_t max_new_tokens = 0;
  /// Forget the lane's record before serving it: the trace has a clear ({"op": "clear"}) just before.
  bool clear_first = false;
  std::size_t line = 0;  ///< where the trace has it, from 1 (0: not said), as `pfx replay` names lines
  std::string label{};   ///< the trace's "label", if any: shown with the line
};

/// The first request whose response differs from its cold run (or failed), and how: the fields of
/// `pfx replay`'s first mismatch.
struct VerifyMismatch {
  std::size_t request = 0;  ///< its number among the trace's requests, from 1 (clears are not counted)
  std::size_t line = 0;     ///< TraceRequest::line (0: not said)
  std::string label;
  std::string what;         ///< "generated token 3: 17 vs 12", "logit 5: ...", "KV row 9 differs", "failed: ..."
};

/// "N responses differ from their cold run; the first is request R (line L, label): what": how `pfx
/// replay` and pfx.verify tell their mismatches, in one wording (`label` as it is: escape it first
/// where it reaches a terminal).
[[nodiscard]] std::string describe_mismatches(std::size_t mismatches, const VerifyMismatch& first);

struct VerifyReport {
  std::size_t requests = 0;       ///< requests in the trace
  std::size_t compared = 0;       ///< responses compared with a cold run
  std::size_t mismatches = 0;     ///< responses that differ from their cold run, or whose serving failed
  std::size_t rows_compared = 0;  ///< KV rows compared as bytes (0 where the state cannot be read)
  std::size_t reused_tokens = 0;  ///< prompt tokens the lane did not prefill, all requests together
  std::optional<VerifyMismatch> first_mismatch;
  /// Every response equalled its cold run, and at least one was compared: a check that compared
  /// nothing does not pass.
  [[nodiscard]] bool ok() const noexcept { return compared > 0 && mismatches == 0; }
};

/// Told (runs done, runs in all) after each run, for a progress bar: the lane's responses, then the
/// cold runs, so twice the trace's requests in all.
using VerifyProgress = std::function<void(std::size_t, std::size_t)>;

/// Serves `trace` in order through one Lane on `engine` (`options`, the rule chunk and poisoning
/// included), keeping each response and the bytes of its rows, then serves each request cold
/// (run_cold, on one KV state made once) and compares. The cold runs come after the lane is done, so
/// an engine whose states all view its one cache (llama.cpp, transformers) serves both sides; pass
/// `cold_engine` to run the cold side on another instance. A request the lane fails (StaleRowRead, an
/// engine's exception) counts as a mismatch and is not compared; a request the lane refuses
/// (RequestError) is neither. `progress`, if given, is told of each run.
/// Effect: on a Lane and a cold KV state, both made here.
/// Throws: what the Lane's constructor throws, and what a cold run throws.
[[nodiscard]] VerifyReport verify(Engine& engine, std::span<const TraceRequest> trace, const LaneOptions& options,
                                  Engine* cold_engine = nullptr, const VerifyProgress& progress = {});

}  // namespace pfx::driver
