#pragma once

/// \file
/// A sharded KV state on CUDA devices: shard r is a cuda::KvStateOnDevice on device r mod the number
/// of visible devices, so that with several devices each rank's rows live on its own
/// (docs/driver.md, "The sharded lane"). Needs no CUDA header.

#include <pfx/driver/kv_shape.hpp>
#include <pfx/driver/sharded_kv_state.hpp>

#include <cstddef>
#include <memory>

namespace pfx::driver::cuda {

/// The number of visible CUDA devices (0 without CUDA or a device).
[[nodiscard]] std::size_t visible_devices() noexcept;

/// A ShardedKvState of `shape` over layout.ranks KvStateOnDevice shards, shard r made on device
/// r mod visible_devices(). CudaError, saying why, without CUDA or a device; std::invalid_argument
/// as ShardedKvState.
[[nodiscard]] std::unique_ptr<ShardedKvState> make_sharded_state_on_devices(const KvShape& shape,
                                                                            const ShardLayout& layout);

}  // namespace pfx::driver::cuda
