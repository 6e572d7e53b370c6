#pragma once

/// \file
/// What the machine answers to every event.

#include <pfx/decision.hpp>
#include <pfx/refusal.hpp>

namespace pfx {

/// The output of one transition: whether the event was accepted and, for query and begin, the
/// decision of the offset rule (default-constructed for the other events).
struct Outcome {
  Refusal refusal = Refusal::none;
  Decision decision{};

  [[nodiscard]] constexpr bool accepted() const noexcept { return refusal == Refusal::none; }
  friend constexpr bool operator==(const Outcome&, const Outcome&) = default;
};

}  // namespace pfx
