#pragma once

/// \file
/// The MPI collective: one rank per process, the ranks of MPI_COMM_WORLD. Needs no MPI header, so
/// a program can include it without MPI's flags; it links pfx::driver_mpi.

#include <pfx/driver/collective.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace pfx::driver {

/// Initializes MPI for the life of the object (MPI_Init, then MPI_Finalize), unless it already was.
class MpiSession {
 public:
  MpiSession(int& argc, char**& argv);
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  ~MpiSession();

 private:
  bool owns_ = false;
};

/// True when this process was started by an MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE, PMI_SIZE
/// or PMIX_RANK), so that a program can decide whether to initialize MPI at all.
[[nodiscard]] bool launched_by_mpi() noexcept;

/// The ranks of MPI_COMM_WORLD; MPI must be initialized (an MpiSession) for its life.
class MpiCollective final : public Collective {
 public:
  /// std::runtime_error when MPI is not initialized.
  MpiCollective();
  [[nodiscard]] std::size_t rank() const noexcept override { return rank_; }
  [[nodiscard]] std::size_t size() const noexcept override { return size_; }
  /// MPI_Allgather of 64-bit words; an MPI error is std::runtime_error with MPI's message.
  void all_gather(std::span<const std::uint64_t> mine, std::span<std::uint64_t> all) override;
  /// MPI_Allgather of floats (MPI_FLOAT: copied, never reduced).
  void all_gather(std::span<const float> mine, std::span<float> all) override;

 private:
  std::size_t rank_ = 0;
  std::size_t size_ = 1;
};

}  // namespace pfx::driver
