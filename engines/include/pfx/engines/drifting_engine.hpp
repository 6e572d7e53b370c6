#pragma once

/// \file
/// An engine that breaks THM-1's hypothesis (docs/spec.md): its prefill logits depend on how many
/// prefill calls it has served, so a resumed response differs from a cold run of the same prompt.
/// `pfx replay --verify` and `pfx soak` must report it as a mismatch; the tests use it to show that.

#include <pfx/driver/kv_state.hpp>
#include <pfx/engines/wrapped_engine.hpp>
#include <pfx/token.hpp>

#include <cstddef>
#include <span>

namespace pfx::engines {

class DriftingEngine final : public WrappedEngine {
 public:
  using WrappedEngine::WrappedEngine;

  /// The inner engine's prefill, then logits[0] += 1e-3 x (prefill calls served so far, this one
  /// included).
  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override;
  /// The inner engine's decode, unchanged.
  void decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override;

  /// Prefill calls served so far.
  [[nodiscard]] std::size_t calls() const noexcept { return calls_; }

 private:
  std::size_t calls_ = 0;
};

}  // namespace pfx::engines
