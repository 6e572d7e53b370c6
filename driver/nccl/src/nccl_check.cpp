// pfx_nccl_check: the NCCL collective across every visible device, one thread per rank: each rank's
// words must come back, in rank order, on every rank. Exit 0 when they do, 1 when not, 2 when it
// cannot run (no device), saying why. scripts/cuda-check.sh runs it on a machine with GPUs.
#include <pfx/driver/nccl_collective.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("pfx_nccl_check: no CUDA device, nothing checked");
    return 2;
  }
  const auto ranks = static_cast<std::size_t>(devices);
  const pfx::driver::NcclCollective::Id id = pfx::driver::NcclCollective::make_id();
  std::vector<int> ok(ranks, 0);
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        pfx::driver::NcclCollective collective(id, r, ranks, static_cast<int>(r));
        for (std::uint64_t round = 0; round < 3; ++round) {
          const std::vector<std::uint64_t> mine{r * 1000 + round, ~round};
          std::vector<std::uint64_t> all(ranks * mine.size());
          collective.all_gather(mine, all);
          for (std::size_t s = 0; s < ranks; ++s) {
            if (all[s * 2] != s * 1000 + round || all[s * 2 + 1] != ~round) return;
          }
        }
        ok[r] = 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "pfx_nccl_check: rank %zu: %s\n", r, e.what());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (std::size_t r = 0; r < ranks; ++r) {
    if (ok[r] == 0) {
      std::printf("pfx_nccl_check: rank %zu did not gather every rank's words\n", r);
      return 1;
    }
  }
  std::printf("pfx_nccl_check: %zu ranks gathered every rank's words\n", ranks);
  return 0;
}
