#pragma once

/// \file
/// An engine over a sharded KV state: its make_kv_state splits the state over N shards, each made by
/// the inner engine, and prefill and decode hand the whole sharded state to the inner engine, which
/// reads each row from its owner (docs/driver.md, "The sharded lane"). A Lane over it is a lane whose
/// rows live on N shards; nothing else changes.

#include <pfx/driver/engine.hpp>
#include <pfx/driver/sharded_kv_state.hpp>

#include <cstddef>
#include <memory>
#include <span>

namespace pfx::driver {

class ShardedEngine final : public Engine {
 public:
  /// std::invalid_argument when layout.ranks or layout.interleave is 0.
  ShardedEngine(Engine& inner, const ShardLayout& layout);

  [[nodiscard]] std::size_t chunk() const noexcept override { return inner_.chunk(); }
  [[nodiscard]] std::size_t vocab() const noexcept override { return inner_.vocab(); }
  [[nodiscard]] const ShardLayout& layout() const noexcept { return layout_; }
  [[nodiscard]] Engine& inner() noexcept { return inner_; }

  /// A ShardedKvState of `capacity` rows over layout.ranks shards of the inner engine's kind.
  [[nodiscard]] std::unique_ptr<KvState> make_kv_state(std::size_t capacity) const override;

  void prefill(KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override {
    inner_.prefill(kv, tokens, position, logits);
  }
  void decode(KvState& kv, token next, std::size_t position, std::span<float> logits) override {
    inner_.decode(kv, next, position, logits);
  }

 private:
  Engine& inner_;
  ShardLayout layout_;
};

}  // namespace pfx::driver
