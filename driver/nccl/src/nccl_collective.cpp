#include <pfx/driver/errors.hpp>
#include <pfx/driver/nccl_collective.hpp>

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace pfx::driver {
namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(NcclCollective::Id), "an NCCL id is 128 bytes");

void check(cudaError_t code, const char* call) {
  if (code != cudaSuccess) throw CudaError(std::string("NcclCollective: ") + call + ": " + cudaGetErrorString(code));
}

void check(ncclResult_t code, const char* call) {
  if (code != ncclSuccess) throw CudaError(std::string("NcclCollective: ") + call + ": " + ncclGetErrorString(code));
}

/// A device buffer for one all-gather, freed whatever happens.
struct DeviceBytes {
  void* data = nullptr;
  explicit DeviceBytes(std::size_t bytes) { check(cudaMalloc(&data, bytes), "cudaMalloc"); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  ~DeviceBytes() { cudaFree(data); }
};

}  // namespace

NcclCollective::Id NcclCollective::make_id() {
  ncclUniqueId id;
  check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  Id bytes{};
  std::memcpy(bytes.data(), &id, sizeof id);
  return bytes;
}

NcclCollective::NcclCollective(const Id& id, std::size_t rank, std::size_t ranks, int device)
    : rank_(rank), size_(ranks), device_(device) {
  if (ranks == 0 || rank >= ranks) {
    throw std::invalid_argument("NcclCollective: rank " + std::to_string(rank) + " is not in a group of " +
                                std::to_string(ranks));
  }
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  stream_ = stream;
  ncclUniqueId nccl_id;
  std::memcpy(&nccl_id, id.data(), sizeof nccl_id);
  ncclComm_t comm = nullptr;
  const ncclResult_t joined = ncclCommInitRank(&comm, static_cast<int>(ranks), nccl_id, static_cast<int>(rank));
  if (joined != ncclSuccess) {
    cudaStreamDestroy(stream);
    check(joined, "ncclCommInitRank");
  }
  comm_ = comm;
}

NcclCollective::~NcclCollective() {
  cudaSetDevice(device_);
  ncclCommDestroy(static_cast<ncclComm_t>(comm_));
  cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

void NcclCollective::gather_bytes(const void* mine, void* all, std::size_t count, int type, std::size_t size) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  auto* stream = static_cast<cudaStream_t>(stream_);
  DeviceBytes send(count * size);
  DeviceBytes receive(size_ * count * size);
  check(cudaMemcpyAsync(send.data, mine, count * size, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
  check(ncclAllGather(send.data, receive.data, count, static_cast<ncclDataType_t>(type), static_cast<ncclComm_t>(comm_),
                      stream),
        "ncclAllGather");
  check(cudaMemcpyAsync(all, receive.data, size_ * count * size, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

void NcclCollective::all_gather(std::span<const std::uint64_t> mine, std::span<std::uint64_t> all) {
  check_all_gather("NcclCollective", size_, mine.size(), all.size());
  gather_bytes(mine.data(), all.data(), mine.size(), ncclUint64, sizeof(std::uint64_t));
}

void NcclCollective::all_gather(std::span<const float> mine, std::span<float> all) {
  check_all_gather("NcclCollective", size_, mine.size(), all.size());
  gather_bytes(mine.data(), all.data(), mine.size(), ncclFloat, sizeof(float));
}

}  // namespace pfx::driver
