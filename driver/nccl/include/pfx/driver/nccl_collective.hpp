#pragma once

/// \file
/// The NCCL collective: one rank per GPU. Needs no NCCL or CUDA header; it links pfx::driver_nccl,
/// built when CUDA and NCCL are found.

#include <pfx/driver/collective.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace pfx::driver {

class NcclCollective final : public Collective {
 public:
  /// The bytes of an ncclUniqueId: rank 0 makes one (make_id) and hands it to every rank (over MPI,
  /// a file, or memory when the ranks are threads).
  using Id = std::array<std::byte, 128>;
  [[nodiscard]] static Id make_id();

  /// Joins the group of `ranks` ranks named by `id` as `rank`, on CUDA device `device`.
  /// std::invalid_argument for rank >= ranks; CudaError naming the call for a CUDA or NCCL failure.
  NcclCollective(const Id& id, std::size_t rank, std::size_t ranks, int device);
  NcclCollective(const NcclCollective&) = delete;
  NcclCollective& operator=(const NcclCollective&) = delete;
  ~NcclCollective() override;

  [[nodiscard]] std::size_t rank() const noexcept override { return rank_; }
  [[nodiscard]] std::size_t size() const noexcept override { return size_; }
  /// ncclAllGather of 64-bit words through device buffers, then back to the host.
  void all_gather(std::span<const std::uint64_t> mine, std::span<std::uint64_t> all) override;
  /// ncclAllGather of floats (ncclFloat: copied, never reduced), the same way.
  void all_gather(std::span<const float> mine, std::span<float> all) override;

 private:
  std::size_t rank_;
  std::size_t size_;
  /// One ncclAllGather of `count` values per rank of `type` (an ncclDataType_t), `size` bytes each.
  void gather_bytes(const void* mine, void* all, std::size_t count, int type, std::size_t size);

  int device_;
  void* comm_ = nullptr;    ///< ncclComm_t
  void* stream_ = nullptr;  ///< cudaStream_t
};

}  // namespace pfx::driver
