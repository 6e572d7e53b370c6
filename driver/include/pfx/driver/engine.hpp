#pragma once

/// \file
/// What a lane needs from an inference engine (docs/driver.md, "Plugging in an engine"). THM-1
/// holds for an engine whose prefill of a chunk is a deterministic function of the chunk's tokens,
/// its start position and the rows before it, and that the lane calls on its chunk grid.

#include <pfx/driver/kv_state.hpp>
#include <pfx/driver/shard_layout.hpp>
#include <pfx/token.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <span>

namespace pfx::driver {

class Engine {
 public:
  virtual ~Engine() = default;
  Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// The canonical prefill chunk C: the lane prefills chunks that start at multiples of C and end at
  /// the next multiple or at the prompt's end. The machine's chunk is set to it (INV-5, THM-1).
  [[nodiscard]] virtual std::size_t chunk() const noexcept = 0;

  /// Token ids are 0 .. vocab() - 1; logits have vocab() entries.
  [[nodiscard]] virtual std::size_t vocab() const noexcept = 0;

  /// A KV state of `capacity` rows that this engine can write, allocated once.
  [[nodiscard]] virtual std::unique_ptr<KvState> make_kv_state(std::size_t capacity) const = 0;

  /// Computes rows [position, position + tokens.size()) of `kv` from `tokens` and rows
  /// [0, position), writes them, and stores the logits of the last of them into `logits`
  /// (vocab() floats). Reads no row at or past position + tokens.size().
  virtual void prefill(KvState& kv, std::span<const token> tokens, std::size_t position,
                       std::span<float> logits) = 0;

  /// The decode path: computes and writes row `position` for `next` from rows [0, position), and
  /// stores its logits. Rows it writes are not canonical and are never reused (INV-2).
  virtual void decode(KvState& kv, token next, std::size_t position, std::span<float> logits) = 0;

  /// Where the engine is decode context parallel: the layout it splits its KV states by, each
  /// rank's attention reading only that rank's rows (docs/driver.md, "The sharded lane"). nullopt,
  /// the default: the engine's attention reads every row of one state.
  [[nodiscard]] virtual std::optional<ShardLayout> context_parallel() const noexcept { return std::nullopt; }

  /// True when each prefill and decode call exchanges partial results with the other ranks of a
  /// group (one rank of a decode-context-parallel engine, one process per rank): every rank must make
  /// every call, so a wrapper may not skip one, and a sharded lane's ranks agree after each call that
  /// it succeeded everywhere (ShardedLane).
  [[nodiscard]] virtual bool exchanges() const noexcept { return false; }
};

}  // namespace pfx::driver
