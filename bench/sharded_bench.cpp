// What one decision on every rank costs (docs/performance.md, "The sharded lane"): the two
// all-gathers a ShardedLane adds to each request (offset + record digest + request digest, then the
// write outcomes), next to one chunk's prefill on the host reference engine, the least engine work a
// request can cause.
//
//   BM_ChunkPrefill/position:N          one 64-token chunk's prefill at position N, on one state
//   BM_ChunkPrefillSharded/ranks:R/position:N   the same chunk on a state sharded over R shards
//   BM_AgreementThreads/ranks:R         the per-request all-gathers, R ranks as threads
//   BM_AgreementMpi                     the same over MPI, rank 0's time: run it under mpirun, e.g.
//                                       mpirun --oversubscribe -n 4 build/default/bench/pfx_sharded_bench
//                                       --benchmark_filter=Mpi (built when MPI is found)

#include <pfx/driver/collective.hpp>
#include <pfx/driver/host_kv_state.hpp>
#include <pfx/driver/sharded_engine.hpp>
#include <pfx/driver/sharded_kv_state.hpp>
#include <pfx/driver/threads_collective.hpp>
#include <pfx/engines/host_reference_engine.hpp>
#ifdef PFX_BENCH_MPI
#include <pfx/driver/mpi_collective.hpp>
#endif

#include <benchmark/benchmark.h>

#include "run_benchmarks.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace {

/// driver_bench's model: an 8K-token cold prefill takes about a second on one host core.
constexpr pfx::engines::ReferenceModelShape model{.vocab = 256, .width = 32, .hidden = 64, .layers = 2, .chunk = 64};

void prefill_chunk(benchmark::State& state, pfx::driver::Engine& engine, std::size_t position) {
  const std::unique_ptr<pfx::driver::KvState> kv = engine.make_kv_state(position + engine.chunk());
  kv->fill(0, position, 0.01f);
  std::vector<pfx::token> chunk(engine.chunk());
  for (std::size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<pfx::token>((7 * i + 2) % model.vocab);
  std::vector<float> logits(engine.vocab());
  for (auto _ : state) {
    engine.prefill(*kv, chunk, position, logits);
    benchmark::DoNotOptimize(logits.data());
    benchmark::ClobberMemory();
  }
}

void BM_ChunkPrefill(benchmark::State& state) {
  pfx::engines::HostReferenceEngine engine(model);
  prefill_chunk(state, engine, static_cast<std::size_t>(state.range(0)));
}
BENCHMARK(BM_ChunkPrefill)->ArgName("position")->Arg(0)->Arg(1024)->Arg(4096)->Unit(benchmark::kMicrosecond);

void BM_ChunkPrefillSharded(benchmark::State& state) {
  pfx::engines::HostReferenceEngine engine(model);
  pfx::driver::ShardedEngine sharded(engine, {static_cast<std::size_t>(state.range(0)), 1});
  prefill_chunk(state, sharded, static_cast<std::size_t>(state.range(1)));
}
BENCHMARK(BM_ChunkPrefillSharded)->ArgNames({"ranks", "position"})->Args({4, 1024})->Args({4, 4096})
    ->Unit(benchmark::kMicrosecond);

/// One request's agreement, as ShardedLane::serve does it: three words, then one. Rank 0's first word
/// tells the other ranks whether to go on, so that they can follow a loop whose length only rank 0
/// knows.
bool agree(pfx::driver::Collective& collective, bool go_on, std::vector<std::uint64_t>& all) {
  const std::array<std::uint64_t, 3> decision{go_on ? 1U : 0U, 0x1234, 0x5678};
  all.resize(3 * collective.size());
  collective.all_gather(decision, all);
  if (all[0] == 0) return false;
  const std::array<std::uint64_t, 1> outcome{1};
  all.resize(collective.size());
  collective.all_gather(outcome, all);
  return true;
}

/// The other ranks: follow rank 0 until it says stop.
void follow(pfx::driver::Collective& collective) {
  std::vector<std::uint64_t> all;
  while (agree(collective, true, all)) {
  }
}

/// Rank 0: one agreement per iteration, then stop the others.
void lead(benchmark::State& state, pfx::driver::Collective& collective) {
  std::vector<std::uint64_t> all;
  for (auto _ : state) {
    agree(collective, true, all);
    benchmark::DoNotOptimize(all.data());
  }
  agree(collective, false, all);
}

void BM_AgreementThreads(benchmark::State& state) {
  const auto ranks = static_cast<std::size_t>(state.range(0));
  pfx::driver::ThreadsCollective group(ranks);
  std::vector<std::thread> others;
  for (std::size_t r = 1; r < ranks; ++r) others.emplace_back([&, r] { follow(group.rank(r)); });
  lead(state, group.rank(0));
  for (std::thread& t : others) t.join();
}
BENCHMARK(BM_AgreementThreads)->ArgName("ranks")->Arg(1)->Arg(2)->Arg(4)->Unit(benchmark::kMicrosecond)->UseRealTime();

#ifdef PFX_BENCH_MPI
pfx::driver::Collective* world = nullptr;

/// Rank 0 tells the other ranks, in one word, whether another run follows (1) or the program ends (0).
bool command(pfx::driver::Collective& collective, bool run) {
  std::vector<std::uint64_t> all(collective.size());
  const std::array<std::uint64_t, 1> mine{run ? 1U : 0U};
  collective.all_gather(mine, all);
  return all[0] == 1;
}

void BM_AgreementMpi(benchmark::State& state) {
  if (world == nullptr) {
    state.SkipWithError("not run under mpirun");
    return;
  }
  command(*world, true);  // google benchmark runs this several times while it sizes the iterations
  lead(state, *world);
}
BENCHMARK(BM_AgreementMpi)->Unit(benchmark::kMicrosecond)->UseRealTime();
#endif

}  // namespace

int main(int argc, char** argv) {
#ifdef PFX_BENCH_MPI
  if (pfx::driver::launched_by_mpi()) {
    const pfx::driver::MpiSession session(argc, argv);
    pfx::driver::MpiCollective collective;
    if (collective.rank() != 0) {  // follow rank 0 through every run of BM_AgreementMpi
      while (command(collective, false)) follow(collective);
      return 0;
    }
    world = &collective;
    const int status = pfx::bench::run_benchmarks(argc, argv, "0.2");
    command(collective, false);
    world = nullptr;
    return status;
  }
#endif
  return pfx::bench::run_benchmarks(argc, argv, "0.2");
}
