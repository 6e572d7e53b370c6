#pragma once

/// \file
/// The KV state a lane serves from (docs/driver.md, "The KV state"). What the protocol needs of it is
/// small: forget rows from a position on, wait for pending work, and, where the engine can, read rows
/// back for verification, as bytes in the engine's own format. Two kinds implement it:
///  - states in pfx's memory (HostKvState, the CUDA one behind pfx/driver/cuda.hpp, ShardedKvState):
///    rows of fp32 that pfx allocates once at full capacity and can poison with NaN (owns_rows());
///  - views of a cache an engine owns (a llama_context's memory for one sequence, a transformers
///    DynamicCache): the engine keeps the rows, in its own format; forget drops them there.

#include <pfx/driver/kv_shape.hpp>

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

namespace pfx::driver {

class KvState {
 public:
  virtual ~KvState() = default;
  KvState() = default;
  KvState(const KvState&) = delete;
  KvState& operator=(const KvState&) = delete;

  /// capacity is the rows the state can hold. layers and width describe pfx's fp32 layout where the
  /// state owns its rows; a state an engine owns may report 0 for both.
  [[nodiscard]] virtual const KvShape& shape() const noexcept = 0;

  /// Rows at or past `from` no longer hold anything (the protocol's one way of giving rows up: a
  /// resume at `from`, a cold run from 0). An engine's own cache drops them
  /// (llama_memory_seq_rm(mem, seq, from, -1), DynamicCache.crop(from)), so that its next write at
  /// `from` continues rows [0, from). A state in pfx's memory has nothing to drop (the lane poisons
  /// those rows with fill where poisoning is on, see forget_rows). Throws std::out_of_range unless
  /// from <= capacity.
  virtual void forget(std::size_t from) = 0;

  /// Returns once every write queued on this state has finished; reports a device error if one
  /// happened.
  virtual void synchronize() = 0;

  /// True when the rows live in pfx's memory as fp32 in KvShape's layout: fill and copy_rows work,
  /// and the lane can poison rows it gives up. False for a cache an engine owns.
  [[nodiscard]] virtual bool owns_rows() const noexcept { return false; }

  /// Sets every float of rows [from, to), in every layer, keys and values, to `value`. The lane
  /// poisons rows with NaN this way. Throws std::out_of_range unless from <= to <= capacity, and
  /// std::logic_error where the state does not own its rows.
  virtual void fill(std::size_t from, std::size_t to, float value);

  /// A host copy of rows [from, to) as fp32: for each layer, its key rows then its value rows, each
  /// row `width` floats. Waits for pending writes. Throws std::out_of_range unless
  /// from <= to <= capacity, and std::logic_error where the state does not own its rows.
  [[nodiscard]] virtual std::vector<float> copy_rows(std::size_t from, std::size_t to) const;

  /// True when read_rows works. Reading rows is optional: where it is not, a resume is still
  /// verified through its logits and generated tokens. Default: owns_rows().
  [[nodiscard]] virtual bool readable() const noexcept { return owns_rows(); }

  /// The bytes of rows [from, to) in the state's own format (f16, bf16, f32, ...; copy_rows's bytes
  /// for a state that owns its rows), for comparison as bytes, never converted. Two reads of the
  /// same rows written the same way are equal; a row's bytes depend only on what was written to it.
  /// Waits for pending writes. Throws std::out_of_range unless from <= to <= capacity, and
  /// std::logic_error unless readable().
  [[nodiscard]] virtual std::vector<std::byte> read_rows(std::size_t from, std::size_t to) const;

  /// Whether the state holds the row of `position`. Every state holds every position below its
  /// capacity but one rank's rows of a sharded layout (RankKvState), which holds its own: its
  /// fill, copy_rows, read_rows and for_each_row over [from, to) touch only the positions it holds.
  [[nodiscard]] virtual bool holds(std::size_t position) const noexcept { return position < shape().capacity; }

  /// Told of each row of a read: its position and its bytes, as read_rows(row, row + 1) gives them,
  /// valid during the call only.
  using RowVisitor = std::function<void(std::size_t row, std::span<const std::byte> bytes)>;

  /// Calls visit for each row of [from, to) that the state holds (holds()), in order, so that a
  /// difference can name its row whatever the state's layout, holding one row at a time beside the
  /// read (visit_rows reads). Throws as read_rows does, and std::logic_error naming the row where the
  /// read yields a row of no bytes, a row out of order or it does not hold, or fewer rows than it
  /// holds: a comparison of nothing would pass.
  void for_each_row(std::size_t from, std::size_t to, const RowVisitor& visit) const;

  /// Bytes pfx allocated for the rows: shape().bytes() for a state that owns its rows, allocated
  /// once at construction; 0 for a cache an engine owns.
  [[nodiscard]] virtual std::size_t memory_bytes() const noexcept { return 0; }

 protected:
  /// for_each_row's read of [from, to), already checked against the capacity. Reads once where the
  /// state can: a state that owns its rows makes one copy_rows and gathers each row from its layers;
  /// a view of an engine's cache overrides this where one read of its format can be split
  /// (llama.cpp's), else it is read a row at a time (read_rows).
  virtual void visit_rows(std::size_t from, std::size_t to, const RowVisitor& visit) const;
};

/// Gives up rows [from, end) of `kv` as the protocol does (docs/driver.md, "The protocol"):
/// kv.forget(from), then, where `poison` is set and the state owns its rows, fills [from, end) with
/// NaN so that an engine that reads one is caught. `end` bounds what may have been written: no row
/// at or past it was written since it was last given up (capacity when unknown).
void forget_rows(KvState& kv, std::size_t from, std::size_t end, bool poison);

/// Throws, naming `what`, unless a KV state of `shape` can be allocated at all: std::invalid_argument
/// when capacity, layers or width is 0, std::length_error when its bytes do not fit 64 bits (a
/// product that wrapped would allocate a small state and write past it).
void check_shape(const KvShape& shape, const char* what);

/// Throws std::out_of_range naming `what` unless from <= to <= capacity.
void check_rows(const KvShape& shape, std::size_t from, std::size_t to, const char* what);

}  // namespace pfx::driver
