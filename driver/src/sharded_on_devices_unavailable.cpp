// Sharded states on devices when pfx was built without a CUDA compiler: they say so.

#include <pfx/driver/cuda.hpp>
#include <pfx/driver/cuda_shards.hpp>
#include <pfx/driver/errors.hpp>

namespace pfx::driver::cuda {

std::size_t visible_devices() noexcept { return 0; }

std::unique_ptr<ShardedKvState> make_sharded_state_on_devices(const KvShape&, const ShardLayout&) {
  throw CudaError("make_sharded_state_on_devices: " + unavailable_reason());
}

}  // namespace pfx::driver::cuda
