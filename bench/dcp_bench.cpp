// Decode context parallelism (docs/performance.md, "Decode context parallelism: what each rank
// holds"): the KV bytes each rank of the DCP reference engine holds, and the time one request takes,
// for 1, 2 and 4 ranks (threads of this process, each holding only its own rows and exchanging
// partial attention through a ThreadsCollective).
//
//   BM_DcpKvBytes/ranks:R/context:N      each rank's KV state for a lane of N + 64 rows, allocated
//                                        once: counters kv_bytes_per_rank, kv_bytes_total and
//                                        per_rank_fraction (of the unsharded state's bytes)
//   BM_DcpRequest/ranks:R/context:N      one request resumed after a context of N tokens: 64 new
//                                        prompt tokens (one chunk) and 4 generated, every rank at once
//   BM_DecisionsRequest/context:N        the same request decided only (no rows: a context of 2^20
//                                        tokens does not fit the reference engine's time), one lane

#include <pfx/driver/lane.hpp>
#include <pfx/driver/sharded_lane.hpp>
#include <pfx/driver/threads_collective.hpp>
#include <pfx/engines/dcp_reference_engine.hpp>
#include <pfx/engines/decisions_only_engine.hpp>

#include <benchmark/benchmark.h>

#include "run_benchmarks.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace {

/// The reference engine's model (docs/cli.md): rows of 2 layers x K, V x 16 floats, 256 bytes.
constexpr pfx::engines::ReferenceModelShape model{.vocab = 4096, .width = 16, .hidden = 32, .layers = 2, .chunk = 64};
constexpr std::size_t row_bytes = model.layers * 2 * model.width * sizeof(float);
constexpr std::size_t new_tokens = 64;
constexpr std::size_t generated = 4;

std::vector<pfx::token> tokens(std::size_t n) {
  std::vector<pfx::token> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<pfx::token>((7 * i * i + 3 * i + 1) % model.vocab);
  return out;
}

void BM_DcpKvBytes(benchmark::State& state) {
  const auto ranks = static_cast<std::size_t>(state.range(0));
  const auto capacity = static_cast<std::size_t>(state.range(1)) + new_tokens + generated;
  pfx::driver::ThreadsCollective group(ranks);
  std::size_t per_rank = 0;
  std::size_t total = 0;
  for (auto _ : state) {
    per_rank = 0;
    total = 0;
    for (std::size_t r = 0; r < ranks; ++r) {  // each rank's own state, as its process allocates it
      const pfx::engines::DcpReferenceEngine engine(model, {ranks, 1}, &group.rank(r));
      const std::unique_ptr<pfx::driver::KvState> kv = engine.make_kv_state(capacity);
      per_rank = std::max(per_rank, kv->memory_bytes());
      total += kv->memory_bytes();
    }
  }
  state.counters["kv_bytes_per_rank"] = static_cast<double>(per_rank);
  state.counters["kv_bytes_total"] = static_cast<double>(total);
  state.counters["per_rank_fraction"] = static_cast<double>(per_rank) / static_cast<double>(capacity * row_bytes);
}
BENCHMARK(BM_DcpKvBytes)
    ->ArgNames({"ranks", "context"})
    ->ArgsProduct({{1, 2, 4}, {4096, 65536, 1 << 20}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

/// Rank 0 tells the others, in one word, whether another request follows.
bool another(pfx::driver::Collective& collective, bool go_on) {
  const std::array<std::uint64_t, 1> mine{go_on ? 1U : 0U};
  std::vector<std::uint64_t> all(collective.size());
  collective.all_gather(mine, all);
  return all[0] == 1;
}

void BM_DcpRequest(benchmark::State& state) {
  const auto ranks = static_cast<std::size_t>(state.range(0));
  const auto context = static_cast<std::size_t>(state.range(1));
  const std::vector<pfx::token> first = tokens(context);
  std::vector<pfx::token> prompt = tokens(context + new_tokens);
  const pfx::driver::LaneOptions options{.capacity = context + new_tokens + generated,
                                         .config = {.enabled = true, .keep_min = 1}, .poison = false};
  pfx::driver::ThreadsCollective group(ranks);
  std::size_t per_rank = 0;
  const auto rank_main = [&](std::size_t r, benchmark::State* timed) {
    pfx::engines::DcpReferenceEngine engine(model, {ranks, 1}, &group.rank(r));
    pfx::driver::ShardedLane lane(engine, options, {ranks, 1}, group.rank(r));
    (void)lane.serve(first, 0);  // the context, cold, outside the timing
    if (timed == nullptr) {
      while (another(group.rank(r), false)) (void)lane.serve(prompt, generated);
      return;
    }
    per_rank = lane.kv_bytes_per_rank();
    for (auto _ : *timed) {
      another(group.rank(r), true);
      benchmark::DoNotOptimize(lane.serve(prompt, generated));  // resumed at `context`
    }
    another(group.rank(r), false);
  };
  std::vector<std::thread> others;
  for (std::size_t r = 1; r < ranks; ++r) others.emplace_back(rank_main, r, nullptr);
  rank_main(0, &state);
  for (std::thread& t : others) t.join();
  state.counters["kv_bytes_per_rank"] = static_cast<double>(per_rank);
}
BENCHMARK(BM_DcpRequest)
    ->ArgNames({"ranks", "context"})
    ->ArgsProduct({{1, 2, 4}, {1024, 8192}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_DecisionsRequest(benchmark::State& state) {
  const auto context = static_cast<std::size_t>(state.range(0));
  pfx::engines::DecisionsOnlyEngine engine(model.chunk, model.vocab);
  pfx::driver::Lane lane(engine, {.capacity = context + new_tokens + generated,
                                  .config = {.enabled = true, .keep_min = 1}, .poison = false});
  (void)lane.serve(tokens(context), 0);
  const std::vector<pfx::token> prompt = tokens(context + new_tokens);
  for (auto _ : state) benchmark::DoNotOptimize(lane.serve(prompt, generated));
}
BENCHMARK(BM_DecisionsRequest)->ArgName("context")->Arg(8192)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) { return pfx::bench::run_benchmarks(argc, argv, "0.2"); }
