#include <pfx/engines/drifting_engine.hpp>

namespace pfx::engines {

void DriftingEngine::prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
                             std::span<float> logits) {
  inner_.prefill(kv, tokens, position, logits);
  logits[0] += 1e-3f * static_cast<float>(++calls_);
}

void DriftingEngine::decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) {
  inner_.decode(kv, next, position, logits);
}

}  // namespace pfx::engines
