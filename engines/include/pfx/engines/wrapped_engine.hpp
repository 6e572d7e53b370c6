#pragma once

/// \file
/// The base of the engines that wrap another to change what it does (FaultyEngine, DriftingEngine,
/// the tests' auditing engines): chunk, vocabulary and KV states are the inner engine's.

#include <pfx/driver/engine.hpp>
#include <pfx/driver/kv_state.hpp>

#include <cstddef>
#include <memory>
#include <optional>

namespace pfx::engines {

class WrappedEngine : public driver::Engine {
 public:
  /// `inner` must outlive the wrapper.
  explicit WrappedEngine(driver::Engine& inner) noexcept : inner_(inner) {}

  [[nodiscard]] std::size_t chunk() const noexcept override { return inner_.chunk(); }
  [[nodiscard]] std::size_t vocab() const noexcept override { return inner_.vocab(); }
  [[nodiscard]] std::unique_ptr<driver::KvState> make_kv_state(std::size_t capacity) const override {
    return inner_.make_kv_state(capacity);
  }
  [[nodiscard]] std::optional<driver::ShardLayout> context_parallel() const noexcept override {
    return inner_.context_parallel();
  }
  [[nodiscard]] bool exchanges() const noexcept override { return inner_.exchanges(); }

 protected:
  driver::Engine& inner_;
};

}  // namespace pfx::engines
