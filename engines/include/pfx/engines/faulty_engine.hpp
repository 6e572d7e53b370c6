#pragma once

/// \file
/// An engine wrapper that fails like a real one can: at a random prefill chunk or decode step,
/// before writing, after writing the step's rows, or after writing garbage into them (on an engine
/// that exchanges with other ranks, Engine::exchanges(), only the last two: a rank that skipped a call
/// would leave the others waiting). Used by the fault tests (and by anyone who wants to check their
/// own lane's recovery).

#include <pfx/driver/kv_state.hpp>
#include <pfx/engines/wrapped_engine.hpp>
#include <pfx/token.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <stdexcept>

namespace pfx::engines {

/// What FaultyEngine throws.
class InjectedFault : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class FaultyEngine final : public WrappedEngine {
 public:
  /// Each prefill or decode call fails with probability `rate` (0 <= rate <= 1, else
  /// std::invalid_argument); `seed` makes the failures reproducible.
  FaultyEngine(driver::Engine& inner, double rate, std::uint64_t seed);

  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override;
  void decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override;

  /// Failures injected so far.
  [[nodiscard]] std::size_t failures() const noexcept { return failures_; }
  /// Set the failure probability from now on.
  void set_rate(double rate);

 private:
  enum class Mode { before_writing, after_writing, after_garbage };
  /// Runs `step`, or fails around it in one of the modes.
  template <class Step>
  void maybe_fail(driver::KvState& kv, std::size_t begin, std::size_t end, const char* what, Step&& step);

  std::bernoulli_distribution fails_;
  std::mt19937_64 random_;
  std::size_t failures_ = 0;
};

}  // namespace pfx::engines
