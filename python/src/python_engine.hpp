#pragma once

/// \file
/// An engine written in Python as a pfx::driver::Engine (docs/python.md, "Engines"), the one wrapper
/// that pfx.Lane, pfx.conform and pfx.verify share. Two forms, told apart by `forget`:
///  - an engine that owns its cache: chunk, vocab, prefill(tokens, start) -> logits,
///    decode(token, position) -> logits (optional: a one-token prefill otherwise),
///    forget(position), and optionally read_rows(start, end) -> bytes, read_each_row(start, end) ->
///    a sequence of bytes (one read, split into rows), capacity, synchronize();
///  - an engine that writes pfx's KV state: chunk, vocab, layers, width,
///    prefill(tokens, start, kv) -> logits, where kv is a writable float32 memoryview of shape
///    (layers, 2, capacity, width), and optionally decode(token, position, kv) -> logits.

#include <pfx/driver/engine.hpp>
#include <pfx/driver/kv_state.hpp>

#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace pfx::python {

class CacheView;

class PythonEngine final : public driver::Engine {
 public:
  /// Reads the engine's attributes; TypeError or ValueError naming `caller` and the attribute when
  /// one is missing or wrong. `chunk`, when given, replaces the engine's own.
  PythonEngine(pybind11::object engine, std::optional<std::size_t> chunk, std::string caller);
  ~PythonEngine() override;

  [[nodiscard]] std::size_t chunk() const noexcept override { return chunk_; }
  [[nodiscard]] std::size_t vocab() const noexcept override { return vocab_; }
  /// Whether the engine owns its cache (it has forget).
  [[nodiscard]] bool owns_cache() const noexcept { return owns_cache_; }
  /// The rows the engine's own cache holds (engine.capacity), when it owns its cache and says so:
  /// what a lane or check on it takes when it is given no capacity.
  [[nodiscard]] std::optional<std::size_t> capacity() const;
  /// pfx's host KV state; or, for an engine that owns its cache, a view of that one cache (every
  /// view of the same Python object shares it, whichever wrapper made it: a view takes the cache over
  /// by forgetting it from 0, and a view whose cache was taken over refuses to be used,
  /// std::logic_error, instead of reading another view's rows).
  [[nodiscard]] std::unique_ptr<driver::KvState> make_kv_state(std::size_t capacity) const override;
  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override;
  void decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override;

 private:
  friend class CacheView;
  void host_call(driver::KvState& kv, const pybind11::object& method, const pybind11::object& first,
                 std::size_t position, std::span<float> logits, const char* name);
  void store_logits(const pybind11::object& result, std::span<float> logits, const char* name) const;

  pybind11::object engine_;
  std::string caller_;
  std::size_t chunk_;
  std::size_t vocab_;
  bool owns_cache_;
  std::size_t layers_ = 0, width_ = 0;  ///< the host form's
  pybind11::object prefill_, decode_;
};

}  // namespace pfx::python
