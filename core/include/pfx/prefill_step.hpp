#pragma once

/// \file
/// The one-token-step premise (docs/spec.md, INV-12). An engine whose scheduler prefills `t` tokens
/// in steps of `s` ([0, s), [s, 2s), ... from where the prefill starts) ends with a step that
/// computes one token alone iff (t - 1) % s == 0, and some engines compute such a step with another
/// kernel than a longer one. A resumed prefill of a prompt of n tokens from offset k computes its
/// last n - k tokens, so its last step is one token alone exactly when the cold run's is only if
/// alone(n - k) == alone(n): the bound keeps the largest offset on the chunk grid for which it is.

#include <cstddef>
#include <cstdint>
#include <numeric>

namespace pfx {

/// The largest k <= aligned that is a multiple of chunk and for which a prefill of the last
/// prompt_length - k tokens ends with a one-token step iff the prefill of all prompt_length does
/// (INV-12). step 0 is no premise: aligned itself. step SIZE_MAX is one step whatever the length
/// (alone iff the prefill has one token). O(1): no loop over chunks.
/// Preconditions: chunk >= 1 (INV-9); aligned % chunk == 0 (INV-5); aligned == 0 or
/// aligned <= prompt_length - 1 (INV-3), so every candidate leaves at least one token.
///
/// Why it is the largest. Write n = prompt_length, a = aligned, c = chunk, s = step, and
/// alone(t) <=> t ≡ 1 (mod s). For a candidate k, n - k ≡ 1 (mod s) <=> k ≡ n - 1 (mod s); let
/// r = (n - 1) % s. k = 0 always keeps the premise, so the answer exists and is >= 0.
/// - r == 0 (the cold run ends alone): k keeps it iff k ≡ 0 (mod s); with k ≡ 0 (mod c), iff
///   lcm(c, s) divides k, and the largest such k <= a is align_down(a, lcm(c, s)). An lcm past
///   SIZE_MAX exceeds a, so only 0 is left.
/// - r != 0 (it does not): k keeps it iff k ≢ r (mod s). If a ≢ r, a itself. Else a ≡ r ≢ 0, so
///   a > 0 and, a multiple of c, a >= c; and a - c ≡ r - c, which is ≢ r iff c ≢ 0 (mod s). If
///   c ≡ 0 (mod s), every multiple of c is ≡ 0 ≢ r, so a ≢ r: the case before. Hence at most one
///   chunk down, and never when chunk % step == 0.
[[nodiscard]] constexpr std::size_t prefill_step_bound(std::size_t prompt_length, std::size_t aligned,
                                                       std::size_t chunk, std::size_t step) noexcept {
  if (step == 0 || aligned == 0) return aligned;  // no premise, or nothing to keep
  const std::size_t cold_last = (prompt_length - 1) % step;  // r: 0 iff the cold run ends alone
  if (cold_last == 0) {
    const std::size_t chunk_part = chunk / std::gcd(chunk, step);  // lcm(c, s) = (c / gcd) * s
    if (chunk_part > SIZE_MAX / step) return 0;                    // lcm past SIZE_MAX > aligned
    const std::size_t lcm = chunk_part * step;
    return aligned - aligned % lcm;
  }
  if (aligned % step != cold_last) return aligned;
  return aligned - chunk;  // chunk % step != 0 here, and aligned >= chunk
}

/// The canonical_end a commit of a prompt of `prompt_length` tokens may claim under the premise
/// (docs/spec.md, "THM-1 with a one-token step"): every row of its prefill, less the last when that
/// prefill ended with a step computing it alone (step != 0 and (prompt_length - 1) % step == 0): a
/// longer prompt's cold run computes that row in a longer step, so it is not the row a later resume
/// may take (INV-2). step 0 is no premise: the prompt's length, as THM-1 has it.
[[nodiscard]] constexpr std::size_t prefill_canonical_end(std::size_t prompt_length, std::size_t step) noexcept {
  if (step == 0 || prompt_length == 0) return prompt_length;
  return (prompt_length - 1) % step == 0 ? prompt_length - 1 : prompt_length;
}

}  // namespace pfx
