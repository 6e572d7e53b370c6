// How long `pfx conform` takes: one conformance check (docs/conform.md) per iteration, on the host
// reference engine (chunk 8) and the blocked-attention engine, for each named budget. The default
// budget's check on the host reference engine should take well under a minute (docs/performance.md).

#include "run_benchmarks.hpp"

#include <pfx/conform/check.hpp>
#include <pfx/engines/blocked_attention_engine.hpp>
#include <pfx/engines/host_reference_engine.hpp>

#include <benchmark/benchmark.h>

#include <string>

namespace {

const char* const budgets[] = {"quick", "default", "thorough"};

template <class EngineType>
void BM_Conform(benchmark::State& state) {
  const std::string budget = budgets[state.range(0)];
  EngineType engine(pfx::engines::ReferenceModelShape{});
  const pfx::conform::CheckOptions options{.budget = pfx::conform::Budget::named(budget), .rule_chunk = {},
                                           .engine_name = "bench", .progress = {}};
  std::size_t tokens = 0;
  for (auto _ : state) {
    const pfx::conform::Report report = pfx::conform::check(engine, options);
    tokens = report.prefilled_tokens;
    if (report.recommended != engine.chunk()) state.SkipWithError("the check did not find the engine's chunk");
    benchmark::DoNotOptimize(report.verdict);
  }
  state.SetLabel(budget);
  state.counters["prefilled_tokens"] = static_cast<double>(tokens);
}

BENCHMARK(BM_Conform<pfx::engines::HostReferenceEngine>)
    ->Name("BM_Conform/reference")->ArgName("budget")->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Conform<pfx::engines::BlockedAttentionEngine>)
    ->Name("BM_Conform/blocked_attention")->ArgName("budget")->DenseRange(0, 1)->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace

int main(int argc, char** argv) { return pfx::bench::run_benchmarks(argc, argv, "0.1"); }
