#pragma once

/// \file
/// What a replay serves, one item at a time: a request (a prompt and how many tokens to generate
/// after it) or a clear of the lane's record. `pfx replay` reads them from a trace (docs/cli.md,
/// "Trace format"); the embedded workload (workload.hpp) generates them.

#include <pfx/token.hpp>

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace pfx::replay {

/// Serve `prompt` and generate `max_new_tokens` tokens.
struct TraceRequest {
  std::vector<token> prompt;
  std::size_t max_new_tokens = 0;
  std::string label;     ///< optional "label": shown in the table, otherwise ignored
  std::size_t line = 0;  ///< 1-based line of the trace (0 when not read from a file)
  std::string id;        ///< optional "id", any JSON value, as compact JSON text: echoed by `replay --json`

  friend bool operator==(const TraceRequest&, const TraceRequest&) = default;
};

/// Forget the lane's record (the seed's clear).
struct TraceClear {
  std::size_t line = 0;

  friend bool operator==(const TraceClear&, const TraceClear&) = default;
};

using TraceItem = std::variant<TraceRequest, TraceClear>;

/// Where a run's items come from, one at a time: nothing once they are all given.
using ItemSource = std::function<std::optional<TraceItem>()>;

/// How many of `items` are requests (the rest are clears).
[[nodiscard]] inline std::size_t count_requests(std::span<const TraceItem> items) noexcept {
  std::size_t n = 0;
  for (const TraceItem& item : items) n += std::holds_alternative<TraceRequest>(item) ? 1U : 0U;
  return n;
}

}  // namespace pfx::replay
