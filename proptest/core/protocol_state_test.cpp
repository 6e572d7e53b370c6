// Stateful runs of the whole protocol (query, begin, commit, abort, record, clear, configure), refused
// events included, against the reference protocol model; every invariant of the catalogue is checked
// after every step. The events are the shared generator's (pfx/refinement/random_events.hpp), with
// every kind of event common and huge settings among them; RapidCheck shrinks a failing run to the
// fewest events that still fail.

#include <pfx/refinement/bridge.hpp>
#include <pfx/refinement/describe.hpp>
#include <pfx/refinement/random_events.hpp>
#include "support/generators.hpp"
#include "support/requirement.hpp"

#include <pfx/core.hpp>
#include <pfx/spec/reference.hpp>

#include <rapidcheck/state.h>

#include <algorithm>
#include <cstddef>
#include <ostream>
#include <set>
#include <string>

namespace {

using pfx::spec::Tokens;

/// The model: the reference protocol state, plus the prompt being written, from which the generator
/// draws what a real lane commits (that prompt + generated tokens).
struct Model {
  pfx::spec::State state;
  Tokens writing_prompt;
};

/// The system under test: the machine, and what the run has exercised (for the case mix).
struct Lane {
  pfx::Machine machine;
  std::set<std::string> seen;
  std::size_t steps = 0;
};

/// Every kind of event common, huge keep_min and chunk, every kind of prefill step and admission
/// padding and decode rows exact or not among the settings, and tails long enough to cross the blocks of the run-time prefix compare.
constexpr pfx::refinement::EventRanges protocol_ranges{
    .long_tail = 40,
    .huge = true,
    .prefill_steps = true,
    .decode_facts = true,
    .whole = 2,
    .past_prompt = 1,
    .weights = {.commit = 5, .abort = 1, .clear = 1, .query = 3, .begin = 3, .record = 1, .configure = 1, .any = 4}};

/// One protocol event, drawn from the model's state: applied to the model, run on the machine,
/// compared and checked.
struct Step : rc::state::Command<Model, Lane> {
  pfx::spec::Event event;

  explicit Step(const Model& m) {
    pfx::gen::Draws draws;
    event = pfx::refinement::RandomEvents<pfx::gen::Draws>(draws, protocol_ranges, m.writing_prompt).next(m.state);
  }

  void apply(Model& model) const override {
    pfx::spec::apply(model.state, event);
    model.writing_prompt = pfx::refinement::prompt_written_after(event, model.state, model.writing_prompt);
  }

  void run(const Model& model, Lane& lane) const override {
    RC_ASSERT(pfx::refinement::to_spec(lane.machine) == model.state);
    pfx::spec::State next = model.state;
    const pfx::refinement::Comparison c = pfx::refinement::step_both(lane.machine, next, event);
    ++lane.steps;
    const std::string said = pfx::refinement::describe(event);
    const std::string kind = said.substr(0, said.find(' '));  // "begin", "commit", ...
    lane.seen.insert(kind + (c.machine.accepted() ? "" : " refused"));
    if (c.machine.has_decision && c.machine.offset > 0) lane.seen.insert("reuse");
    RC_ASSERT(std::string(c.violated) == "");
    RC_ASSERT(c.machine == c.reference);
    RC_ASSERT(c.states_agree);
  }

  void show(std::ostream& os) const override { os << pfx::refinement::describe(event); }
};

}  // namespace

PFX_PROPERTY(Protocol, EveryRunAgreesWithTheModelAndKeepsEveryInvariant,
             "INV-1 INV-2 INV-3 INV-4 INV-5 INV-6 INV-7 INV-8 INV-9 INV-10", ()) {
  Lane lane;
  pfx::spec::Config start = *pfx::gen::config();
  start.keep_min = std::min<std::size_t>(start.keep_min, 4);  // so that runs of short prompts reuse
  RC_ASSERT(lane.machine.configure(pfx::refinement::to_core(start)).accepted());
  const Model initial{pfx::refinement::to_spec(lane.machine), {}};
  rc::state::check(initial, lane, rc::state::gen::execOneOfWithArgs<Step>());
  RC_CLASSIFY(lane.steps >= 30, "30+ steps");
  RC_CLASSIFY(lane.seen.count("reuse") != 0, "reused");
  RC_CLASSIFY(lane.seen.count("commit") != 0, "committed");
  RC_CLASSIFY(lane.seen.count("abort") != 0, "aborted");
  RC_CLASSIFY(lane.seen.count("begin refused") != 0, "begin refused");
  RC_CLASSIFY(lane.seen.count("commit refused") != 0, "commit refused");
}
