#pragma once

/// \file
/// The seeded random protocol runs of `pfx audit`: each case configures a fresh machine and model,
/// then drives both through random events (random_events.hpp, refused ones included), one step per
/// event, so that every step is compared with the reference model and checked against INV-1..12.

#include <pfx/refinement/bridge.hpp>
#include <pfx/refinement/random_events.hpp>

#include <pfx/core.hpp>
#include <pfx/spec/model.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <vector>

namespace pfx::refinement {

/// One step of a run: `event` applied to the machine and the model side by side, compared, and
/// checked against the catalogue. The audit uses step_both; tests pass a broken one to show that a
/// violation is reported.
using Stepper = std::function<Comparison(Machine&, spec::State&, const spec::Event&)>;

/// The first step that failed: which case and step, the events of that case up to it, and what the
/// machine and the model said.
struct RandomRunFailure {
  std::size_t case_index = 0;
  std::size_t step_index = 0;
  std::vector<spec::Event> events;  ///< the case's events, the failing one last
  spec::State before;               ///< the model's state before the failing event
  spec::State machine_after;        ///< the machine's state after it
  spec::State model_after;          ///< the model's state after it
  Comparison comparison;
};

struct RandomRunsReport {
  std::size_t cases = 0;   ///< cases run
  bool stopped = false;    ///< the hook stopped the runs before the last case
  std::size_t steps = 0;
  std::size_t failed = 0;  ///< failing steps; each case stops at its first
  std::optional<RandomRunFailure> first;  ///< the first failure, if any
};

/// Called before each case with the cases done so far (a progress bar); false stops the runs there
/// (a signal: `pfx audit` stops between two cases).
using CaseHook = std::function<bool(std::size_t)>;

/// `cases` runs of `events_per_case` random events each, all drawn from `seed`: the same seed and
/// counts give the same events, so a failure is replayed by running again with that seed.
[[nodiscard]] inline RandomRunsReport run_random_cases(std::uint64_t seed, std::size_t cases,
                                                       std::size_t events_per_case, const Stepper& step,
                                                       const CaseHook& before_case = {}) {
  RandomRunsReport report;
  std::mt19937_64 random(seed);
  SeededDraws draws{random};
  for (std::size_t c = 0; c < cases; ++c) {
    if (before_case && !before_case(c)) {  // asked to stop: every case so far is whole
      report.stopped = true;
      break;
    }
    ++report.cases;
    RandomEvents<SeededDraws> source(draws);
    Machine machine;
    spec::State model;
    std::vector<spec::Event> events;
    for (std::size_t s = 0; s < events_per_case; ++s) {
      events.push_back(s == 0 ? spec::Event{source.configure()} : source.next(model));
      const spec::Event& event = events.back();
      const spec::State before = model;
      const Comparison result = step(machine, model, event);
      ++report.steps;
      if (!result.ok()) {
        if (report.failed++ == 0) {
          report.first = RandomRunFailure{c, s, events, before, to_spec(machine), model, result};
        }
        break;  // the machine and the model no longer agree on the state: the rest would not mean much
      }
      source.applied(event, model);
    }
  }
  return report;
}

}  // namespace pfx::refinement
