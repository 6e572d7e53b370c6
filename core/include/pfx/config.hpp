#pragma once

/// \file
/// The machine's configuration: the knobs of the offset rule (docs/spec.md, "The rule").

#include <cstddef>

namespace pfx {

/// How the offset rule is tuned. The defaults are the seed's: reuse on (audit 259), keep_min 64,
/// chunk 1.
struct Config {
  /// When false every query answers 0 and nothing is recorded (INV-6).
  bool enabled = true;
  /// A reuse shorter than this saves too little to be worth it (INV-4).
  std::size_t keep_min = 64;
  /// The engine's canonical prefill chunk; every offset is a multiple of it (INV-5). Must be >= 1
  /// (INV-9); a configuration with chunk 0 is refused.
  std::size_t chunk = 1;

  friend constexpr bool operator==(const Config&, const Config&) = default;
};

}  // namespace pfx
