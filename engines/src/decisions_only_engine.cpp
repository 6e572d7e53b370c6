#include <pfx/engines/decisions_only_engine.hpp>

#include <algorithm>
#include <stdexcept>

namespace pfx::engines {

void RowlessKvState::fill(std::size_t from, std::size_t to, float /*value*/) {
  driver::check_rows(shape_, from, to, "RowlessKvState::fill");
}

std::vector<float> RowlessKvState::copy_rows(std::size_t from, std::size_t to) const {
  driver::check_rows(shape_, from, to, "RowlessKvState::copy_rows");
  return {};
}

DecisionsOnlyEngine::DecisionsOnlyEngine(std::size_t chunk, std::size_t vocab) : chunk_(chunk), vocab_(vocab) {
  if (chunk == 0 || vocab == 0) throw std::invalid_argument("DecisionsOnlyEngine: chunk and vocab must be at least 1");
}

std::unique_ptr<driver::KvState> DecisionsOnlyEngine::make_kv_state(std::size_t capacity) const {
  return std::make_unique<RowlessKvState>(capacity);
}

void DecisionsOnlyEngine::prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
                                  std::span<float> logits) {
  driver::check_rows(kv.shape(), position, position + tokens.size(), "DecisionsOnlyEngine::prefill");
  std::fill(logits.begin(), logits.end(), 0.0F);
}

void DecisionsOnlyEngine::decode(driver::KvState& kv, token /*next*/, std::size_t position, std::span<float> logits) {
  driver::check_rows(kv.shape(), position, position + 1, "DecisionsOnlyEngine::decode");
  std::fill(logits.begin(), logits.end(), 0.0F);
}

}  // namespace pfx::engines
