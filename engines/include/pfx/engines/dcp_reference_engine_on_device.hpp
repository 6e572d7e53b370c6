#pragma once

/// \file
/// The decode-context-parallel reference engine (pfx/engines/dcp_reference_engine.hpp) as CUDA
/// kernels, on KV states on the device. The header needs no CUDA headers; when pfx was built without
/// a CUDA compiler, the constructor throws CudaError saying so.

#include <pfx/driver/collective.hpp>
#include <pfx/driver/cuda.hpp>
#include <pfx/driver/engine.hpp>
#include <pfx/driver/kv_state.hpp>
#include <pfx/driver/shard_layout.hpp>
#include <pfx/engines/reference_model.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <span>

namespace pfx::engines::cuda {

/// DcpReferenceEngine's computation on one device, with the same weights: per layer each
/// rank reduces each query over its own rows among A(p) before the chunk into a partial (normalised
/// output and log-sum-exp; over no rows 0 ... 0, -inf), the partials are all-gathered, and every
/// rank merges them in rank order, then the chunk's own causal part, in fp32; each rank writes only
/// its own rows of the chunk. Every sum has a fixed order and there are no atomics, so a resume on
/// the chunk grid equals a cold run of the same ranks and interleave bit for bit, in both forms, on
/// one kind of device. Its floats need not equal the host DCP engine's. It keeps scratch buffers
/// between calls, so one caller at a time (one lane).
///
/// Two forms, as DcpReferenceEngine: the single controller (no collective) holds every rank's rows
/// on its one device, a ShardedKvState of KvStateOnDevice shards, and computes each rank's
/// partials in turn; one rank of a group holds its own rows alone, a RankKvState over a
/// KvStateOnDevice, and its partials travel through the Collective by way of the host.
class DcpReferenceEngineOnDevice final : public driver::Engine {
 public:
  /// `ranks` null: the single controller. Otherwise this rank's end of a group of layout.ranks ranks,
  /// which must outlive the engine; every rank makes the same calls in the same order. The engine's
  /// device is the current one (single controller) or rank mod the visible devices (one rank, one
  /// device per process as under mpirun); the constructor and every call make it current. Uploads
  /// the weights there. Throws std::invalid_argument for an unusable shape, ranks or
  /// interleave 0, or a group whose size is not layout.ranks; CudaError on a CUDA failure or when
  /// built without CUDA.
  DcpReferenceEngineOnDevice(const ReferenceModelShape& shape, const driver::ShardLayout& layout,
                             driver::Collective* ranks = nullptr);
  ~DcpReferenceEngineOnDevice() override;

  [[nodiscard]] std::size_t chunk() const noexcept override;
  [[nodiscard]] std::size_t vocab() const noexcept override;
  [[nodiscard]] const ReferenceModelShape& model() const noexcept;
  [[nodiscard]] std::optional<driver::ShardLayout> context_parallel() const noexcept override;
  /// True for one rank of a group of more than one.
  [[nodiscard]] bool exchanges() const noexcept override;

  /// Single controller: a ShardedKvState of layout.ranks KvStateOnDevice shards on the engine's
  /// device. One rank: a RankKvState over a KvStateOnDevice of this rank's rows,
  /// layout.shard_capacity(capacity) of them.
  [[nodiscard]] std::unique_ptr<driver::KvState> make_kv_state(std::size_t capacity) const override;

  /// `kv` must come from make_kv_state, its rows on the engine's device (std::invalid_argument
  /// otherwise); positions past its capacity and tokens outside the vocabulary are std::out_of_range.
  /// The logits are copied to the host, so they are ready when the call returns.
  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override;
  /// A prefill of the one token `next` at `position`.
  void decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pfx::engines::cuda
