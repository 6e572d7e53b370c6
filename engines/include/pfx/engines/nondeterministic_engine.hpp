#pragma once

/// \file
/// An engine that is not a function of its inputs: the host reference engine (the same weights, the
/// same rows attended) whose attention sums its rows in an order drawn afresh for every call
/// (HostReferenceEngine::Reduction::drawn). Floating-point addition is not associative, so two cold
/// runs of the same prompt differ in some bits; no offset rule can make a resume equal a cold run of
/// such an engine, and a check of determinism must say so.

#include <pfx/engines/host_reference_engine.hpp>

#include <cstdint>

namespace pfx::engines {

class NondeterministicEngine final : public HostReferenceEngine {
 public:
  /// `seed` starts the order stream: two objects of the same seed make the same calls give the same
  /// floats. Throws std::invalid_argument when the shape is unusable.
  explicit NondeterministicEngine(const ReferenceModelShape& shape, std::uint64_t seed = 1)
      : HostReferenceEngine(shape, Reduction::drawn, seed) {}
};

}  // namespace pfx::engines
