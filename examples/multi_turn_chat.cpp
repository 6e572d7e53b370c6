// A multi-turn chat walked through the machine: each request is queried, begun at the granted offset,
// "generated" and committed, and the decision is printed with its reason, so that the rule can be
// watched at work. No engine is involved; the generated tokens are made up.

#include <pfx/core.hpp>

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using Tokens = std::vector<pfx::token>;

Tokens tokens(std::size_t n, pfx::token from) {
  Tokens t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = from + static_cast<pfx::token>(i);
  return t;
}

Tokens operator+(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// One request of the chat: what the user did, the prompt it produced, how many tokens the engine
/// generates for it.
struct Request {
  const char* what;
  Tokens prompt;
  std::size_t generated;
};

}  // namespace

int main() {
  pfx::Machine lane;
  // The engine prefills on a 16-token grid; reuse below 64 tokens is not worth it (the seed's default).
  const pfx::Config config{.enabled = true, .keep_min = 64, .chunk = 16};
  if (!lane.configure(config).accepted()) return 1;
  lane.reserve(4096);  // once, as the KV state is allocated once at full capacity

  const Tokens system = tokens(200, 1000);
  const Tokens question1 = tokens(37, 5000);
  Tokens history;  // what the lane holds after each turn: prompt + generated

  std::printf("config: enabled=%d keep_min=%zu chunk=%zu\n\n", config.enabled, config.keep_min,
              config.chunk);
  std::printf("%-4s %-44s %6s %6s %6s  %-16s %s\n", "turn", "request", "prompt", "lcp", "offset",
              "reason", "bound");

  // Each request is built from what the lane served before, as a chat front end builds it.
  const auto next_request = [&](int turn) -> Request {
    switch (turn) {
      case 1: return {"first question", system + question1, 25};
      case 2: return {"follow-up: history + new message", history + tokens(30, 6000), 40};
      case 3: return {"follow-up again", history + tokens(12, 7000), 20};
      case 4: return {"edit an early message (diverges at 210)",
                      system + tokens(10, 5000) + tokens(50, 8000), 30};
      case 5: return {"regenerate the same prompt", system + tokens(10, 5000) + tokens(50, 8000), 30};
      case 6: return {"shares only 40 tokens of the system prompt", tokens(40, 1000) + tokens(90, 9500), 10};
      default: return {"new session, another system prompt", tokens(150, 9000), 10};
    }
  };

  for (int turn = 1; turn <= 7; ++turn) {
    const Request request = next_request(turn);
    const pfx::Decision d = lane.query(request.prompt).decision;
    std::printf("%-4d %-44s %6zu %6zu %6zu  %-16s %s\n", turn, request.what, request.prompt.size(),
                d.common_prefix, d.offset, std::string(pfx::name(d.reason)).c_str(),
                std::string(pfx::name(d.bound)).c_str());

    const pfx::Outcome began = lane.begin(request.prompt, d.offset);
    // A lane would prefill prompt[offset:] here, then decode `generated` tokens.
    history = request.prompt + tokens(request.generated, 20000 + 100 * turn);
    const pfx::Outcome committed =
        began.accepted() ? lane.commit(history, request.prompt.size()) : began;
    if (!committed.accepted()) {
      std::printf("refused: %s\n", std::string(pfx::describe(committed.refusal)).c_str());
      return 1;
    }
  }
  std::printf("\nheld: %zu tokens, canonical_end %zu, %zu bytes\n", lane.held().ids.size(),
              lane.held().canonical_end, lane.memory_bytes());
  return 0;
}
