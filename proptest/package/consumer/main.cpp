// A user of pfx: the machine decides an offset, at compile time and at run time, and the reference
// model agrees; a lane serves two turns on the host reference engine and reuses the first.

#include <pfx/core.hpp>
#include <pfx/engines/host_reference_engine.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/spec/reference.hpp>

#include <cstdio>
#include <vector>

constexpr std::size_t reuse() {
  pfx::Machine m;
  (void)m.configure({.enabled = true, .keep_min = 2, .chunk = 1});
  const std::vector<pfx::token> held = {1, 2, 3, 4};
  (void)m.record(held, 4);
  const std::vector<pfx::token> prompt = {1, 2, 3, 9};
  return m.query(prompt).decision.offset;
}
static_assert(reuse() == 3);

int main() {
  pfx::spec::State s;
  s.config.keep_min = 2;
  s.ids = {1, 2, 3, 4};
  s.canonical_end = 4;
  const std::size_t expected = pfx::spec::reference_offset(s, {1, 2, 3, 9});
  std::printf("pfx %s: offset %zu (reference %zu)\n", PFX_VERSION_STRING, reuse(), expected);

  pfx::engines::HostReferenceEngine engine({.vocab = 16, .width = 4, .hidden = 8, .layers = 2, .chunk = 4});
  pfx::driver::Lane lane(engine, {.capacity = 64, .config = {.enabled = true, .keep_min = 4}});
  std::vector<pfx::token> turn = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const auto first = lane.serve(turn, 3);
  turn.insert(turn.end(), first.generated.begin(), first.generated.end());
  turn.push_back(5);
  const auto second = lane.serve(turn, 3);
  std::printf("lane: second turn reused %zu of %zu tokens\n", second.decision.offset, turn.size());
  return reuse() == expected && second.decision.offset == 8 ? 0 : 1;
}
