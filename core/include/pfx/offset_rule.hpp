#pragma once

/// \file
/// The offset rule of docs/spec.md as pure functions: bounds() computes each bound, decide() takes
/// the offset from them. The Machine answers through decide(); bounds() is exposed so that tools
/// can explain a decision without recomputing any of it.

#include <pfx/common_prefix.hpp>
#include <pfx/config.hpp>
#include <pfx/decision.hpp>
#include <pfx/token.hpp>

#include <cstddef>
#include <span>

namespace pfx {

/// Each bound of the rule for `prompt` against the held `ids` and `canonical_end` (decision.hpp):
/// the arithmetic of the rule, which decide() and the tools that explain a decision share.
/// Precondition: config.chunk >= 1 (INV-9; the Machine refuses any other configuration).
[[nodiscard]] constexpr Bounds bounds(const Config& config, std::span<const token> ids,
                                      std::size_t canonical_end,
                                      std::span<const token> prompt) noexcept {
  const std::size_t lcp = common_prefix(ids, prompt);
  // The tightest bound wins; on a tie the earlier one is named, so `bound` is deterministic.
  std::size_t reusable = lcp;  // INV-1
  Bound bound = Bound::common_prefix;
  if (canonical_end < reusable) {  // INV-2: rows at or past canonical_end were written by decode
    reusable = canonical_end;
    bound = Bound::canonical_end;
  }
  const std::size_t one_left = prompt.empty() ? 0 : prompt.size() - 1;
  if (one_left < reusable) {  // INV-3: the engine needs a row to produce a logit
    reusable = one_left;
    bound = Bound::one_token_left;
  }
  const std::size_t aligned = reusable - reusable % config.chunk;  // INV-5
  if (aligned < reusable) {
    reusable = aligned;
    bound = Bound::alignment;
  }
  return {lcp, canonical_end, one_left, reusable, config.keep_min, bound};
}

/// offset(prompt) = align_down(min(lcp(ids, prompt), canonical_end, len(prompt) - 1), chunk) when
/// that is >= keep_min, else 0; and 0 when disabled or nothing is held.
/// Precondition: config.chunk >= 1 (INV-9; the Machine refuses any other configuration).
[[nodiscard]] constexpr Decision decide(const Config& config, std::span<const token> ids,
                                        std::size_t canonical_end,
                                        std::span<const token> prompt) noexcept {
  if (!config.enabled) return {0, 0, Reason::disabled, Bound::none};  // INV-6
  if (ids.empty()) return {0, 0, Reason::empty_record, Bound::none};  // INV-6

  const Bounds b = bounds(config, ids, canonical_end, prompt);
  const std::size_t lcp = b.common_prefix;
  const std::size_t reusable = b.aligned;  // the tightest of INV-1, 2, 3, on the chunk grid (INV-5)
  const Bound bound = b.tightest;
  if (reusable == 0) return {0, lcp, Reason::nothing_reusable, bound};
  if (reusable < config.keep_min) return {0, lcp, Reason::below_keep_min, bound};  // INV-4
  return {reusable, lcp, Reason::reused, bound};  // INV-7: the largest value INV-1..5 allow
}

}  // namespace pfx
