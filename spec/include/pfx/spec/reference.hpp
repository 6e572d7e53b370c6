#pragma once

/// \file
/// The reference model: the offset found by direct search over every candidate, and the protocol as
/// a plain function over a struct. Deliberately slow and obvious; see docs/spec.md.

#include <pfx/spec/model.hpp>

#include <cstddef>
#include <string_view>
#include <variant>

namespace pfx::spec {

/// Length of the longest common prefix, by definition.
constexpr std::size_t lcp(const Tokens& a, const Tokens& b) {
  std::size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) n = n + 1;
  return n;
}

/// How many tokens the last step computes when an engine prefills t >= 1 tokens in steps of `step`
/// tokens: the steps are [0, step), [step, 2 step), ..., and the last is the one that holds token
/// t - 1. Walked step by step, as the engine's scheduler does.
constexpr std::size_t last_step(std::size_t t, std::size_t step) {
  std::size_t start = 0;
  while (t - start > step) start = start + step;
  return t - start;
}

/// Whether the last step of a resume admitted with t >= 1 tokens left computes one token alone: an
/// engine that pads an admission leaving one token computes that step with 1 + admission_padding
/// rows, which is one alone only when admission_padding is 0 (compared, not added, so that a
/// padding of 2^64 - 1 does not wrap round to one row).
constexpr bool admitted_alone(const Config& c, std::size_t t) {
  if (t != 1) return last_step(t, c.prefill_step) == 1;
  return c.admission_padding == 0;  // 1 + admission_padding rows
}

/// INV-12 for a candidate offset n: with a prefill step, the resumed prefill of the prompt's last
/// len(prompt) - n tokens ends with a step of one token alone exactly when the cold prefill of the
/// whole prompt does. Without a prefill step there is no such premise, and a cold prefill (n == 0)
/// is the cold run, which is never padded. An n that leaves no token has no last step to compare
/// (INV-3 refuses it too).
constexpr bool one_token_step(const Config& c, const Tokens& prompt, std::size_t n) {
  if (c.prefill_step == 0 || n == 0) return true;
  if (n >= prompt.size()) return false;
  const bool cold_alone = last_step(prompt.size(), c.prefill_step) == 1;
  const bool resumed_alone = admitted_alone(c, prompt.size() - n);
  return resumed_alone == cold_alone;
}

/// The rows INV-2 lets the rule offer: those below canonical_end, which a prefill wrote; or, when
/// the engine writes decode rows as a cold prefill would, every row the record holds.
constexpr std::size_t offerable_rows(const State& s) {
  if (s.config.decode_rows_exact) return s.ids.size();
  return s.canonical_end;
}

/// INV-1, INV-2, INV-3 and INV-5 for a candidate offset n: the caps and the chunk grid.
constexpr bool within_grid(const State& s, const Tokens& prompt, std::size_t n) {
  const bool strict_prefix = n <= lcp(s.ids, prompt);
  const bool canonical = n <= offerable_rows(s);
  const bool one_left = n == 0 || n + 1 <= prompt.size();
  const bool aligned = n % s.config.chunk == 0;
  return strict_prefix && canonical && one_left && aligned;
}

/// INV-1, INV-2, INV-3, INV-5 and INV-12 for a candidate offset n (the bounds, without keep_min).
constexpr bool within_bounds(const State& s, const Tokens& prompt, std::size_t n) {
  return within_grid(s, prompt, n) && one_token_step(s.config, prompt, n);
}

/// INV-1..5 and INV-12 for a candidate offset n.
constexpr bool allowed(const State& s, const Tokens& prompt, std::size_t n) {
  const bool keep_min = n == 0 || n >= s.config.keep_min;
  return within_bounds(s, prompt, n) && keep_min;
}

/// The largest n in [0, len(prompt)) satisfying INV-1..5 and INV-12, found by trying every n; else 0.
constexpr std::size_t reference_offset(const State& s, const Tokens& prompt) {
  if (!s.config.enabled || s.ids.empty()) return 0;  // INV-6
  std::size_t best = 0;
  for (std::size_t n = 0; n < prompt.size(); ++n) {
    if (allowed(s, prompt, n)) best = n;
  }
  return best;
}

/// The full answer to a query: offset, common prefix, the reason, and the bound that cut the reuse.
constexpr Output reference_decision(const State& s, const Tokens& prompt) {
  Output out;
  out.has_decision = true;
  if (!s.config.enabled) {
    out.reason = "disabled";
    out.bound = "none";
    return out;
  }
  if (s.ids.empty()) {
    out.reason = "empty record";
    out.bound = "none";
    return out;
  }
  out.common_prefix = lcp(s.ids, prompt);
  out.offset = reference_offset(s, prompt);

  // The largest offset the bounds alone allow (keep_min aside), by direct search; and the largest
  // the caps and the grid allow, without the prefill step.
  std::size_t reach = 0;
  std::size_t grid_reach = 0;
  for (std::size_t n = 0; n < prompt.size(); ++n) {
    if (within_bounds(s, prompt, n)) reach = n;
    if (within_grid(s, prompt, n)) grid_reach = n;
  }
  if (reach == 0) {
    out.reason = "nothing reusable";
  } else if (reach < s.config.keep_min) {
    out.reason = "below keep_min";
  } else {
    out.reason = "reused";
  }

  // Which bound is tightest: the first of the three caps that equals their minimum; alignment when
  // rounding to the chunk grid lowered it further; prefill step when the one-token step lowered
  // what the grid allows.
  const std::size_t caps[3] = {out.common_prefix, offerable_rows(s),
                               prompt.empty() ? 0 : prompt.size() - 1};
  const std::string_view names[3] = {"common prefix", "canonical end", "one token left"};
  std::size_t tightest = 0;
  for (std::size_t i = 1; i < 3; ++i) {
    if (caps[i] < caps[tightest]) tightest = i;
  }
  if (reach < grid_reach) {
    out.bound = "prefill step";
  } else if (grid_reach < caps[tightest]) {
    out.bound = "alignment";
  } else {
    out.bound = names[tightest];
  }
  return out;
}

/// The protocol: apply one event to the state, in place, and say what it answers. A refusal changes
/// nothing. The record is what SAFE lets the rule offer (spec/include/pfx/spec/ghost.hpp): after each
/// event it claims the most the KV state is known to hold as a cold prefill on the current grid
/// would write it, and nothing more. The refusals follow from that, not from core's code:
/// - query and begin while writing: rows are being rewritten, so no claim about them is known.
/// - begin at an offset other than 0 or the rule's: rows past the rule's offset are not known.
/// - commit outside a write, or with ids that are not the begun prompt followed by what decode
///   wrote, or with canonical_end past that prompt: the record would claim rows the engine did not
///   write, or decode rows as prefill ones. A smaller canonical_end claims less, and is accepted.
/// - record, clear and configure: record is the caller's word (unchecked); clear makes every row,
///   and the write in flight, unusable; a new chunk grid makes every held row a row of another grid;
///   a change of whether decode rows are exact makes the held rows those of another engine (turned
///   on, its decode rows are not known exact; turned off, rows below canonical_end may be decode
///   rows a resume took).
struct Protocol {
  State& s;

  constexpr Output operator()(const Query& e) const {
    if (s.writing) return refused("writing");
    return reference_decision(s, e.prompt);
  }

  constexpr Output operator()(const Begin& e) const {
    if (s.writing) return refused("writing");
    Output out = reference_decision(s, e.prompt);
    if (e.offset != 0 && e.offset != out.offset) {
      out.refusal = "offset not granted";
      return out;
    }
    // Rows from the offset on are rewritten now: only the untouched rows below it stay claimed.
    s.ids = take(s.ids, e.offset);
    if (s.canonical_end > e.offset) s.canonical_end = e.offset;
    s.writing = true;
    s.begin_offset = e.offset;
    s.begun = e.prompt;
    s.tainted = false;
    return out;
  }

  constexpr Output operator()(const Commit& e) const {
    if (!s.writing) return refused("not writing");
    if (e.canonical_end > e.ids.size()) return refused("canonical_end past ids");
    if (lcp(s.begun, e.ids) != s.begun.size()) return refused("ids not begun prompt");
    if (e.canonical_end > s.begun.size()) return refused("canonical_end past prompt");
    // The engine wrote a prefill of the begun prompt from the offset on the current grid on top of
    // rows a cold prefill writes, and decode rows from len(prompt) on: ids with canonical_end at
    // most len(prompt) claim only rows a cold prefill writes. Unless a clear made them unusable.
    if (s.config.enabled && !s.tainted) {
      s.ids = e.ids;
      s.canonical_end = e.canonical_end;
    }
    end_write();
    return Output{};
  }

  constexpr Output operator()(const Abort&) const {
    if (!s.writing) return refused("not writing");
    end_write();  // the rows below the offset were never touched: the record still holds
    return Output{};
  }

  constexpr Output operator()(const Record& e) const {
    if (s.writing) return refused("writing");
    if (e.canonical_end > e.ids.size()) return refused("canonical_end past ids");
    if (s.config.enabled) {
      s.ids = e.ids;
      s.canonical_end = e.canonical_end;
    }
    return Output{};
  }

  constexpr Output operator()(const Clear&) const {
    s.ids = Tokens{};
    s.canonical_end = 0;
    if (s.writing) s.tainted = true;
    return Output{};
  }

  constexpr Output operator()(const Configure& e) const {
    if (s.writing) return refused("writing");
    if (e.config.chunk == 0) return refused("chunk zero");
    const bool same_grid = e.config.chunk == s.config.chunk;
    const bool same_engine = e.config.decode_rows_exact == s.config.decode_rows_exact;
    s.config = e.config;
    if (!s.config.enabled || !same_grid || !same_engine) {
      s.ids = Tokens{};
      s.canonical_end = 0;
    }
    return Output{};
  }

  static constexpr Output refused(std::string_view why) {
    Output out;
    out.refusal = why;
    return out;
  }

  static constexpr Tokens take(const Tokens& t, std::size_t n) {
    Tokens kept;
    for (std::size_t i = 0; i < n && i < t.size(); ++i) kept.push_back(t[i]);
    return kept;
  }

  constexpr void end_write() const {
    s.writing = false;
    s.begin_offset = 0;
    s.begun = Tokens{};
    s.tainted = false;
  }
};

/// One step of the reference protocol.
constexpr Output apply(State& s, const Event& e) { return std::visit(Protocol{s}, e); }

}  // namespace pfx::spec
