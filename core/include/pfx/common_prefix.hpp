#pragma once

/// \file
/// lcp(a, b): how many leading tokens two sequences share.

#include <pfx/token.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>
#include <type_traits>

namespace pfx {

namespace detail {

/// Tokens compared per memcmp call at run time: large enough that the call overhead vanishes next to
/// the bytes read, small enough that the final scan of the one block that differs is short.
inline constexpr std::size_t lcp_block = 1024;

constexpr std::size_t common_prefix_scan(const token* a, const token* b, std::size_t n) noexcept {
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace detail

/// How many leading tokens `a` and `b` share. Usable in constant expressions; at run time it skips
/// whole equal blocks with memcmp (vectorized by the C library), so a 1M-token prefix is compared at
/// close to memory speed (bench/core_bench.cpp).
[[nodiscard]] constexpr std::size_t common_prefix(std::span<const token> a,
                                                  std::span<const token> b) noexcept {
  const std::size_t n = std::min(a.size(), b.size());
  if (std::is_constant_evaluated()) return detail::common_prefix_scan(a.data(), b.data(), n);
  std::size_t done = 0;
  while (n - done >= detail::lcp_block &&
         std::memcmp(a.data() + done, b.data() + done, detail::lcp_block * sizeof(token)) == 0) {
    done += detail::lcp_block;
  }
  return done + detail::common_prefix_scan(a.data() + done, b.data() + done, n - done);
}

}  // namespace pfx
