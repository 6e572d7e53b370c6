#pragma once

/// \file
/// The offset rule of docs/spec.md as pure functions: bounds() computes each bound, decide() takes
/// the offset from them. The Machine answers through decide(); bounds() is exposed so that tools
/// can explain a decision without recomputing any of it.

#include <pfx/common_prefix.hpp>
#include <pfx/config.hpp>
#include <pfx/decision.hpp>
#include <pfx/prefill_step.hpp>
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
  // INV-2: rows at or past canonical_end were written by decode; when decode rows are exact, every
  // row the record holds may be granted (len(ids) >= lcp, so that bound never cuts).
  const std::size_t prefill_rows = config.decode_rows_exact ? ids.size() : canonical_end;
  if (prefill_rows < reusable) {
    reusable = prefill_rows;
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
  const std::size_t on_grid = reusable;
  // INV-12: a resume ends with a one-token prefill step exactly when the cold run does; a padded
  // admission at len(prompt) - 1 does not end with one.
  const std::size_t stepped = prefill_step_bound(prompt.size(), on_grid, config.chunk, config.prefill_step,
                                                 config.admission_padding != 0);
  if (stepped < reusable) {
    reusable = stepped;
    bound = Bound::prefill_step;
  }
  return {lcp, prefill_rows, one_left, on_grid, reusable, config.keep_min, bound};
}

/// offset(prompt) = step(align_down(min(lcp(ids, prompt), canonical_end, len(prompt) - 1), chunk))
/// when that is >= keep_min, else 0; and 0 when disabled or nothing is held. canonical_end reads
/// len(ids) when config.decode_rows_exact (INV-2). step() is the
/// prefill-step bound (prefill_step.hpp, with config.admission_padding; the value itself when
/// config.prefill_step is 0).
/// Precondition: config.chunk >= 1 (INV-9; the Machine refuses any other configuration).
[[nodiscard]] constexpr Decision decide(const Config& config, std::span<const token> ids,
                                        std::size_t canonical_end,
                                        std::span<const token> prompt) noexcept {
  if (!config.enabled) return {0, 0, Reason::disabled, Bound::none};  // INV-6
  if (ids.empty()) return {0, 0, Reason::empty_record, Bound::none};  // INV-6

  const Bounds b = bounds(config, ids, canonical_end, prompt);
  const std::size_t lcp = b.common_prefix;
  // The tightest of INV-1, 2, 3, on the chunk grid (INV-5), kept by the prefill step (INV-12).
  const std::size_t reusable = b.stepped;
  const Bound bound = b.tightest;
  if (reusable == 0) return {0, lcp, Reason::nothing_reusable, bound};
  // keep_min judges the offset the bounds leave, after the prefill step lowered it: a resume that
  // INV-12 lowers below keep_min is not worth taking either.
  if (reusable < config.keep_min) return {0, lcp, Reason::below_keep_min, bound};  // INV-4
  return {reusable, lcp, Reason::reused, bound};  // INV-7: the largest value INV-1..5 and INV-12 allow
}

}  // namespace pfx
