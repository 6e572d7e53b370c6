#pragma once

/// \file
/// Translates between the machine (core/) and the reference model (spec/), so that the two, written
/// independently, can be compared step by step. Names, not enums, carry the meaning across.

#include <pfx/core.hpp>
#include <pfx/spec/catalogue.hpp>
#include <pfx/spec/model.hpp>
#include <pfx/spec/reference.hpp>

#include <concepts>
#include <cstddef>
#include <span>
#include <variant>

namespace pfx::refinement {

/// What the bridge, the model checker and the property tests read of a machine: core's Machine, or
/// any type with the same surface, such as the deliberately wrong machines that show the verifier
/// can fail (proptest/support/wrong_machines.hpp). Checked at compile time, so that a machine that
/// is not core's is plugged in without touching core.
template <class M>
concept MachineLike = std::copyable<M> && std::equality_comparable<M> &&
                      requires(M& m, const M& c, const Event& e, std::span<const token> p) {
                        { m.apply(e) } -> std::same_as<Outcome>;
                        { c.query(p) } -> std::same_as<Outcome>;
                        { c.config() } -> std::convertible_to<Config>;
                        { c.held() } -> std::convertible_to<const Record&>;
                        { c.phase() } -> std::convertible_to<Phase>;
                        { c.begin_offset() } -> std::convertible_to<std::size_t>;
                        { c.begun() } -> std::convertible_to<std::span<const token>>;
                        { c.tainted() } -> std::convertible_to<bool>;
                      };

constexpr spec::Config to_spec(const Config& c) {
  return {c.enabled, c.keep_min, c.chunk, c.prefill_step, c.admission_padding, c.decode_rows_exact};
}
constexpr Config to_core(const spec::Config& c) {
  return {c.enabled, c.keep_min, c.chunk, c.prefill_step, c.admission_padding, c.decode_rows_exact};
}

/// The machine's whole state as the reference model writes it.
template <MachineLike M>
constexpr spec::State to_spec(const M& m) {
  spec::State s;
  s.config = to_spec(m.config());
  s.ids = spec::Tokens(m.held().ids.begin(), m.held().ids.end());
  s.canonical_end = m.held().canonical_end;
  s.writing = m.phase() == Phase::writing;
  s.begin_offset = m.begin_offset();
  s.begun = spec::Tokens(m.begun().begin(), m.begun().end());
  s.tainted = m.tainted();
  return s;
}

/// A reference event as a core event; the core event borrows the reference event's tokens.
constexpr Event to_core(const spec::Event& e) {
  struct Visitor {
    constexpr Event operator()(const spec::Query& q) const { return events::Query{q.prompt}; }
    constexpr Event operator()(const spec::Begin& b) const {
      return events::Begin{b.prompt, b.offset};
    }
    constexpr Event operator()(const spec::Commit& c) const {
      return events::Commit{c.ids, c.canonical_end};
    }
    constexpr Event operator()(const spec::Abort&) const { return events::Abort{}; }
    constexpr Event operator()(const spec::Record& r) const {
      return events::Record{r.ids, r.canonical_end};
    }
    constexpr Event operator()(const spec::Clear&) const { return events::Clear{}; }
    constexpr Event operator()(const spec::Configure& c) const {
      return events::Configure{to_core(c.config)};
    }
  };
  return std::visit(Visitor{}, e);
}

/// The machine's answer to `e` as the reference model writes it.
constexpr spec::Output to_spec(const Outcome& out, const spec::Event& e) {
  spec::Output o;
  o.refusal = name(out.refusal);
  const bool asks_offset =
      std::holds_alternative<spec::Query>(e) || std::holds_alternative<spec::Begin>(e);
  o.has_decision = asks_offset && out.refusal != Refusal::writing;
  if (o.has_decision) {
    o.offset = out.decision.offset;
    o.common_prefix = out.decision.common_prefix;
    o.reason = name(out.decision.reason);
    o.bound = name(out.decision.bound);
  }
  return o;
}

/// The result of driving the machine and the model through one event side by side.
struct Comparison {
  spec::Output machine;    ///< the machine's answer, translated
  spec::Output reference;  ///< the model's answer
  std::string_view violated;  ///< the first invariant the machine's step breaks, or ""
  bool states_agree = false;  ///< the machine's state equals the model's afterwards

  [[nodiscard]] constexpr bool ok() const {
    return machine == reference && violated.empty() && states_agree;
  }
};

/// Applies `e` to both, checks every invariant of the catalogue on the machine's step, and compares.
/// One function, not a template, so that callers may take its address (pfx audit's stepper).
constexpr Comparison step_both(Machine& machine, spec::State& model, const spec::Event& e) {
  const spec::State before = to_spec(machine);
  const Outcome out = machine.apply(to_core(e));
  const spec::State after = to_spec(machine);

  Comparison c;
  c.machine = to_spec(out, e);
  c.reference = spec::apply(model, e);
  const spec::Step step{before.config, before, e, c.machine, after};
  c.violated = spec::first_violation(step);
  c.states_agree = after == model;
  return c;
}

}  // namespace pfx::refinement
