#pragma once

/// \file
/// What the KV state holds, as far as the machine knows.

#include <pfx/token.hpp>

#include <cstddef>
#include <vector>

namespace pfx {

/// The host-side record of the shared KV state: row i was computed from ids[i]. Rows at or past
/// canonical_end were written by decode and are never offered for reuse (INV-2), unless the engine
/// writes decode rows exactly (Config::decode_rows_exact).
/// Invariant: canonical_end <= ids.size() (INV-9).
struct Record {
  std::vector<token> ids;
  std::size_t canonical_end = 0;

  friend constexpr bool operator==(const Record&, const Record&) = default;
};

/// Whether a request is being written into the KV state.
enum class Phase {
  idle,     ///< between requests: query, begin, record, clear, configure are accepted
  writing,  ///< between begin and commit or abort: rows from the begin offset on are being rewritten
};

}  // namespace pfx
