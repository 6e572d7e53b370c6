// A lane serving a multi-turn conversation on the host reference engine: each turn reuses the rows
// the last one left, and is checked bit for bit against a cold run of the same prompt (THM-1).
//
//   pfx_serve_example [turns]

#include <pfx/driver/environment.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/engines/host_reference_engine.hpp>
#include <pfx/driver/lane.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace {

double milliseconds(std::chrono::nanoseconds t) { return std::chrono::duration<double, std::milli>(t).count(); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

int serve(int turns) {
  using pfx::token;
  const pfx::engines::ReferenceModelShape model{.vocab = 256, .width = 32, .hidden = 64, .layers = 2, .chunk = 64};
  pfx::engines::HostReferenceEngine engine(model);
  pfx::driver::LaneOptions options{.capacity = 8192, .config = pfx::driver::config_from_environment()};
  options.poison = true;
  pfx::driver::Lane lane(engine, options);
  pfx::driver::Lane cold(engine, {.capacity = options.capacity, .config = {.enabled = false}, .poison = true});

  std::printf("pfx lane: reference engine (vocab %zu, width %zu, %zu layers, chunk %zu), capacity %zu, "
              "reuse %s, keep_min %zu\n",
              model.vocab, model.width, model.layers, model.chunk, options.capacity, options.config.enabled ? "on" : "off",
              options.config.keep_min);
  std::printf("%-5s %7s %7s %-16s %9s %12s %12s %s\n", "turn", "prompt", "offset", "reason", "prefill",
              "ttft ms", "cold ms", "bit-exact");

  std::vector<token> prompt(600);  // a long system prompt, then the user's first message
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<token>((i * 37 + 11) % model.vocab);
  int mismatches = 0;
  for (int turn = 1; turn <= turns; ++turn) {
    const pfx::driver::Response resumed = lane.serve(prompt, 16);
    const pfx::driver::Response reference = cold.serve(prompt, 16);
    const bool exact = same_bits(resumed.logits, reference.logits) && resumed.generated == reference.generated &&
                       same_bits(lane.kv().copy_rows(0, prompt.size()), cold.kv().copy_rows(0, prompt.size()));
    mismatches += exact ? 0 : 1;
    std::printf("%-5d %7zu %7zu %-16s %9zu %12.2f %12.2f %s\n", turn, prompt.size(), resumed.decision.offset,
                std::string(pfx::name(resumed.decision.reason)).c_str(), resumed.prefilled,
                milliseconds(resumed.timings.first_token), milliseconds(reference.timings.first_token),
                exact ? "yes" : "NO");
    // The next turn: this prompt, the answer, and the user's next message.
    prompt.insert(prompt.end(), resumed.generated.begin(), resumed.generated.end());
    for (int i = 0; i < 40 + 13 * turn; ++i) prompt.push_back(static_cast<token>((turn * 101 + i * 7) % 256));
    if (prompt.size() + 16 > options.capacity) break;
  }
  std::printf("%s\n", mismatches == 0 ? "every turn equals its cold run bit for bit"
                                       : "MISMATCH: some turn differs from its cold run");
  return mismatches == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int turns = argc > 1 ? std::atoi(argv[1]) : 8;
    if (turns < 1) {
      std::fprintf(stderr, "usage: pfx_serve_example [turns >= 1]\n");
      return 2;
    }
    return serve(turns);
  } catch (const pfx::driver::ConfigError& e) {
    std::fprintf(stderr, "pfx_serve_example: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pfx_serve_example: %s\n", e.what());
    return 1;
  }
}
