// fuzz_machine: the machine (core/) and the reference model (spec/) driven side by side through an
// event stream decoded from the input (machine_events.hpp). A finding is any step where the two
// answer differently, their states differ afterwards, or the machine's step breaks an invariant of
// the catalogue (INV-1..11), checked by spec/refinement/include/pfx/refinement/bridge.hpp exactly as the property tests do.

#include "byte_reader.hpp"
#include <pfx/refinement/describe.hpp>
#include "finding.hpp"
#include "machine_events.hpp"
#include <pfx/refinement/bridge.hpp>

#include <pfx/core.hpp>
#include <pfx/spec/model.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <sstream>
#include <variant>

namespace {

/// Enough steps to reach any state of a short run; bounded so that every input runs in microseconds.
constexpr std::size_t most_events = 512;

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
  pfx::fuzz::MachineEventDecoder decoder{in};
  pfx::Machine machine;
  pfx::spec::State model;  // the same initial state: idle, nothing held, the default Config

  for (std::size_t index = 0; index < most_events && !in.exhausted(); ++index) {
    const pfx::spec::Event event = decoder.next(model);
    const pfx::spec::State before = model;
    const pfx::refinement::Comparison c = pfx::refinement::step_both(machine, model, event);
    if (!c.ok()) mismatch(index, event, before, c, machine, model);
    if (const auto* begin = std::get_if<pfx::spec::Begin>(&event); begin != nullptr && c.reference.accepted()) {
      decoder.writing(begin->prompt);
    }
  }
  return 0;
}
