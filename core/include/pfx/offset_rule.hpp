#pragma once

/// \file
/// The offset rule of docs/spec.md as one pure function. The Machine is its only caller; it is
/// exposed so that tools can explain a decision without building a machine.

#include <pfx/common_prefix.hpp>
#include <pfx/config.hpp>
#include <pfx/decision.hpp>
#include <pfx/token.hpp>

#include <cstddef>
#include <span>

namespace pfx {

/// offset(prompt) = align_down(min(lcp(ids, prompt), canonical_end, len(prompt) - 1), chunk) when
/// that is >= keep_min, else 0; and 0 when disabled or nothing is held.
/// Precondition: config.chunk >= 1 (INV-9; the Machine refuses any other configuration).
[[nodiscard]] constexpr Decision decide(const Config& config, std::span<const token> ids,
                                        std::size_t canonical_end,
                                        std::span<const token> prompt) noexcept {
  if (!config.enabled) return {0, 0, Reason::disabled, Bound::none};  // INV-6
  if (ids.empty()) return {0, 0, Reason::empty_record, Bound::none};  // INV-6

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

  if (reusable == 0) return {0, lcp, Reason::nothing_reusable, bound};
  if (reusable < config.keep_min) return {0, lcp, Reason::below_keep_min, bound};  // INV-4
  return {reusable, lcp, Reason::reused, bound};  // INV-7: the largest value INV-1..5 allow
}

}  // namespace pfx
