#pragma once

/// \file
/// The invariant catalogue: INV-1..12 as named predicates over one step of the protocol. The same
/// tuple drives the compile-time proofs, the property tests, `pfx_catalogue` (the docs table) and the
/// check that every invariant has a test.

#include <pfx/spec/model.hpp>
#include <pfx/spec/reference.hpp>

#include <boost/hana/for_each.hpp>
#include <boost/hana/tuple.hpp>

#include <cstddef>
#include <string_view>
#include <variant>

namespace pfx::spec {

/// One step: the configuration in force, the state before, the event, what it answered, the state
/// after.
struct Step {
  const Config& config;
  const State& before;
  const Event& event;
  const Output& output;
  const State& after;

  /// The prompt a decision was made for (query and begin), else nullptr.
  [[nodiscard]] constexpr const Tokens* prompt() const {
    if (const auto* q = std::get_if<Query>(&event)) return &q->prompt;
    if (const auto* b = std::get_if<Begin>(&event)) return &b->prompt;
    return nullptr;
  }
  /// True when the step answered a decision about a prompt: the invariants of the rule apply.
  [[nodiscard]] constexpr bool decided() const { return output.has_decision && prompt() != nullptr; }
};

/// An invariant: its ID, short name, statement, and the predicate that checks it on a step.
template <class Predicate>
struct Invariant {
  std::string_view id;
  std::string_view name;
  std::string_view statement;
  Predicate holds;
};
template <class Predicate>
Invariant(std::string_view, std::string_view, std::string_view, Predicate) -> Invariant<Predicate>;

inline constexpr auto catalogue = boost::hana::make_tuple(
    Invariant{"INV-1", "strict prefix", "offset <= lcp(ids, prompt)",
              [](const Step& s) {
                return !s.decided() || s.output.offset <= lcp(s.before.ids, *s.prompt());
              }},
    Invariant{"INV-2", "canonical end",
              "offset <= canonical_end, unless decode_rows_exact (the engine writes a decode row "
              "bit-equal to the row a cold prefill of the same tokens writes), when offset <= len(ids)",
              [](const Step& s) {
                const std::size_t rows =
                    s.config.decode_rows_exact ? s.before.ids.size() : s.before.canonical_end;
                return !s.decided() || s.output.offset <= rows;
              }},
    Invariant{"INV-3", "one left", "offset == 0 or offset <= len(prompt) - 1",
              [](const Step& s) {
                return !s.decided() || s.output.offset == 0 ||
                       s.output.offset + 1 <= s.prompt()->size();
              }},
    Invariant{"INV-4", "keep min", "offset == 0 or offset >= keep_min",
              [](const Step& s) {
                return !s.decided() || s.output.offset == 0 ||
                       s.output.offset >= s.config.keep_min;
              }},
    Invariant{"INV-5", "aligned", "offset % chunk == 0",
              [](const Step& s) {
                return !s.decided() || s.output.offset % s.config.chunk == 0;
              }},
    Invariant{"INV-6", "off means off", "disabled or empty record -> offset 0",
              [](const Step& s) {
                const bool off = !s.config.enabled || s.before.ids.empty();
                return !s.decided() || !off || s.output.offset == 0;
              }},
    Invariant{"INV-7", "maximal",
              "offset is the largest value allowed by INV-1..5 and INV-12, else 0 (no reuse is "
              "left on the table)",
              [](const Step& s) {
                if (!s.decided() || !s.config.enabled || s.before.ids.empty()) return true;
                const Tokens& prompt = *s.prompt();
                if (!allowed(s.before, prompt, s.output.offset)) return false;
                for (std::size_t n = s.output.offset + 1; n < prompt.size(); ++n) {
                  if (allowed(s.before, prompt, n)) return false;
                }
                return true;
              }},
    Invariant{"INV-8", "no stale rows",
              "between `begin(offset)` and `commit`, and after `abort`, the record claims no row "
              ">= offset",
              [](const Step& s) {
                const State& a = s.after;
                const bool during = !a.writing || (a.ids.size() <= a.begin_offset &&
                                                   a.canonical_end <= a.begin_offset);
                const bool aborted = !std::holds_alternative<Abort>(s.event) ||
                                     !s.output.accepted() ||
                                     a.ids.size() <= s.before.begin_offset;
                return during && aborted;
              }},
    Invariant{"INV-9", "well formed", "canonical_end <= len(ids); chunk >= 1",
              [](const Step& s) {
                return s.after.canonical_end <= s.after.ids.size() && s.after.config.chunk >= 1;
              }},
    Invariant{"INV-10", "refusal changes nothing",
              "an event the machine refuses (bad argument, wrong phase) leaves the record exactly "
              "as it was",
              [](const Step& s) { return s.output.accepted() || s.after == s.before; }},
    Invariant{"INV-11", "true record",
              "a commit records only its begun prompt, then what decode wrote, with canonical_end <= "
              "len(prompt); after a clear during the write it records nothing; a new chunk, or a "
              "change of decode_rows_exact, forgets the record",
              [](const Step& s) {
                if (!s.output.accepted()) return true;
                if (std::holds_alternative<Commit>(s.event)) {
                  if (s.before.tainted) return s.after.ids.empty();
                  const std::size_t n = s.before.begun.size();
                  return s.after.ids.empty() ||
                         (s.after.canonical_end <= n && lcp(s.after.ids, s.before.begun) == n);
                }
                if (const auto* c = std::get_if<Configure>(&s.event)) {
                  const bool same_engine = c->config.chunk == s.before.config.chunk &&
                                           c->config.decode_rows_exact == s.before.config.decode_rows_exact;
                  return same_engine || s.after.ids.empty();
                }
                return true;
              }},
    Invariant{"INV-12", "one-token step",
              "prefill_step == 0 or offset == 0 or alone_resumed(len(prompt) - offset) == "
              "alone(len(prompt)), where alone(t): a prefill of t tokens in steps of prefill_step ends "
              "with a step of one token, and alone_resumed(t): alone(t) and not (admission_padding != 0 "
              "and t == 1), a padded admission computing more than one row",
              [](const Step& s) {
                return !s.decided() || one_token_step(s.config, *s.prompt(), s.output.offset);
              }});

/// Calls `f(invariant)` for each entry of the catalogue, in order.
template <class F>
constexpr void for_each_invariant(F&& f) {
  boost::hana::for_each(catalogue, f);
}

/// True when every invariant holds on the step.
constexpr bool all_hold(const Step& step) {
  bool ok = true;
  for_each_invariant([&](const auto& inv) { ok = ok && inv.holds(step); });
  return ok;
}

/// The ID of the first invariant that fails on the step, or "" when all hold.
constexpr std::string_view first_violation(const Step& step) {
  std::string_view failed;
  for_each_invariant([&](const auto& inv) {
    if (failed.empty() && !inv.holds(step)) failed = inv.id;
  });
  return failed;
}

}  // namespace pfx::spec
