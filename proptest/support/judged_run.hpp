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

#include <pfx/core.hpp>
#include <pfx/spec/catalogue.hpp>
#include <pfx/spec/ghost.hpp>
#include <pfx/spec/model.hpp>
#include <pfx/spec/reference.hpp>

#include <algorithm>
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

namespace judged {

constexpr spec::Token alphabet = 2;  // two letters realise every first difference (docs/spec.md)

/// A prompt related to what is held (or to the prompts asked before), short enough to reuse often.
inline spec::Tokens prompt(const spec::State& s, const std::vector<spec::Tokens>& asked) {
  const spec::Tokens& base =
      asked.empty() || *rc::gen::arbitrary<bool>() ? s.ids : asked[*rc::gen::inRange<std::size_t>(0, asked.size())];
  spec::Tokens p = gen::prompt_from(base, gen::shape(), s.config, alphabet);
  if (p.size() > 12) p.resize(12);
  return p;
}

/// One event of the protocol, mostly one a lane would send in this state, sometimes one it refuses.
inline spec::Event event(const spec::State& s, const std::vector<spec::Tokens>& asked) {
  if (s.writing) {
    switch (*rc::gen::weightedElement<int>({{6, 0}, {2, 1}, {2, 2}, {1, 3}})) {
      case 1: return spec::Abort{};
      case 2: return spec::Clear{};
      case 3: return spec::Query{s.begun};  // refused while writing
      default: break;
    }
    spec::Tokens ids = s.begun;
    const spec::Tokens generated = gen::tokens(*rc::gen::inRange<std::size_t>(0, 3), alphabet);
    ids.insert(ids.end(), generated.begin(), generated.end());
    std::size_t end = s.begun.size();
    switch (*rc::gen::weightedElement<int>({{6, 0}, {1, 1}, {1, 2}, {1, 3}})) {
      case 1: end = *rc::gen::inRange<std::size_t>(0, ids.size() + 2); break;  // anywhere, past ids too
      case 2:  // a token of the prompt changed
        if (!ids.empty()) ids[*rc::gen::inRange<std::size_t>(0, ids.size())] ^= 1;
        break;
      case 3: end = ids.size(); break;  // past the prompt when something was generated
      default: break;
    }
    return spec::Commit{ids, end};
  }
  switch (*rc::gen::weightedElement<int>({{5, 0}, {2, 1}, {1, 2}, {1, 3}})) {
    case 1: {
      const spec::Tokens ids = prompt(s, asked);
      const std::size_t end = *rc::gen::weightedElement<std::size_t>(
          {{4, ids.size()}, {2, *rc::gen::inRange<std::size_t>(0, ids.size() + 1)}, {1, ids.size() + 1}});
      return spec::Record{ids, end};
    }
    case 2: return spec::Clear{};
    case 3: {
      spec::Config c;
      c.enabled = *rc::gen::weightedElement<bool>({{9, true}, {1, false}});
      c.keep_min = *rc::gen::inRange<std::size_t>(0, 4);
      c.chunk = *rc::gen::weightedElement<std::size_t>({{3, s.config.chunk}, {2, 1}, {2, 2}, {1, 3}, {1, 0}});
      return spec::Configure{c};
    }
    default: break;
  }
  const spec::Tokens p = prompt(s, asked);
  const std::size_t granted = spec::reference_offset(s, p);
  const std::size_t offset = *rc::gen::weightedElement<std::size_t>({{6, granted}, {2, 0}, {1, granted + 1}});
  return spec::Begin{p, offset};
}

}  // namespace judged

/// The property: a random run of `M` from a small configuration passes `judgment` on every step.
template <refinement::MachineLike M>
void judged_run(Judgment judgment) {
  M machine;
  spec::Ghost ghost;
  std::vector<spec::Tokens> asked;
  spec::Config start;
  start.keep_min = *rc::gen::inRange<std::size_t>(0, 4);
  start.chunk = *rc::gen::inRange<std::size_t>(1, 4);
  const spec::Event configure = spec::Configure{start};
  RC_ASSERT(machine.apply(refinement::to_core(configure)).accepted());
  spec::follow(ghost, configure, true);
  RC_LOG() << refinement::describe(configure) << "\n";
  const std::size_t steps = *rc::gen::inRange<std::size_t>(1, 40);
  std::size_t reused = 0;  // non-zero offers judged: the run is not vacuous
  for (std::size_t n = 0; n < steps; ++n) {
    const spec::State before = refinement::to_spec(machine);
    const spec::Event e = judged::event(before, asked);
    if (const auto* b = std::get_if<spec::Begin>(&e)) asked.push_back(b->prompt);
    if (const auto* r = std::get_if<spec::Record>(&e)) asked.push_back(r->ids);
    const spec::Output says = refinement::to_spec(machine.apply(refinement::to_core(e)), e);
    const spec::State after = refinement::to_spec(machine);
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
