#pragma once

/// \file
/// Generators that make the interesting cases likely. Independent random vectors almost never share
/// a prefix, so prompts are built from what is held: equal, extended, shortened, or diverging at a
/// chosen point; cut points sit around keep_min, around multiples of chunk and around the block size
/// of the run-time prefix compare; canonical_end falls below, at and above the common prefix.

#include <gtest/gtest.h>
// rapidcheck/gtest.h needs gtest/gtest.h first.
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <pfx/spec/model.hpp>
#include <pfx/spec/reference.hpp>

#include <algorithm>
#include <initializer_list>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pfx::gen {

using spec::Token;
using spec::Tokens;

/// RapidCheck as the draws of refinement::RandomEvents (random_events.hpp): each draw shrinks
/// toward 0 on its own.
struct Draws {
  std::size_t below(std::size_t n) { return *rc::gen::inRange<std::size_t>(0, n); }
};

/// One of the given values.
inline std::size_t one_of(std::initializer_list<std::size_t> values) {
  return *rc::gen::elementOf(std::vector<std::size_t>(values));
}

/// Full-width values a size_t setting must survive: around 2^32 (where a 32-bit truncation would
/// wrap to a small value) and at the top of the range (where a sum would overflow).
inline std::size_t huge() {
  constexpr std::size_t two_to_32 = std::size_t{1} << 32;
  return one_of({two_to_32 - 1, two_to_32, two_to_32 + 1, two_to_32 + 3, SIZE_MAX - 1, SIZE_MAX});
}

/// a * b, or SIZE_MAX where that would not fit.
inline std::size_t saturating_product(std::size_t a, std::size_t b) {
  return b != 0 && a > SIZE_MAX / b ? SIZE_MAX : a * b;
}

/// A prefill step for a configuration of `chunk` (INV-12): mostly none (0), else 1, a small one,
/// the chunk itself, a multiple of it, one next to it (neither a multiple nor a divisor, mostly), or
/// full width: 2^32, and 2^64 - 1, one step whatever the length.
inline std::size_t prefill_step(std::size_t chunk) {
  const std::size_t small = *rc::gen::inRange<std::size_t>(2, 9);
  const std::size_t multiple = saturating_product(chunk, *rc::gen::inRange<std::size_t>(2, 5));
  const std::size_t beside = chunk < SIZE_MAX && *rc::gen::arbitrary<bool>() ? chunk + 1 : chunk - 1;
  return *rc::gen::weightedElement<std::size_t>({{8, 0},
                                                 {1, 1},
                                                 {3, small},
                                                 {2, chunk},
                                                 {1, multiple},
                                                 {2, beside == 0 ? 2 : beside},
                                                 {1, std::size_t{1} << 32},
                                                 {1, SIZE_MAX}});
}

/// An admission padding that is on (INV-12): 1, a few rows (vLLM's num_speculative_tokens), or
/// 2^64 - 1 (only whether it is 0 changes the rule, so a value that wrapped round would show).
inline std::size_t admission_padding_nonzero() {
  return *rc::gen::weightedElement<std::size_t>(
      {{2, 1}, {2, *rc::gen::inRange<std::size_t>(2, 9)}, {1, SIZE_MAX}});
}

/// An admission padding: none half the time, else on.
inline std::size_t admission_padding() { return *rc::gen::arbitrary<bool>() ? 0 : admission_padding_nonzero(); }

/// A configuration: mostly enabled, keep_min and chunk around small values and the seed's default,
/// sometimes full width (a keep_min above any prompt never reuses; a chunk above it aligns to 0);
/// a prefill step of every kind, an admission padding or none, and decode rows exact or not.
inline rc::Gen<spec::Config> config() {
  return rc::gen::exec([] {
    spec::Config c;
    c.enabled = *rc::gen::weightedElement<bool>({{9, true}, {1, false}});
    const bool huge_keep_min = *rc::gen::weightedElement<bool>({{15, false}, {1, true}});
    c.keep_min = huge_keep_min ? huge()
                               : *rc::gen::weightedElement<std::size_t>(
                                     {{3, 0}, {3, 1}, {3, 2}, {3, 3}, {2, 4}, {2, 8}, {1, 64}, {2, 5}});
    const bool huge_chunk = *rc::gen::weightedElement<bool>({{15, false}, {1, true}});
    c.chunk = huge_chunk ? huge()
                         : *rc::gen::weightedElement<std::size_t>(
                               {{4, 1}, {3, 2}, {3, 3}, {2, 4}, {1, 8}, {1, 16}, {1, 5}});
    c.prefill_step = prefill_step(c.chunk);
    c.admission_padding = admission_padding();
    c.decode_rows_exact = *rc::gen::arbitrary<bool>();
    return c;
  });
}

/// `length` tokens over an alphabet of `alphabet` letters.
inline Tokens tokens(std::size_t length, Token alphabet) {
  return *rc::gen::container<Tokens>(length, rc::gen::inRange<Token>(0, alphabet));
}

/// A length scale: mostly short, sometimes long enough to cross the run-time compare's blocks.
inline std::size_t length_scale() {
  return *rc::gen::weightedElement<std::size_t>({{6, 12}, {4, 40}, {1, 200}, {1, 2600}});
}

/// A cut point in [0, limit]: around keep_min, around multiples of chunk or of the prefill step,
/// around the compare's block size, at the ends, or anywhere.
inline std::size_t cut_point(const spec::Config& c, std::size_t limit) {
  const std::size_t multiple = saturating_product(c.chunk, *rc::gen::inRange<std::size_t>(1, 6));
  const std::size_t steps = saturating_product(c.prefill_step, *rc::gen::inRange<std::size_t>(1, 4));
  const std::size_t block = 1024 * *rc::gen::inRange<std::size_t>(1, 3);
  const std::size_t base = pfx::gen::one_of({0, c.keep_min, multiple, steps, block, limit,
                                                          *rc::gen::inRange<std::size_t>(0, limit + 1)});
  std::size_t cut = base;
  const int nudge = *rc::gen::inRange(-1, 2);  // one below, at, or one above
  if (nudge < 0 && cut > 0) --cut;
  if (nudge > 0) ++cut;
  return std::min(cut, limit);
}

/// How a prompt relates to what is held.
enum class Shape { equal, extends, shortens, diverges, unrelated };

inline const char* name(Shape s) {
  switch (s) {
    case Shape::equal: return "equal";
    case Shape::extends: return "extends";
    case Shape::shortens: return "shortens";
    case Shape::diverges: return "diverges";
    case Shape::unrelated: return "unrelated";
  }
  return "?";
}

/// A prompt of the given shape relative to `held`.
inline Tokens prompt_from(const Tokens& held, Shape shape, const spec::Config& c, Token alphabet) {
  const auto tail = [&] { return tokens(*rc::gen::inRange<std::size_t>(0, std::min<std::size_t>(c.chunk, 64) + 4), alphabet); };
  Tokens prompt;
  switch (shape) {
    case Shape::equal: prompt = held; break;
    case Shape::extends: {
      prompt = held;
      const Tokens more = tail();
      prompt.insert(prompt.end(), more.begin(), more.end());
      break;
    }
    case Shape::shortens:
      prompt.assign(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(cut_point(c, held.size())));
      break;
    case Shape::diverges: {
      const std::size_t at = cut_point(c, held.size());
      prompt.assign(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(at));
      // A token that differs from the held one at `at` (any token when `at` is past the end).
      prompt.push_back(at < held.size() ? held[at] + 1 : 0);
      const Tokens more = tail();
      prompt.insert(prompt.end(), more.begin(), more.end());
      break;
    }
    case Shape::unrelated:
      prompt = tokens(*rc::gen::inRange<std::size_t>(0, held.size() + 8), alphabet);
      break;
  }
  return prompt;
}

inline Shape shape() {
  return *rc::gen::weightedElement<Shape>({{2, Shape::equal},
                                           {4, Shape::extends},
                                           {2, Shape::shortens},
                                           {4, Shape::diverges},
                                           {1, Shape::unrelated}});
}

/// canonical_end in [0, len(ids)]: below, at or above the common prefix with the prompt, or anywhere.
inline std::size_t canonical_end(const spec::Config& c, const Tokens& ids, const Tokens& prompt) {
  const std::size_t lcp = spec::lcp(ids, prompt);
  const std::size_t pick = pfx::gen::one_of({
      lcp == 0 ? 0 : lcp - 1, lcp, lcp + 1, ids.size(), cut_point(c, ids.size())});
  return std::min(pick, ids.size());
}

/// `prompt` cut or padded (with tokens of the alphabet) to a length at a boundary of the prefill
/// step: a multiple of it, one past (its last step is one token alone) or two past.
inline Tokens at_step_boundary(Tokens prompt, std::size_t step, Token alphabet) {
  const std::size_t base = prompt.size() - prompt.size() % step;
  const std::size_t length = base + one_of({0, 1, 2});
  if (length <= prompt.size()) {
    prompt.resize(length);
  } else {
    const Tokens more = tokens(length - prompt.size(), alphabet);
    prompt.insert(prompt.end(), more.begin(), more.end());
  }
  return prompt;
}

/// A held record and a prompt to query it with.
struct Case {
  spec::Config config;
  Tokens ids;
  std::size_t canonical_end = 0;
  Tokens prompt;
  Shape shape = Shape::equal;
};

inline rc::Gen<Case> query_case() {
  return rc::gen::exec([] {
    Case k;
    k.config = *config();
    const Token alphabet = *rc::gen::element<Token>(1, 2, 3, 1000);
    k.ids = tokens(*rc::gen::inRange<std::size_t>(0, length_scale() + 1), alphabet);
    k.shape = shape();
    k.prompt = prompt_from(k.ids, k.shape, k.config, alphabet);
    if (k.config.prefill_step != 0 && *rc::gen::arbitrary<bool>()) {
      k.prompt = at_step_boundary(k.prompt, k.config.prefill_step, alphabet);
    }
    k.canonical_end = canonical_end(k.config, k.ids, k.prompt);
    return k;
  });
}

/// Where canonical_end falls relative to the common prefix, for RC_TAG.
inline const char* canonical_end_vs_lcp(const Case& k) {
  const std::size_t lcp = spec::lcp(k.ids, k.prompt);
  return k.canonical_end < lcp ? "canonical_end < lcp" : k.canonical_end == lcp ? "canonical_end == lcp" : "canonical_end > lcp";
}

}  // namespace pfx::gen

namespace rc {

template <>
struct Arbitrary<pfx::gen::Case> {
  static Gen<pfx::gen::Case> arbitrary() { return pfx::gen::query_case(); }
};

}  // namespace rc
