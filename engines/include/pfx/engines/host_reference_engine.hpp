#pragma once

/// \file
/// The reference engine on the host (pfx/engines/reference_model.hpp): fp32, with a fixed order for
/// every sum (a large vocabulary's logits are split over two threads by row, each row summed alone),
/// so a run is a deterministic function of its inputs, unless its attention reduction draws the order
/// (Reduction::drawn).

#include <pfx/driver/engine.hpp>
#include <pfx/driver/host_kv_state.hpp>
#include <pfx/engines/reference_model.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace pfx::engines {

class HostReferenceEngine : public driver::Engine {
 public:
  /// How a query reduces its attention over the rows it reads. Decode always makes one
  /// online-softmax pass over them, as a decode kernel does; prefill differs.
  enum class Reduction {
    /// The reference model's own (reference_model.hpp): prefill of rows [s, s + n) reduces the
    /// attended rows before the call (A(p) within 0..s-1) and the call's own (A(p) within s..p) as
    /// two partial softmax results merged by log-sum-exp, every sum in ascending position order.
    plain,
    /// Full causal attention (every row 0..p, not A(p)), prefill in tiles of n rows anchored at the
    /// call's start, as a kernel that tiles the KV cache by its query block does: the tiles
    /// [s - (m + 1) n, s - m n) for m = 0, 1, ... (the first one cut at 0), then the call's own rows
    /// [s, p], each tile a partial softmax result, merged in ascending order by log-sum-exp. Its
    /// floats follow the calls' starts and lengths (BlockedAttentionEngine).
    tiles,
    /// As plain, except that each partial softmax result (and decode's online pass) sums its rows
    /// in an order drawn afresh for every call, as kernels that split a reduction across threads
    /// and add the parts as they finish (atomics, split-K) do. The orders come from a splitmix64
    /// stream of the engine's seed advanced by every call, so one engine object repeats no order,
    /// and two objects of the same seed make the same calls give the same floats
    /// (NondeterministicEngine).
    drawn,
  };

  /// `seed` starts the order stream of Reduction::drawn; the other reductions draw nothing.
  /// Throws std::invalid_argument when the shape is unusable.
  explicit HostReferenceEngine(const ReferenceModelShape& shape = {}, Reduction reduction = Reduction::plain,
                               std::uint64_t seed = 1);

  [[nodiscard]] std::size_t chunk() const noexcept override { return shape_.chunk; }
  [[nodiscard]] std::size_t vocab() const noexcept override { return shape_.vocab; }
  [[nodiscard]] const ReferenceModelShape& model() const noexcept { return shape_; }
  [[nodiscard]] Reduction reduction() const noexcept { return reduction_; }

  /// A HostKvState with this model's layers and width.
  [[nodiscard]] std::unique_ptr<driver::KvState> make_kv_state(std::size_t capacity) const override;

  /// `kv` must come from make_kv_state, or be a ShardedKvState whose shards do (its rows are read
  /// from their owners in position order, so the results do not depend on the layout);
  /// std::invalid_argument otherwise. Positions past its
  /// capacity and tokens outside the vocabulary are std::out_of_range.
  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override;
  void decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override;

 private:
  /// The name the errors of a call start with: that of the engine the reduction makes.
  [[nodiscard]] const char* name() const noexcept;
  /// Appends to `out` the rows that the row of position p reads within [from, to), in the order
  /// the reduction sums them.
  void read_within(std::size_t p, std::size_t from, std::size_t to, std::vector<std::size_t>& out);
  /// The next value of the order stream.
  std::uint64_t draw() noexcept;

  ReferenceModelShape shape_;
  ReferenceWeights weights_;
  Reduction reduction_;
  std::uint64_t state_;
};

}  // namespace pfx::engines
