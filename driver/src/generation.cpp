#include <pfx/driver/generation.hpp>

#include <cmath>

namespace pfx::driver {

token argmax(std::span<const float> logits) noexcept {
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = i;  // strict: a tie keeps the lower id
  }
  return static_cast<token>(best);
}

bool all_finite(std::span<const float> logits) noexcept {
  for (const float x : logits) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

}  // namespace pfx::driver
