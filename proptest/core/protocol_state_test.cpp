// Stateful runs of the whole protocol (query, begin, commit, abort, record, clear, configure), refused
// events included, against the reference protocol model; every invariant of the catalogue is checked
// after every step.

#include <pfx/refinement/bridge.hpp>
#include "support/generators.hpp"
#include "support/requirement.hpp"

#include <pfx/core.hpp>
#include <pfx/spec/catalogue.hpp>
#include <pfx/spec/reference.hpp>

#include <rapidcheck/state.h>

#include <algorithm>
#include <cstddef>
#include <ostream>
#include <set>
#include <string>

namespace {

using pfx::spec::Tokens;

/// The model: the reference protocol state, plus the prompt of the request being written, so that
/// commits can be what a real lane commits (that prompt + generated tokens).
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

constexpr pfx::spec::Token alphabet = 3;

void print(std::ostream& os, const Tokens& t) {
  os << '[';
  for (std::size_t i = 0; i < t.size(); ++i) os << (i ? "," : "") << t[i];
  os << ']';
}

/// One protocol event: applied to the model, run on the machine, compared and checked.
struct Step : rc::state::Command<Model, Lane> {
  pfx::spec::Event event;
  const char* kind = "";

  void apply(Model& model) const override {
    const bool accepted = pfx::spec::apply(model.state, event).accepted();
    if (const auto* b = std::get_if<pfx::spec::Begin>(&event); b != nullptr && accepted) {
      model.writing_prompt = b->prompt;
    }
  }

  void run(const Model& model, Lane& lane) const override {
    RC_ASSERT(pfx::refinement::to_spec(lane.machine) == model.state);
    pfx::spec::State next = model.state;
    const pfx::refinement::Comparison c = pfx::refinement::step_both(lane.machine, next, event);
    ++lane.steps;
    lane.seen.insert(std::string(kind) + (c.machine.accepted() ? "" : " refused"));
    if (c.machine.has_decision && c.machine.offset > 0) lane.seen.insert("reuse");
    RC_ASSERT(std::string(c.violated) == "");
    RC_ASSERT(c.machine == c.reference);
    RC_ASSERT(c.states_agree);
  }

  void show(std::ostream& os) const override {
    os << kind;
    if (const auto* q = std::get_if<pfx::spec::Query>(&event)) print(os, q->prompt);
    if (const auto* b = std::get_if<pfx::spec::Begin>(&event)) {
      print(os, b->prompt);
      os << " offset " << b->offset;
    }
    if (const auto* c = std::get_if<pfx::spec::Commit>(&event)) {
      print(os, c->ids);
      os << " canonical_end " << c->canonical_end;
    }
    if (const auto* r = std::get_if<pfx::spec::Record>(&event)) {
      print(os, r->ids);
      os << " canonical_end " << r->canonical_end;
    }
    if (const auto* g = std::get_if<pfx::spec::Configure>(&event)) {
      os << " enabled " << g->config.enabled << " keep_min " << g->config.keep_min << " chunk "
         << g->config.chunk;
    }
  }
};

Tokens prompt_for(const Model& m) {
  return pfx::gen::prompt_from(m.state.ids, pfx::gen::shape(), m.state.config, alphabet);
}

struct Query : Step {
  explicit Query(const Model& m) {
    kind = "query";
    event = pfx::spec::Query{prompt_for(m)};
  }
};

struct Begin : Step {
  explicit Begin(const Model& m) {
    kind = "begin";
    const Tokens prompt = prompt_for(m);
    const std::size_t granted = pfx::spec::reference_offset(m.state, prompt);
    // Mostly the granted offset; sometimes a cold start; sometimes one the rule does not grant.
    const std::size_t offset = *rc::gen::weightedElement<std::size_t>(
        {{6, granted}, {2, 0}, {1, granted + 1}, {1, granted == 0 ? 0 : granted - 1},
         {1, *rc::gen::inRange<std::size_t>(0, prompt.size() + 2)}});
    event = pfx::spec::Begin{prompt, offset};
  }
};

struct Commit : Step {
  explicit Commit(const Model& m) {
    kind = "commit";
    const pfx::spec::State& s = m.state;
    // Mostly what a lane commits: the prompt it began with, plus generated tokens.
    Tokens ids = m.writing_prompt;
    const Tokens generated = pfx::gen::tokens(*rc::gen::inRange<std::size_t>(1, 8), alphabet);
    ids.insert(ids.end(), generated.begin(), generated.end());
    std::size_t end = m.writing_prompt.size();
    switch (*rc::gen::weightedElement<int>({{8, 0}, {1, 1}, {1, 2}, {1, 3}, {1, 4}})) {
      case 1: end = ids.size() + *rc::gen::inRange<std::size_t>(1, 3); break;  // past ids
      case 2: end = s.begin_offset == 0 ? 0 : s.begin_offset - 1; break;     // before the offset
      case 3:                                                                // breaks the prefix
        if (const std::size_t kept = std::min(s.ids.size(), ids.size()); kept != 0) {
          ids[*rc::gen::inRange<std::size_t>(0, kept)] += 1;
        }
        break;
      case 4: end = *rc::gen::inRange<std::size_t>(0, ids.size() + 1); break;  // anywhere
      default: break;
    }
    event = pfx::spec::Commit{ids, end};
  }
};

struct Abort : Step {
  explicit Abort(const Model&) {
    kind = "abort";
    event = pfx::spec::Abort{};
  }
};

struct Record : Step {
  explicit Record(const Model& m) {
    kind = "record";
    const Tokens ids = prompt_for(m);
    const std::size_t end = *rc::gen::weightedElement<std::size_t>(
        {{6, ids.size()}, {3, *rc::gen::inRange<std::size_t>(0, ids.size() + 1)}, {1, ids.size() + 1}});
    event = pfx::spec::Record{ids, end};
  }
};

struct Clear : Step {
  explicit Clear(const Model&) {
    kind = "clear";
    event = pfx::spec::Clear{};
  }
};

struct Configure : Step {
  explicit Configure(const Model&) {
    kind = "configure";
    pfx::spec::Config c = *pfx::gen::config();
    if (*rc::gen::weightedElement<int>({{9, 0}, {1, 1}}) == 1) c.chunk = 0;
    event = pfx::spec::Configure{c};
  }
};

}  // namespace

PFX_PROPERTY(Protocol, EveryRunAgreesWithTheModelAndKeepsEveryInvariant,
             "INV-1 INV-2 INV-3 INV-4 INV-5 INV-6 INV-7 INV-8 INV-9 INV-10", ()) {
  Lane lane;
  pfx::spec::Config start = *pfx::gen::config();
  start.keep_min = std::min<std::size_t>(start.keep_min, 4);  // so that runs of short prompts reuse
  RC_ASSERT(lane.machine.configure(pfx::refinement::to_core(start)).accepted());
  const Model initial{pfx::refinement::to_spec(lane.machine), {}};
  rc::state::check(initial, lane,
                   rc::state::gen::execOneOfWithArgs<Query, Begin, Begin, Commit, Commit, Abort,
                                                     Record, Clear, Configure>());
  RC_CLASSIFY(lane.steps >= 30, "30+ steps");
  RC_CLASSIFY(lane.seen.count("reuse") != 0, "reused");
  RC_CLASSIFY(lane.seen.count("commit") != 0, "committed");
  RC_CLASSIFY(lane.seen.count("abort") != 0, "aborted");
  RC_CLASSIFY(lane.seen.count("begin refused") != 0, "begin refused");
  RC_CLASSIFY(lane.seen.count("commit refused") != 0, "commit refused");
}
