#pragma once

/// \file
/// The KV state a lane owns: one buffer at full capacity, written by the engine, read back only by
/// checks. Implementations: HostKvState (host memory), and the CUDA one behind pfx/driver/cuda.hpp.

#include <pfx/driver/kv_shape.hpp>

#include <cstddef>
#include <vector>

namespace pfx::driver {

class KvState {
 public:
  virtual ~KvState() = default;
  KvState() = default;
  KvState(const KvState&) = delete;
  KvState& operator=(const KvState&) = delete;

  [[nodiscard]] virtual const KvShape& shape() const noexcept = 0;

  /// Sets every float of rows [from, to), in every layer, keys and values, to `value`. The lane
  /// poisons rows with NaN this way. Throws std::out_of_range unless from <= to <= capacity.
  virtual void fill(std::size_t from, std::size_t to, float value) = 0;

  /// A host copy of rows [from, to): for each layer, its key rows then its value rows, each row
  /// `width` floats. Waits for pending writes. Throws std::out_of_range unless from <= to <= capacity.
  [[nodiscard]] virtual std::vector<float> copy_rows(std::size_t from, std::size_t to) const = 0;

  /// Returns once every write queued on this state has finished; reports a device error if one
  /// happened.
  virtual void synchronize() = 0;

  /// Bytes allocated for the rows: shape().bytes(), allocated once at construction.
  [[nodiscard]] virtual std::size_t memory_bytes() const noexcept = 0;
};

/// Throws, naming `what`, unless a KV state of `shape` can be allocated at all: std::invalid_argument
/// when capacity, layers or width is 0, std::length_error when its bytes do not fit 64 bits (a
/// product that wrapped would allocate a small state and write past it).
void check_shape(const KvShape& shape, const char* what);

/// Throws std::out_of_range naming `what` unless from <= to <= capacity.
void check_rows(const KvShape& shape, std::size_t from, std::size_t to, const char* what);

}  // namespace pfx::driver
