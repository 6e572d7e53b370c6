// The CUDA backend when pfx was built without a CUDA compiler: it says so, at every entry point.

#include <pfx/driver/cuda.hpp>
#include <pfx/driver/errors.hpp>

namespace pfx::driver::cuda {
namespace {

constexpr const char* reason = "pfx was built without a CUDA compiler (configure with nvcc available, PFX_CUDA=ON)";

}  // namespace

bool built_with_cuda() noexcept { return false; }
std::string unavailable_reason() { return reason; }

struct KvStateOnDevice::Impl {};
KvStateOnDevice::KvStateOnDevice(const KvShape&) { throw CudaError(reason); }
KvStateOnDevice::~KvStateOnDevice() = default;
const KvShape& KvStateOnDevice::shape() const noexcept { static const KvShape none{}; return none; }
void KvStateOnDevice::forget(std::size_t) { throw CudaError(reason); }
void KvStateOnDevice::fill(std::size_t, std::size_t, float) { throw CudaError(reason); }
std::vector<float> KvStateOnDevice::copy_rows(std::size_t, std::size_t) const { throw CudaError(reason); }
void KvStateOnDevice::synchronize() { throw CudaError(reason); }
std::size_t KvStateOnDevice::memory_bytes() const noexcept { return 0; }
float* KvStateOnDevice::device_data() const noexcept { return nullptr; }
void* KvStateOnDevice::stream() const noexcept { return nullptr; }

}  // namespace pfx::driver::cuda
