#pragma once

/// \file
/// The reference engine behind a cache it owns, as llama.cpp and transformers keep theirs
/// (docs/driver.md, "Engines that own their cache"): the KV states it hands out are views of its one
/// cache, pfx never sees its memory (owns_rows() is false), rows are read back row by row in the
/// engine's own layout, and, like llama.cpp's memory, the cache refuses a write that does not
/// continue the rows it holds, so that a lane or a check that gives rows up without forget fails.

#include <pfx/driver/engine.hpp>
#include <pfx/driver/host_kv_state.hpp>
#include <pfx/engines/host_reference_engine.hpp>

#include <cstddef>
#include <memory>
#include <span>

namespace pfx::engines {

class CacheOwningEngine final : public driver::Engine {
 public:
  /// A cache of `capacity` rows for the reference model of `shape`. Throws std::invalid_argument on an
  /// unusable shape or a capacity of 0.
  CacheOwningEngine(const ReferenceModelShape& shape, std::size_t capacity);

  [[nodiscard]] std::size_t chunk() const noexcept override { return inner_.chunk(); }
  [[nodiscard]] std::size_t vocab() const noexcept override { return inner_.vocab(); }

  /// A view of the engine's cache, `capacity` rows of it (std::length_error past the cache's). Every
  /// view shares the one cache: a view's forget(from) drops rows from `from` on, whoever wrote them.
  [[nodiscard]] std::unique_ptr<driver::KvState> make_kv_state(std::size_t capacity) const override;

  /// Writes rows [position, position + tokens.size()) of the cache. Throws std::logic_error unless the
  /// cache holds exactly rows [0, position) (a write that does not continue them, as llama.cpp refuses
  /// one), and std::invalid_argument for a KV state that is not a view of this engine's cache.
  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position, std::span<float> logits) override;
  void decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override;

  /// Rows the cache holds: [0, held()).
  [[nodiscard]] std::size_t held() const noexcept { return held_; }

 private:
  class View;
  void check_view(const driver::KvState& kv, std::size_t position, const char* what) const;

  HostReferenceEngine inner_;
  mutable driver::HostKvState cache_;  ///< the engine's own memory; views write it through the engine
  mutable std::size_t held_ = 0;
};

}  // namespace pfx::engines
