#include <pfx/driver/mpi_collective.hpp>

#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace pfx::driver {
namespace {

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, message, &length);
  throw std::runtime_error(std::string("MPI: ") + call + " failed: " + std::string(message, static_cast<std::size_t>(length)));
}

}  // namespace

MpiSession::MpiSession(int& argc, char**& argv) {
  int initialized = 0;
  check(MPI_Initialized(&initialized), "MPI_Initialized");
  if (initialized == 0) {
    check(MPI_Init(&argc, &argv), "MPI_Init");
    owns_ = true;
  }
}

MpiSession::~MpiSession() {
  if (owns_) MPI_Finalize();
}

bool launched_by_mpi() noexcept {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

MpiCollective::MpiCollective() {
  int initialized = 0;
  check(MPI_Initialized(&initialized), "MPI_Initialized");
  if (initialized == 0) throw std::runtime_error("MpiCollective: MPI is not initialized (make an MpiSession first)");
  // Errors are returned, not fatal, so that they carry MPI's message.
  check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  int rank = 0;
  int size = 0;
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  rank_ = static_cast<std::size_t>(rank);
  size_ = static_cast<std::size_t>(size);
}

namespace {

/// MPI_Allgather of `mine.size()` values of `type` from every rank into `all`.
template <class Value>
void gather(std::size_t ranks, std::span<const Value> mine, std::span<Value> all, MPI_Datatype type) {
  check_all_gather("MpiCollective", ranks, mine.size(), all.size());
  if (mine.size() > static_cast<std::size_t>(INT_MAX)) {
    throw std::invalid_argument("MpiCollective::all_gather: more values than MPI counts");
  }
  const int count = static_cast<int>(mine.size());
  check(MPI_Allgather(mine.data(), count, type, all.data(), count, type, MPI_COMM_WORLD), "MPI_Allgather");
}

}  // namespace

void MpiCollective::all_gather(std::span<const std::uint64_t> mine, std::span<std::uint64_t> all) {
  gather(size_, mine, all, MPI_UINT64_T);
}

void MpiCollective::all_gather(std::span<const float> mine, std::span<float> all) {
  gather(size_, mine, all, MPI_FLOAT);
}

}  // namespace pfx::driver
