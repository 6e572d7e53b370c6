// pfx::core copied alone: this program is compiled with nothing but a copy of core/include on the
// include path (check_core_alone.cmake), so it fails to build if core needs a generated header, a
// file elsewhere in the tree, or a third-party library. It decides one offset at compile time and at
// run time and prints the version core carries.

#include <pfx/core.hpp>

#include <cstddef>
#include <cstdio>
#include <vector>

namespace {

constexpr std::size_t granted() {
  pfx::Config config;
  config.keep_min = 2;
  config.chunk = 4;
  const std::vector<pfx::token> held = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<pfx::token> prompt = {1, 2, 3, 4, 5, 6, 9};
  return pfx::decide(config, held, held.size(), prompt).offset;  // lcp 6, aligned down to 4
}
static_assert(granted() == 4);

}  // namespace

int main() {
  std::printf("pfx %s from core/include alone: offset %zu\n", PFX_VERSION_STRING, granted());
  return granted() == 4 ? 0 : 1;
}
