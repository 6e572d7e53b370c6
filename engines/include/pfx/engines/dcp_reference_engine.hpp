#pragma once

/// \file
/// The reference model (pfx/engines/reference_model.hpp) decode context parallel, as a DCP engine
/// computes it (docs/driver.md, "The sharded lane"): the KV rows are split over the ranks of a
/// ShardLayout, and each rank attends only its own rows. For each query of a prefill chunk (or the
/// one query of a decode step) at position p, in each layer:
///  - every rank computes the chunk's non-attention work (embeddings, norms, projections, MLP,
///    logits) as every other rank does, and the chunk's K and V rows, all of them;
///  - each rank reduces the query over its own rows among A(p) before the chunk into a partial
///    result: its normalised output o_r and its log-sum-exp lse_r (a rank with none: o_r = 0,
///    lse_r = -inf);
///  - the ranks all-gather the partials, and every rank merges them in fp32 in a fixed order, rank
///    0's to rank N-1's, then the chunk's own causal part (A(p) within the chunk): m = the largest
///    lse, w = exp(lse - m) (exactly 0 for a part over no rows), output = sum(w o) / sum(w), each
///    sum in that order. No collective reduces anything, so the sums' order is this engine's and
///    the same on every rank;
///  - each rank writes only its own rows of the chunk.
/// Decode is a chunk of one query. The result is a deterministic function of the tokens, the
/// chunk's start and the rows before it, for a given layout: a resume on the chunk grid equals a
/// cold run of the same ranks and interleave bit for bit (THM-1 under sharding, docs/spec.md). It
/// is not the unsharded engine's result: the merge adds in another order.
///
/// Two forms compute the same floats:
///  - single controller (no group): one process holds every rank's rows, a ShardedKvState of
///    HostKvStates, and computes each rank's partials in turn;
///  - one rank of a group (a Collective of layout.ranks ranks, one process or thread per rank): its
///    KV state is a RankKvState, its own rows alone, and the partials travel through all_gather.
///
/// The same computation on a CUDA device is cuda::DcpReferenceEngineOnDevice
/// (dcp_reference_engine_on_device.hpp).

#include <pfx/driver/collective.hpp>
#include <pfx/driver/engine.hpp>
#include <pfx/driver/shard_layout.hpp>
#include <pfx/engines/reference_model.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <span>

namespace pfx::engines {

class DcpReferenceEngine final : public driver::Engine {
 public:
  /// `group` null: the single controller. Otherwise this rank's end of a group of layout.ranks ranks,
  /// which must outlive the engine; every rank makes the same calls in the same order.
  /// Throws std::invalid_argument for an unusable shape, ranks or interleave 0, or a group whose size
  /// is not layout.ranks.
  DcpReferenceEngine(const ReferenceModelShape& shape, const driver::ShardLayout& layout,
                     driver::Collective* group = nullptr);

  [[nodiscard]] std::size_t chunk() const noexcept override { return shape_.chunk; }
  [[nodiscard]] std::size_t vocab() const noexcept override { return shape_.vocab; }
  [[nodiscard]] const ReferenceModelShape& model() const noexcept { return shape_; }
  [[nodiscard]] std::optional<driver::ShardLayout> context_parallel() const noexcept override { return layout_; }
  /// True for one rank of a group of more than one.
  [[nodiscard]] bool exchanges() const noexcept override { return group_ != nullptr && group_->size() > 1; }

  /// Single controller: a ShardedKvState of layout.ranks HostKvStates. One rank: a RankKvState of
  /// this rank's rows, layout.shard_capacity(capacity) of them.
  [[nodiscard]] std::unique_ptr<driver::KvState> make_kv_state(std::size_t capacity) const override;

  /// `kv` must come from make_kv_state (std::invalid_argument otherwise); positions past its capacity
  /// and tokens outside the vocabulary are std::out_of_range.
  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override;
  /// A prefill of the one token `next` at `position`.
  void decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override;

 private:
  ReferenceModelShape shape_;
  ReferenceWeights weights_;
  driver::ShardLayout layout_;
  driver::Collective* group_;  ///< null: the single controller
};

}  // namespace pfx::engines
