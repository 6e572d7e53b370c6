// The reference engines on the device (the whole state's and the DCP one) when pfx was built without
// a CUDA compiler: every entry point that would run CUDA work throws CudaError with the driver's
// reason (pfx::driver::cuda).

#include <pfx/driver/cuda.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/engines/dcp_reference_engine_on_device.hpp>
#include <pfx/engines/reference_engine_on_device.hpp>

namespace pfx::engines::cuda {
namespace {

/// The shape an engine that cannot be constructed never has, for model()'s reference.
const ReferenceModelShape& no_model() {
  static const ReferenceModelShape none{};
  return none;
}

}  // namespace

struct ReferenceEngineOnDevice::Impl {};
ReferenceEngineOnDevice::ReferenceEngineOnDevice(const ReferenceModelShape&) { throw driver::CudaError(driver::cuda::unavailable_reason()); }
ReferenceEngineOnDevice::~ReferenceEngineOnDevice() = default;
std::size_t ReferenceEngineOnDevice::chunk() const noexcept { return 1; }
std::size_t ReferenceEngineOnDevice::vocab() const noexcept { return 0; }
const ReferenceModelShape& ReferenceEngineOnDevice::model() const noexcept { return no_model(); }
std::unique_ptr<driver::KvState> ReferenceEngineOnDevice::make_kv_state(std::size_t) const {
  throw driver::CudaError(driver::cuda::unavailable_reason());
}
void ReferenceEngineOnDevice::prefill(driver::KvState&, std::span<const token>, std::size_t, std::span<float>) {
  throw driver::CudaError(driver::cuda::unavailable_reason());
}
void ReferenceEngineOnDevice::decode(driver::KvState&, token, std::size_t, std::span<float>) {
  throw driver::CudaError(driver::cuda::unavailable_reason());
}


struct DcpReferenceEngineOnDevice::Impl {};
DcpReferenceEngineOnDevice::DcpReferenceEngineOnDevice(const ReferenceModelShape&, const driver::ShardLayout&,
                                                       driver::Collective*) {
  throw driver::CudaError(driver::cuda::unavailable_reason());
}
DcpReferenceEngineOnDevice::~DcpReferenceEngineOnDevice() = default;
std::size_t DcpReferenceEngineOnDevice::chunk() const noexcept { return 1; }
std::size_t DcpReferenceEngineOnDevice::vocab() const noexcept { return 0; }
const ReferenceModelShape& DcpReferenceEngineOnDevice::model() const noexcept { return no_model(); }
std::optional<driver::ShardLayout> DcpReferenceEngineOnDevice::context_parallel() const noexcept { return std::nullopt; }
bool DcpReferenceEngineOnDevice::exchanges() const noexcept { return false; }
std::unique_ptr<driver::KvState> DcpReferenceEngineOnDevice::make_kv_state(std::size_t) const {
  throw driver::CudaError(driver::cuda::unavailable_reason());
}
void DcpReferenceEngineOnDevice::prefill(driver::KvState&, std::span<const token>, std::size_t, std::span<float>) {
  throw driver::CudaError(driver::cuda::unavailable_reason());
}
void DcpReferenceEngineOnDevice::decode(driver::KvState&, token, std::size_t, std::span<float>) {
  throw driver::CudaError(driver::cuda::unavailable_reason());
}

}  // namespace pfx::engines::cuda
