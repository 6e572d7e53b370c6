#pragma once

/// \file
/// A request served cold, by construction: the reference side of every bit-exactness check (THM-1),
/// `pfx replay --verify` included. It goes through no Machine and no Lane, so a bug in the reuse path
/// cannot hide on both sides of a comparison.

#include <pfx/driver/engine.hpp>
#include <pfx/driver/kv_state.hpp>
#include <pfx/token.hpp>

#include <chrono>
#include <cstddef>
#include <span>
#include <vector>

namespace pfx::driver {

/// The rows a request of `prompt` tokens and `max_new_tokens` greedy tokens writes and vouches for:
/// the prompt's, and one per generated token but the last (whose row is never computed).
[[nodiscard]] constexpr std::size_t rows_written(std::size_t prompt, std::size_t max_new_tokens) noexcept {
  return prompt + (max_new_tokens > 0 ? max_new_tokens - 1 : 0);
}

/// What a cold run computed. Rows [0, rows_written(...)) of its KV state hold the rest.
struct ColdRun {
  std::vector<float> logits;      ///< of the prompt's last row
  std::vector<token> generated;   ///< greedy: the largest logit, the lowest id on a tie
  std::chrono::nanoseconds prefill{0};
  std::chrono::nanoseconds first_token{0};  ///< from the call to the first token, poisoning included
};

/// Serves `prompt` cold on `kv`: every row of `kv` is first poisoned with NaN, so that no row an
/// earlier run wrote can be read (a state reused across cold runs is as fresh as a new one); then
/// the prompt is prefilled from position 0 on the engine's chunk grid and `max_new_tokens` tokens
/// are decoded greedily, each step writing the row of the token before it, as a Lane does.
/// Throws RequestError for an empty prompt or one that does not fit `kv` with its new tokens, and
/// StaleRowRead when logits are not finite (the engine read a row this run did not write).
ColdRun run_cold(Engine& engine, KvState& kv, std::span<const token> prompt, std::size_t max_new_tokens);

}  // namespace pfx::driver
