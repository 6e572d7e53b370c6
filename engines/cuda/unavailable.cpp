// The reference engine on the device when pfx was built without a CUDA compiler: every entry point
// that would run CUDA work throws CudaError with the driver's reason (pfx::driver::cuda).

#include <pfx/driver/cuda.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/engines/reference_engine_on_device.hpp>

namespace pfx::engines::cuda {

struct ReferenceEngineOnDevice::Impl {};
ReferenceEngineOnDevice::ReferenceEngineOnDevice(const ReferenceModelShape&) { throw driver::CudaError(driver::cuda::unavailable_reason()); }
ReferenceEngineOnDevice::~ReferenceEngineOnDevice() = default;
std::size_t ReferenceEngineOnDevice::chunk() const noexcept { return 1; }
std::size_t ReferenceEngineOnDevice::vocab() const noexcept { return 0; }
const ReferenceModelShape& ReferenceEngineOnDevice::model() const noexcept {
  static const ReferenceModelShape none{};
  return none;
}
std::unique_ptr<driver::KvState> ReferenceEngineOnDevice::make_kv_state(std::size_t) const {
  throw driver::CudaError(driver::cuda::unavailable_reason());
}
void ReferenceEngineOnDevice::prefill(driver::KvState&, std::span<const token>, std::size_t, std::span<float>) {
  throw driver::CudaError(driver::cuda::unavailable_reason());
}
void ReferenceEngineOnDevice::decode(driver::KvState&, token, std::size_t, std::span<float>) {
  throw driver::CudaError(driver::cuda::unavailable_reason());
}

}  // namespace pfx::engines::cuda
