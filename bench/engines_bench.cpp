// What the reference engine costs on the host (docs/performance.md, "The reference engine").
//
//   BM_ColdPrefill/tokens:N   a cold prefill of N tokens on the grid (chunk 64, the default model
//                             shape otherwise) into a fresh KV state: O(N log N), each token reading
//                             O(log position) rows. The state is allocated and poisoned outside the
//                             timing.

#include <pfx/driver/generation.hpp>
#include <pfx/engines/host_reference_engine.hpp>
#include <pfx/engines/reference_model.hpp>

#include <benchmark/benchmark.h>

#include "run_benchmarks.hpp"

#include <cstddef>
#include <limits>
#include <memory>
#include <vector>

namespace {

/// The default model shape with the prefill chunk of the driver's benchmarks.
constexpr pfx::engines::ReferenceModelShape model{.chunk = 64};

void BM_ColdPrefill(benchmark::State& state) {
  const auto tokens = static_cast<std::size_t>(state.range(0));
  pfx::engines::HostReferenceEngine engine(model);
  std::vector<pfx::token> prompt(tokens);
  for (std::size_t i = 0; i < tokens; ++i) prompt[i] = static_cast<pfx::token>((i * 7 + i / 5) % model.vocab);
  std::vector<float> logits(model.vocab);
  for (auto _ : state) {
    state.PauseTiming();
    const auto kv = engine.make_kv_state(tokens);
    kv->fill(0, tokens, std::numeric_limits<float>::quiet_NaN());
    state.ResumeTiming();
    pfx::driver::prefill_on_grid(engine, *kv, prompt, 0, logits);
    benchmark::DoNotOptimize(logits.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * tokens));
}
BENCHMARK(BM_ColdPrefill)
    ->ArgName("tokens")
    ->Arg(1 << 16)
    ->Arg(1 << 18)
    ->Arg(1 << 20)
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

}  // namespace

int main(int argc, char** argv) { return pfx::bench::run_benchmarks(argc, argv, "0.5"); }
