// A sharded KV state with one shard per visible device (pfx/driver/cuda_shards.hpp).

#include <pfx/driver/cuda.hpp>
#include <pfx/driver/cuda_shards.hpp>
#include <pfx/driver/errors.hpp>

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace pfx::driver::cuda {

std::size_t visible_devices() noexcept {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 0) {
    (void)cudaGetLastError();  // clear it
    return 0;
  }
  return static_cast<std::size_t>(devices);
}

std::unique_ptr<ShardedKvState> make_sharded_state_on_devices(const KvShape& shape, const ShardLayout& layout) {
  const std::string reason = unavailable_reason();
  if (!reason.empty()) throw CudaError("make_sharded_state_on_devices: " + reason);
  if (layout.ranks == 0 || layout.interleave == 0) {
    throw std::invalid_argument("make_sharded_state_on_devices: ranks and interleave must both be at least 1");
  }
  const std::size_t devices = visible_devices();
  int current = 0;
  if (const cudaError_t status = cudaGetDevice(&current); status != cudaSuccess) {
    throw CudaError(std::string("cudaGetDevice: ") + cudaGetErrorString(status));
  }
  std::vector<std::unique_ptr<KvState>> shards;
  try {
    for (std::size_t r = 0; r < layout.ranks; ++r) {
      if (const cudaError_t status = cudaSetDevice(static_cast<int>(r % devices)); status != cudaSuccess) {
        throw CudaError(std::string("cudaSetDevice: ") + cudaGetErrorString(status));
      }
      shards.push_back(std::make_unique<KvStateOnDevice>(
          KvShape{layout.shard_capacity(shape.capacity), shape.layers, shape.width}));
    }
  } catch (...) {
    (void)cudaSetDevice(current);
    throw;
  }
  (void)cudaSetDevice(current);
  return std::make_unique<ShardedKvState>(shape, layout, std::move(shards));
}

}  // namespace pfx::driver::cuda
