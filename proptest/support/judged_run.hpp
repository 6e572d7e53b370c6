#pragma once

/// \file
/// A random run of the whole protocol on any machine with core's surface (refinement::MachineLike),
/// each step judged by one of the verifier's judgments: SAFE against the ghost state (every prompt
/// asked so far, after every step), the reference protocol (answer and state, step by step from the
/// machine's own state), or the catalogue's invariants. Core's Machine must pass every judgment; the
/// wrong machines of wrong_machines.hpp must each fail the judgments that catch them, with the run
/// that shows it printed (RC_LOG).

#include "support/generators.hpp"

#include <pfx/refinement/bridge.hpp>
#include <pfx/refinement/describe.hpp>
#include <pfx/refinement/random_events.hpp>

#include <pfx/core.hpp>
#include <pfx/spec/catalogue.hpp>
#include <pfx/spec/ghost.hpp>
#include <pfx/spec/model.hpp>
#include <pfx/spec/reference.hpp>

#include <cstddef>
#include <string>
#include <variant>
#include <vector>

namespace pfx::test {

enum class Judgment { safe, reference, invariant };

inline const char* name(Judgment j) {
  switch (j) {
    case Judgment::safe: return "SAFE";
    case Judgment::reference: return "the reference protocol";
    case Judgment::invariant: return "the invariants";
  }
  return "?";
}

/// The events' ranges: the audit's over two letters, which realise every first difference
/// (docs/spec.md) and make reuse common. A wrong machine is caught only by a run that does what it
/// mishandles and then reuses those rows, so prompts often keep all that is held, and records, clears
/// during a write, new grids and commits past the prompt come often. Queries are left to the run, which
/// asks every prompt after every step.
constexpr refinement::EventRanges judged_ranges{
    .alphabet = 2,
    .decode_facts = true,
    .whole = 6,
    .past_prompt = 2,
    .weights = {.commit = 6, .abort = 2, .clear = 2, .query = 0, .begin = 5, .record = 2, .configure = 1, .any = 3}};

/// The property: a random run of `M` from a small configuration passes `judgment` on every step.
template <refinement::MachineLike M>
void judged_run(Judgment judgment) {
  M machine;
  spec::Ghost ghost;
  std::vector<spec::Tokens> asked;
  spec::Config start;
  start.keep_min = *rc::gen::inRange<std::size_t>(0, 4);
  start.chunk = *rc::gen::inRange<std::size_t>(1, 4);
  // An engine that writes decode rows exactly in one run of 3 from the start (and a configure may
  // change it): its commits' decode rows are then offered, and SAFE judges them by the ghost's
  // writer tags.
  start.decode_rows_exact = *rc::gen::inRange<std::size_t>(0, 3) == 0;
  const spec::Event configure = spec::Configure{start};
  RC_ASSERT(machine.apply(refinement::to_core(configure)).accepted());
  spec::follow(ghost, configure, true);
  RC_LOG() << refinement::describe(configure) << "\n";
  const std::size_t steps = *rc::gen::inRange<std::size_t>(1, 40);
  gen::Draws draws;
  refinement::RandomEvents<gen::Draws> events(draws, judged_ranges);
  std::size_t reused = 0;  // non-zero offers judged: the run is not vacuous
  for (std::size_t n = 0; n < steps; ++n) {
    const spec::State before = refinement::to_spec(machine);
    const spec::Event e = events.next(before);
    if (const auto* b = std::get_if<spec::Begin>(&e)) asked.push_back(b->prompt);
    if (const auto* r = std::get_if<spec::Record>(&e)) asked.push_back(r->ids);
    const spec::Output says = refinement::to_spec(machine.apply(refinement::to_core(e)), e);
    const spec::State after = refinement::to_spec(machine);
    events.applied(e, after);
    spec::follow(ghost, e, says.accepted());
    RC_LOG() << refinement::describe(e) << " -> " << refinement::describe(says) << "\n";
    if (judgment == Judgment::reference) {
      spec::State model = before;
      const spec::Output reference = spec::apply(model, e);
      if (says != reference) RC_LOG() << "the reference answers " << refinement::describe(reference) << "\n";
      RC_ASSERT(says == reference);
      if (after != model) RC_LOG() << "the reference's state: " << refinement::describe(model) << "\n";
      RC_ASSERT(after == model);
    }
    if (judgment == Judgment::invariant) {
      RC_ASSERT(std::string(spec::first_violation({before.config, before, e, says, after})) == "");
    }
    if (after.writing) continue;  // queries are refused while writing
    for (const spec::Tokens& p : asked) {
      const spec::Event query = spec::Query{p};
      const spec::Output offer = refinement::to_spec(machine.query(p), query);
      if (judgment == Judgment::reference) {
        const spec::Output expected = spec::reference_decision(after, p);
        if (offer != expected) RC_LOG() << "for " << refinement::describe(p) << " the reference answers " << refinement::describe(expected) << "\n";
        RC_ASSERT(offer == expected);
      }
      if (judgment == Judgment::invariant) {
        RC_ASSERT(std::string(spec::first_violation({after.config, after, query, offer, after})) == "");
      }
      if (offer.offset != 0) ++reused;
      if (judgment == Judgment::safe && !ghost.safe(p, offer.offset)) {
        RC_LOG() << "SAFE fails: offset " << offer.offset << " for " << refinement::describe(p) << "\n";
        RC_FAIL("SAFE: the offer includes a row that is not what a cold prefill writes there");
      }
    }
  }
  RC_CLASSIFY(reused != 0, "an offer reused rows");
}

}  // namespace pfx::test
