// fuzz_machine: the machine (core/) and the reference model (spec/) driven side by side through an
// event stream drawn from the input by the generator the audit and the property tests use
// (spec/refinement/include/pfx/refinement/random_events.hpp). A finding is any step where the two
// answer differently, their states differ afterwards, or the machine's step breaks an invariant of
// the catalogue (INV-1..12), checked by spec/refinement/include/pfx/refinement/bridge.hpp exactly as the property tests do.

#include "byte_reader.hpp"
#include "finding.hpp"

#include <pfx/refinement/bridge.hpp>
#include <pfx/refinement/describe.hpp>
#include <pfx/refinement/random_events.hpp>

#include <pfx/core.hpp>
#include <pfx/spec/model.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <sstream>

namespace {

/// Enough steps to reach any state of a short run; bounded so that every input runs in microseconds.
constexpr std::size_t most_events = 512;

/// The audit's ranges, widened to what only a fuzzer explores: the first byte chooses an alphabet
/// of 1 to 4 letters, tails run to 11 tokens and sometimes to thousands (past the blocks of the
/// run-time prefix compare), keep_min and chunk reach the huge values, configurations draw prefill
/// steps, admission paddings and whether decode rows are exact; prompts keep all that is held, and commits claim their generated tokens, more often than
/// the audit's.
pfx::refinement::EventRanges ranges(pfx::fuzz::ByteReader& in) {
  return {.alphabet = 1 + in.below(4),
          .tail = 11,
          .long_tail = 2300,
          .huge = true,
          .prefill_steps = true,
          .decode_facts = true,
          .whole = 4,
          .past_prompt = 2};
}

[[noreturn]] void mismatch(std::size_t index, const pfx::spec::Event& event, const pfx::spec::State& before,
                           const pfx::refinement::Comparison& c, const pfx::Machine& machine,
                           const pfx::spec::State& model) {
  using pfx::refinement::describe;
  std::ostringstream what;
  what << "event " << index << ": " << describe(event)               //
       << "\n  state before: " << describe(before)                   //
       << "\n  machine:      " << describe(c.machine)                //
       << "\n  reference:    " << describe(c.reference)              //
       << "\n  violated:     " << (c.violated.empty() ? "none" : c.violated)  //
       << "\n  states agree: " << (c.states_agree ? "yes" : "no");
  if (!c.states_agree) {
    what << "\n  machine state:   " << describe(pfx::refinement::to_spec(machine))
         << "\n  reference state: " << describe(model);
  }
  pfx::fuzz::report_finding("fuzz_machine", what.str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  pfx::fuzz::ByteReader in{std::span<const std::uint8_t>(data, size)};
  pfx::refinement::RandomEvents<pfx::fuzz::ByteReader> events{in, ranges(in)};
  pfx::Machine machine;
  pfx::spec::State model;  // the same initial state: idle, nothing held, the default Config

  for (std::size_t index = 0; index < most_events && !in.exhausted(); ++index) {
    const pfx::spec::Event event = events.next(model);
    const pfx::spec::State before = model;
    const pfx::refinement::Comparison c = pfx::refinement::step_both(machine, model, event);
    if (!c.ok()) mismatch(index, event, before, c, machine, model);
    events.applied(event, model);
  }
  return 0;
}
