// What `pfx replay` costs at the original lane's scale (docs/performance.md, "A million tokens"): a
// two-turn trace whose first prompt has N tokens and whose second extends it by N / 1000, replayed as
// `pfx replay` does (pfx::replay::run, chunk 64, vocab 262144: the command's defaults).
//
//   BM_TwoTurnReplay/engine:0/tokens:N   --engine none: decisions only, no KV state
//   BM_TwoTurnReplay/engine:1/tokens:N   the host reference engine with --verify: each turn served
//                                        resumed, then cold on a KV state of its own, and compared
//
// Trace reading is not timed (the trace is built in memory); the KV states are allocated inside the
// timing, as the command allocates them.

#include <pfx/replay/replay.hpp>
#include <pfx/engines/decisions_only_engine.hpp>
#include <pfx/engines/host_reference_engine.hpp>

#include <benchmark/benchmark.h>

#include "run_benchmarks.hpp"

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <vector>

namespace {

constexpr pfx::engines::ReferenceModelShape model{.vocab = std::size_t{1} << 18, .chunk = 64};

std::vector<pfx::replay::TraceItem> two_turns(std::size_t tokens) {
  pfx::replay::TraceRequest first;
  for (std::size_t i = 0; i < tokens; ++i) first.prompt.push_back(static_cast<pfx::token>((i * 7919) % model.vocab));
  first.max_new_tokens = 16;
  pfx::replay::TraceRequest second = first;
  for (std::size_t i = 0; i < tokens / 1000; ++i) second.prompt.push_back(static_cast<pfx::token>(i % model.vocab));
  return {first, second};
}

void BM_TwoTurnReplay(benchmark::State& state) {
  const bool with_model = state.range(0) != 0;
  const auto tokens = static_cast<std::size_t>(state.range(1));
  const std::vector<pfx::replay::TraceItem> trace = two_turns(tokens);
  std::unique_ptr<pfx::driver::Engine> engine;
  if (with_model) {
    engine = std::make_unique<pfx::engines::HostReferenceEngine>(model);
  } else {
    engine = std::make_unique<pfx::engines::DecisionsOnlyEngine>(model.chunk, model.vocab);
  }
  pfx::replay::ReplaySettings settings;
  settings.lane.capacity = tokens + tokens / 1000 + 16;
  settings.lane.config.keep_min = 64;
  settings.verify = with_model;
  for (auto _ : state) {
    const pfx::replay::ReplaySummary summary = pfx::replay::run(trace, *engine, settings);
    if (summary.reused_tokens != tokens || !summary.ok()) throw std::logic_error("the second turn did not resume whole");
    benchmark::DoNotOptimize(summary);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * (2 * tokens + tokens / 1000)));
}
BENCHMARK(BM_TwoTurnReplay)
    ->ArgNames({"engine", "tokens"})
    ->Args({0, 1 << 20})
    ->Args({1, 1 << 20})
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

}  // namespace

int main(int argc, char** argv) { return pfx::bench::run_benchmarks(argc, argv, "0.5"); }
