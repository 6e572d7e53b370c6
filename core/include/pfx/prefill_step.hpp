#pragma once

/// \file
/// The one-token-step premise (docs/spec.md, INV-12). An engine whose scheduler prefills `t` tokens
/// in steps of `s` ([0, s), [s, 2s), ... from where the prefill starts) ends with a step that
/// computes one token alone iff (t - 1) % s == 0, and some engines compute such a step with another
/// kernel than a longer one. A resumed prefill of a prompt of n tokens from offset k computes its
/// last n - k tokens, so its last step is one token alone exactly when the cold run's is only if
/// alone(n - k) == alone(n): the bound keeps the largest offset on the chunk grid for which it is.
/// An engine that pads an admission leaving one token to compute (vLLM when speculating) computes
/// the resume at n - 1 in a step of several rows, so that resume is never one token alone.

#include <cstddef>
#include <cstdint>
#include <numeric>

namespace pfx {

/// The largest k <= aligned that is a multiple of chunk and for which a prefill of the last
/// prompt_length - k tokens ends with a one-token step iff the prefill of all prompt_length does
/// (INV-12). step 0 is no premise: aligned itself. step SIZE_MAX is one step whatever the length
/// (alone iff the prefill has one token). `padded`: the engine pads an admission that leaves one
/// token to compute (Config::admission_padding != 0), so a resume at prompt_length - 1 computes a
/// step of several rows, not one token alone; a cold run of two or more tokens is never such an
/// admission. O(1): no loop over chunks.
/// Preconditions: chunk >= 1 (INV-9); aligned % chunk == 0 (INV-5); aligned == 0 or
/// aligned <= prompt_length - 1 (INV-3), so every candidate leaves at least one token.
///
/// Why it is the largest. Write n = prompt_length, a = aligned, c = chunk, s = step, and
/// alone(t) <=> t ≡ 1 (mod s); a resume at k > 0 ends alone iff alone(n - k) and not (padded and
/// k == n - 1). For a candidate k, n - k ≡ 1 (mod s) <=> k ≡ n - 1 (mod s); let r = (n - 1) % s.
/// k = 0 always keeps the premise, so the answer exists and is >= 0.
/// - r == 0 (the cold run ends alone): k > 0 keeps it iff k ≡ 0 (mod s) and not (padded and
///   k == n - 1); with k ≡ 0 (mod c), iff lcm(c, s) = L divides k and, padded, k != n - 1. The
///   largest multiple of L at most a is m = align_down(a, L). If m == 0, or m != n - 1, or no
///   padding, m. Else (padded, m == n - 1 > 0) the only multiple of L in (m - L, m] is m, which
///   fails; m - L >= 0 is a multiple of L below n - 1, so it keeps the premise (0 always does):
///   m - L. An lcm past SIZE_MAX exceeds a, so only 0 is left.
/// - r != 0 (it does not): k > 0 keeps it iff k ≢ r (mod s), or padded and k == n - 1. If a ≢ r, a
///   itself. If padded and a == n - 1 (then a ≡ r ≢ 0, so a > 0), a itself. Else a ≡ r ≢ 0, so
///   a > 0 and, a multiple of c, a >= c; and a - c ≡ r - c, which is ≢ r iff c ≢ 0 (mod s). If
///   c ≡ 0 (mod s), every multiple of c is ≡ 0 ≢ r, so a ≢ r: the first case. Hence at most one
///   chunk down, and never when chunk % step == 0.
[[nodiscard]] constexpr std::size_t prefill_step_bound(std::size_t prompt_length, std::size_t aligned,
                                                       std::size_t chunk, std::size_t step,
                                                       bool padded = false) noexcept {
  if (step == 0 || aligned == 0) return aligned;  // no premise, or nothing to keep
  const std::size_t cold_last = (prompt_length - 1) % step;  // r: 0 iff the cold run ends alone
  // A padded admission at n - 1 computes several rows in its one step, not one token alone.
  const bool padded_at_last = padded && aligned == prompt_length - 1;
  if (cold_last == 0) {
    const std::size_t chunk_part = chunk / std::gcd(chunk, step);  // lcm(c, s) = (c / gcd) * s
    if (chunk_part > SIZE_MAX / step) return 0;                    // lcm past SIZE_MAX > aligned
    const std::size_t lcm = chunk_part * step;
    const std::size_t on_lcm = aligned - aligned % lcm;
    // m == n - 1 > 0 only when m == a; padded, that resume is not alone where the cold run is.
    if (padded_at_last && on_lcm == aligned) return on_lcm - lcm;
    return on_lcm;
  }
  if (aligned % step != cold_last) return aligned;
  if (padded_at_last) return aligned;  // a ≡ r: unpadded it would end alone; padded it does not
  return aligned - chunk;  // chunk % step != 0 here, and aligned >= chunk
}

/// The canonical_end a commit of a prompt of `prompt_length` tokens may claim under the premise
/// (docs/spec.md, "THM-1 with a one-token step"): every row of its prefill, less the last when that
/// prefill ended with a step computing it alone (step != 0 and (prompt_length - 1) % step == 0): a
/// longer prompt's cold run computes that row in a longer step, so it is not the row a later resume
/// may take (INV-2). step 0 is no premise: the prompt's length, as THM-1 has it. The admission
/// padding does not change it: a commit's prefill is a cold run or a resume granted under INV-12,
/// whose last step is one token alone exactly when the cold run's is, and a cold run of two or more
/// tokens is never padded; so the row the cold run computes alone is the one to leave unclaimed.
[[nodiscard]] constexpr std::size_t prefill_canonical_end(std::size_t prompt_length, std::size_t step) noexcept {
  if (step == 0 || prompt_length == 0) return prompt_length;
  return (prompt_length - 1) % step == 0 ? prompt_length - 1 : prompt_length;
}

}  // namespace pfx
