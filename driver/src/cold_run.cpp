#include <pfx/driver/cold_run.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/driver/generation.hpp>

#include <string>

namespace pfx::driver {

ColdRun run_cold(Engine& engine, KvState& kv, std::span<const token> prompt, std::size_t max_new_tokens) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const std::size_t capacity = kv.shape().capacity;
  if (prompt.empty()) throw RequestError("run_cold: the prompt is empty (at least one token is needed)");
  if (prompt.size() > capacity || max_new_tokens > capacity - prompt.size()) {
    throw RequestError("run_cold: " + std::to_string(prompt.size()) + " prompt tokens and " +
                       std::to_string(max_new_tokens) + " new tokens do not fit the KV state's " +
                       std::to_string(capacity) + " rows");
  }
  forget_rows(kv, 0, capacity, true);  // fresh: nothing earlier is readable

  ColdRun cold;
  cold.logits.resize(engine.vocab());
  const auto check = [&](const char* what, std::size_t position) {
    if (!all_finite(cold.logits)) {
      throw StaleRowRead(std::string("run_cold: the logits of ") + what + " ending at position " +
                         std::to_string(position) + " are not finite: the engine read a row this cold run did not write");
    }
  };
  const Clock::time_point prefill_start = Clock::now();
  prefill_on_grid(engine, kv, prompt, 0, cold.logits, [&](std::size_t begin, std::size_t) {
    if (begin > 0) check("the prefill chunk", begin);  // every chunk's logits, not only the last
  });
  check("the prefill", prompt.size());
  cold.prefill = Clock::now() - prefill_start;

  cold.generated.reserve(max_new_tokens);
  if (max_new_tokens > 0) cold.generated.push_back(argmax(cold.logits));
  cold.first_token = Clock::now() - start;
  std::vector<float> step(engine.vocab());
  for (std::size_t position = prompt.size(); cold.generated.size() < max_new_tokens; ++position) {
    engine.decode(kv, cold.generated.back(), position, step);
    if (!all_finite(step)) {
      throw StaleRowRead("run_cold: the logits of the decode step at position " + std::to_string(position) +
                         " are not finite: the engine read a row this cold run did not write");
    }
    cold.generated.push_back(argmax(step));
  }
  kv.synchronize();
  return cold;
}

}  // namespace pfx::driver
