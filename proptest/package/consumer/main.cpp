// A user of pfx: the machine decides an offset, at compile time and at run time, and the reference
// model agrees.

#include <pfx/core.hpp>
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
  return reuse() == expected ? 0 : 1;
}
