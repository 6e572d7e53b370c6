#pragma once

/// \file
/// The answer to a query: the offset, and why it is what it is.

#include <cstddef>
#include <string_view>

namespace pfx {

/// What decided the answer, so that an operator can see why a prompt missed.
enum class Reason {
  reused,            ///< offset > 0: the first `offset` rows are served from the held state
  disabled,          ///< the machine is configured off (INV-6)
  empty_record,      ///< nothing is held (INV-6)
  nothing_reusable,  ///< the bounds leave no row at all (for example the prompt diverges at token 0)
  below_keep_min,    ///< some rows could be reused, but fewer than keep_min (INV-4)
};

/// Which bound cut the reusable length (the tightest one; ties go to the earlier in this list).
enum class Bound {
  none,            ///< no bound was consulted (disabled, or empty record)
  common_prefix,   ///< the prompt leaves what is held at this point (INV-1)
  canonical_end,   ///< rows past here were written by decode (INV-2, audit 260)
  one_token_left,  ///< the engine needs at least one token to prefill (INV-3)
  alignment,       ///< rounded down to a multiple of chunk (INV-5)
  prefill_step,    ///< lowered so that the last prefill step is one token alone iff the cold run's is (INV-12)
};

/// The result of the offset rule for one prompt.
struct Decision {
  /// Leading prompt tokens whose rows may be taken from the held state; 0 means prefill it all.
  std::size_t offset = 0;
  /// lcp(held ids, prompt), whatever the other bounds say (0 when nothing was compared).
  std::size_t common_prefix = 0;
  Reason reason = Reason::disabled;
  Bound bound = Bound::none;

  friend constexpr bool operator==(const Decision&, const Decision&) = default;
};

/// The value of each bound of the rule for one prompt and what is held, as decide() takes the offset
/// from them: offset = stepped when stepped > 0 and stepped >= keep_min, else 0 (docs/spec.md, "The
/// rule"). Callers that show why a prompt missed (`pfx explain`) print these; none recomputes them.
struct Bounds {
  std::size_t common_prefix = 0;   ///< lcp(ids, prompt) (INV-1)
  /// Rows from here on were written by decode (INV-2): the record's canonical_end, or len(ids) when
  /// decode rows are exact (config.decode_rows_exact), whose rows may all be granted.
  std::size_t canonical_end = 0;
  std::size_t one_token_left = 0;  ///< len(prompt) - 1, or 0 for an empty prompt (INV-3)
  /// The smallest of the three above, rounded down to a multiple of chunk (INV-5).
  std::size_t aligned = 0;
  /// aligned, lowered by whole chunks so that the resumed prefill ends with a one-token step exactly
  /// when the cold run's does (INV-12; a padded admission's one step is not one token alone; aligned
  /// itself when prefill_step is 0): the offset the rule grants unless it is 0 or below keep_min.
  std::size_t stepped = 0;
  std::size_t keep_min = 0;        ///< the shortest reuse worth taking (INV-4)
  Bound tightest = Bound::none;    ///< the bound that cut the most (ties go to the earlier in Bound)

  friend constexpr bool operator==(const Bounds&, const Bounds&) = default;
};

/// The reason's name as docs/spec.md writes it.
[[nodiscard]] constexpr std::string_view name(Reason reason) noexcept {
  switch (reason) {
    case Reason::reused: return "reused";
    case Reason::disabled: return "disabled";
    case Reason::empty_record: return "empty record";
    case Reason::nothing_reusable: return "nothing reusable";
    case Reason::below_keep_min: return "below keep_min";
  }
  return "?";
}

/// The bound's name as docs/spec.md writes it.
[[nodiscard]] constexpr std::string_view name(Bound bound) noexcept {
  switch (bound) {
    case Bound::none: return "none";
    case Bound::common_prefix: return "common prefix";
    case Bound::canonical_end: return "canonical end";
    case Bound::one_token_left: return "one token left";
    case Bound::alignment: return "alignment";
    case Bound::prefill_step: return "prefill step";
  }
  return "?";
}

}  // namespace pfx
