#pragma once

// Prefill and decode of one model compute the same function with different reductions: prefilled on
// the grid or decoded token by token, a prompt's rows and last logits agree up to rounding.

#include <pfx/driver/engine.hpp>
#include <pfx/driver/generation.hpp>
#include <pfx/token.hpp>

#include <cmath>
#include <cstddef>
#include <vector>

namespace pfx::test {

/// Every pair within 1e-4 absolute plus 1e-4 relative (NaN never agrees).
inline bool agree_up_to_rounding(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!(std::fabs(a[i] - b[i]) <= 1e-4f + 1e-4f * std::fabs(b[i]))) return false;
  }
  return true;
}

/// `prompt` prefilled from 0 on the engine's grid, and decoded one token per step from 0: the rows
/// and the last logits agree up to rounding.
inline bool prefill_and_decode_agree(driver::Engine& engine, const std::vector<token>& prompt) {
  std::vector<float> prefilled_logits(engine.vocab()), decoded_logits(engine.vocab());
  const auto prefilled = engine.make_kv_state(prompt.size());
  driver::prefill_on_grid(engine, *prefilled, prompt, 0, prefilled_logits);
  const auto decoded = engine.make_kv_state(prompt.size());
  for (std::size_t p = 0; p < prompt.size(); ++p) engine.decode(*decoded, prompt[p], p, decoded_logits);
  return agree_up_to_rounding(prefilled->copy_rows(0, prompt.size()), decoded->copy_rows(0, prompt.size())) &&
         agree_up_to_rounding(prefilled_logits, decoded_logits);
}

}  // namespace pfx::test
