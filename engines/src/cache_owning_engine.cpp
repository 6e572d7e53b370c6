#include <pfx/engines/cache_owning_engine.hpp>

#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace pfx::engines {

/// A view of the engine's cache: forget drops rows there; read_rows reads them row by row, each row
/// every layer's key then value (the engine's layout, not pfx's [layer][plane][position]).
class CacheOwningEngine::View final : public driver::KvState {
 public:
  View(const CacheOwningEngine& engine, std::size_t capacity)
      : engine_(engine), shape_{.capacity = capacity, .layers = 0, .width = 0} {}

  [[nodiscard]] const driver::KvShape& shape() const noexcept override { return shape_; }
  [[nodiscard]] const CacheOwningEngine& engine() const noexcept { return engine_; }

  void forget(std::size_t from) override {
    driver::check_rows(shape_, from, shape_.capacity, "CacheOwningEngine: forget");
    if (from < engine_.held_) {
      // Dropped rows read as NaN, so that an engine bug reading one would show in its logits.
      engine_.cache_.fill(from, engine_.held_, std::numeric_limits<float>::quiet_NaN());
      engine_.held_ = from;
    }
  }

  void synchronize() override {}
  [[nodiscard]] bool readable() const noexcept override { return true; }

  [[nodiscard]] std::vector<std::byte> read_rows(std::size_t from, std::size_t to) const override {
    driver::check_rows(shape_, from, to, "CacheOwningEngine: read_rows");
    if (to > engine_.held_) {
      throw std::out_of_range("CacheOwningEngine: read_rows [" + std::to_string(from) + ", " + std::to_string(to) +
                              ") past the " + std::to_string(engine_.held_) + " rows the cache holds");
    }
    const driver::KvShape& inner = engine_.cache_.shape();
    const std::size_t row_bytes = inner.width * sizeof(float);
    std::vector<std::byte> out((to - from) * inner.layers * 2 * row_bytes);
    std::byte* next = out.data();
    for (std::size_t row = from; row < to; ++row) {
      for (std::size_t layer = 0; layer < inner.layers; ++layer) {
        for (const driver::Plane plane : {driver::Plane::key, driver::Plane::value}) {
          std::memcpy(next, engine_.cache_.row(layer, plane, row), row_bytes);
          next += row_bytes;
        }
      }
    }
    return out;
  }

 private:
  const CacheOwningEngine& engine_;
  driver::KvShape shape_;
};

CacheOwningEngine::CacheOwningEngine(const ReferenceModelShape& shape, std::size_t capacity)
    : inner_(shape), cache_(driver::KvShape{.capacity = capacity, .layers = shape.layers, .width = shape.width}) {}

std::unique_ptr<driver::KvState> CacheOwningEngine::make_kv_state(std::size_t capacity) const {
  if (capacity > cache_.shape().capacity) {
    throw std::length_error("CacheOwningEngine: a view of " + std::to_string(capacity) + " rows of a cache of " +
                            std::to_string(cache_.shape().capacity));
  }
  return std::make_unique<View>(*this, capacity);
}

void CacheOwningEngine::check_view(const driver::KvState& kv, std::size_t position, const char* what) const {
  const auto* view = dynamic_cast<const View*>(&kv);
  if (view == nullptr || &view->engine() != this) {
    throw std::invalid_argument(std::string("CacheOwningEngine::") + what + ": the KV state is not a view of this engine's cache");
  }
  if (position != held_) {
    throw std::logic_error(std::string("CacheOwningEngine::") + what + ": the cache holds " + std::to_string(held_) +
                           " rows, a write from row " + std::to_string(position) +
                           " does not continue them (rows past a resume must be forgotten first)");
  }
}

void CacheOwningEngine::prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
                                std::span<float> logits) {
  check_view(kv, position, "prefill");
  if (position + tokens.size() > kv.shape().capacity) {
    throw std::out_of_range("CacheOwningEngine::prefill: rows past the view's capacity");
  }
  held_ = position + tokens.size();  // before the call: a failing call may have written some of them
  inner_.prefill(cache_, tokens, position, logits);
}

void CacheOwningEngine::decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) {
  check_view(kv, position, "decode");
  if (position + 1 > kv.shape().capacity) throw std::out_of_range("CacheOwningEngine::decode: row past the view's capacity");
  held_ = position + 1;
  inner_.decode(cache_, next, position, logits);
}

}  // namespace pfx::engines
