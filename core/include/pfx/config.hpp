#pragma once

/// \file
/// The machine's configuration: the knobs of the offset rule (docs/spec.md, "The rule").

#include <cstddef>

namespace pfx {

/// How the offset rule is tuned. The defaults are the seed's: reuse on (audit 259), keep_min 64,
/// chunk 1, no prefill step premise, no admission padding, and decode rows not taken to be exact.
struct Config {
  /// When false every query answers 0 and nothing is recorded (INV-6).
  bool enabled = true;
  /// A reuse shorter than this saves too little to be worth it (INV-4).
  std::size_t keep_min = 64;
  /// The engine's canonical prefill chunk; every offset is a multiple of it (INV-5). Must be >= 1
  /// (INV-9); a configuration with chunk 0 is refused.
  std::size_t chunk = 1;
  /// How many tokens the engine's scheduler prefills in one step, where it computes a step of one
  /// token alone otherwise than a longer one: every offset then leaves a last step of one token
  /// exactly when the cold run's is (INV-12, prefill_step.hpp). 0: no such premise (the default);
  /// SIZE_MAX: one step whatever the length. Every value is valid.
  std::size_t prefill_step = 0;
  /// Rows the engine adds to an admission that leaves one token to compute (vLLM pads it to
  /// 1 + num_speculative_tokens rows when speculating): such a resume's one step is then not one
  /// token alone (INV-12). 0: no padding (the default). Every value is valid. Only whether it is 0
  /// changes the rule; the value is carried so that an explanation can say it.
  std::size_t admission_padding = 0;
  /// The engine writes a decode row bit-equal to the row that a cold prefill, on the configured
  /// grid, of any prompt starting with the same tokens writes at that position (so a prefill's row,
  /// too, depends on the tokens up to it and not on where its chunk ends). Then the rule may grant
  /// every row the record holds, rows decode wrote included: INV-2's bound is len(ids), not
  /// canonical_end. false: no such premise (the default, INV-2 as ever). Every commit must then name
  /// only tokens whose rows the engine wrote (the prompt and each token a decode step fed, not a
  /// last sampled token no step has fed). Changing it forgets the record (INV-11).
  bool decode_rows_exact = false;

  friend constexpr bool operator==(const Config&, const Config&) = default;
};

}  // namespace pfx
