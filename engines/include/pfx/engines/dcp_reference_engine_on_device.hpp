#pragma once

/// \file
/// The decode-context-parallel reference engine on a CUDA device (the computation is
/// DcpReferenceEngine's, dcp_reference_engine.hpp), on KV states on the device. Needs no CUDA
/// headers, as ReferenceEngineOnDevice (reference_engine_on_device.hpp).

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

/// DcpReferenceEngine's computation, in its two forms and with the same weights, as CUDA kernels on
/// one device: a resume on the chunk grid equals a cold run of the same ranks and interleave bit for
/// bit, on one kind of device. Its floats need not equal the host DCP engine's. What it shares with
/// ReferenceEngineOnDevice holds here too: sums in a fixed order without atomics, CudaError from the
/// constructor when pfx was built without CUDA, and scratch buffers kept between calls, so one caller
/// at a time (one lane). The single controller's shards are KvStateOnDevice on its one device; one
/// rank of a group holds a RankKvState over a KvStateOnDevice, and its partials travel through the
/// Collective by way of the host.
class DcpReferenceEngineOnDevice final : public driver::Engine {
 public:
  /// `group` null: the single controller. Otherwise this rank's end of a group of layout.ranks ranks,
  /// which must outlive the engine; every rank makes the same calls in the same order. The engine's
  /// device is the current one (single controller) or rank mod the visible devices (one rank, one
  /// device per process as under mpirun); the constructor and every call make it current. Uploads
  /// the weights there. Throws std::invalid_argument for an unusable shape, ranks or
  /// interleave 0, or a group whose size is not layout.ranks; CudaError on a CUDA failure or when
  /// built without CUDA.
  DcpReferenceEngineOnDevice(const ReferenceModelShape& shape, const driver::ShardLayout& layout,
                             driver::Collective* group = nullptr);
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
