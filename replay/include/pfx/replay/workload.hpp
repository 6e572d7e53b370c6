#pragma once

/// \file
/// The embedded workload of `pfx replay` (docs/cli.md, "The embedded workload"): multi-turn chat
/// sessions that share system prompts, generated from a seed, with every kind of prompt the rule
/// has to answer: turns that extend prompt + answer, regenerations, edits that diverge early and
/// late, shorter prompts, short ones under keep_min, new sessions, and clears.

#include <pfx/replay/item.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pfx::replay {

struct WorkloadOptions {
  std::uint64_t seed = 253;
  std::size_t vocab = 256;     ///< token ids are drawn from 0 .. min(vocab, 32000) - 1
  std::size_t requests = 100;  ///< requests to generate (clears come on top)
  std::size_t capacity = 4096; ///< no request needs more rows than this
  /// Sessions kept to come back to (`other session`); when a new one would exceed it, the oldest is
  /// forgotten. 0 keeps every session: a finite workload's. A stream of any length needs a bound,
  /// or its memory grows with every new session.
  std::size_t sessions = 0;
};

/// The workload for `options`, one item at a time, so that a run of any length holds one item
/// (`pfx soak`): a fixed function of the options. Every request fits options.capacity and
/// options.vocab, and its "label" names its kind ("turn", "regenerate", "edit early", ...). Items are
/// numbered as the lines of `pfx workload`'s output.
[[nodiscard]] ItemSource workload_stream(const WorkloadOptions& options);

/// The whole stream, collected: `pfx replay`'s embedded workload.
[[nodiscard]] std::vector<TraceItem> embedded_workload(const WorkloadOptions& options);

}  // namespace pfx::replay
