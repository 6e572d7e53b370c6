#pragma once

/// \file
/// The two loops a lane runs on an engine: prefill on the engine's chunk grid, and greedy decoding.
/// Free functions, so that tests can also run them outside the protocol (for example to show what
/// reuse the rule forbids would do).

#include <pfx/driver/engine.hpp>
#include <pfx/driver/kv_state.hpp>
#include <pfx/token.hpp>

#include <cstddef>
#include <span>
#include <vector>

namespace pfx::driver {

/// Prefills prompt[from:] into `kv` in chunks whose boundaries are multiples of engine.chunk()
/// (anchored at position 0) or the prompt's end, and leaves the last row's logits in `logits`.
/// When `from` is a multiple of the chunk, every chunk is one a cold prefill also computes (THM-1).
/// `before_chunk(begin, end)` runs before each chunk is handed to the engine.
template <class BeforeChunk>
void prefill_on_grid(Engine& engine, KvState& kv, std::span<const token> prompt, std::size_t from,
                     std::span<float> logits, BeforeChunk&& before_chunk) {
  const std::size_t chunk = engine.chunk();
  for (std::size_t begin = from; begin < prompt.size();) {
    const std::size_t grid_end = (begin / chunk + 1) * chunk;
    const std::size_t end = grid_end < prompt.size() ? grid_end : prompt.size();
    before_chunk(begin, end);
    engine.prefill(kv, prompt.subspan(begin, end - begin), begin, logits);
    begin = end;
  }
}

inline void prefill_on_grid(Engine& engine, KvState& kv, std::span<const token> prompt,
                            std::size_t from, std::span<float> logits) {
  prefill_on_grid(engine, kv, prompt, from, logits, [](std::size_t, std::size_t) {});
}

/// The greedy choice: the index of the largest logit, the lowest index on a tie.
[[nodiscard]] token argmax(std::span<const float> logits) noexcept;

/// True when every logit is finite (a NaN means a poisoned row was read).
[[nodiscard]] bool all_finite(std::span<const float> logits) noexcept;

}  // namespace pfx::driver
