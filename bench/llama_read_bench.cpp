// What reading llama.cpp's KV cache back costs a bit-exactness check (docs/performance.md, "A real
// engine"): each row of a sequence apart, as the check digests them, from one read
// (KvState::for_each_row: one llama_state_seq_get_data, parsed once) next to a read per row (what
// the check did before: one serialization of the whole sequence per row, quadratic in its length).
//
//   BM_ForEachRow/rows:N     one read, split into N rows
//   BM_ReadRowByRow/rows:N   N reads of one row each
//
//   pfx_llama_read_bench MODEL.gguf [benchmark flags]   (target pfx_llama_read_bench writes the model)

#include <pfx/llama/engine.hpp>

#include <benchmark/benchmark.h>

#include "run_benchmarks.hpp"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

std::string model_path;  // argv[1]

/// A llama.cpp context holding `rows` prefilled rows of sequence 0.
struct Held {
  pfx::llama::Engine engine;
  std::unique_ptr<pfx::driver::KvState> kv;

  explicit Held(std::size_t rows) : engine(pfx::llama::Settings{.model = model_path, .chunk = 64}) {
    kv = engine.make_kv_state(rows);
    std::vector<float> logits(engine.vocab());
    std::vector<pfx::token> tokens(rows);
    for (std::size_t i = 0; i < rows; ++i) tokens[i] = static_cast<pfx::token>(3 + i % (engine.vocab() - 3));
    for (std::size_t at = 0; at < rows; at += 64) {
      engine.prefill(*kv, std::span(tokens).subspan(at, std::min<std::size_t>(64, rows - at)), at, logits);
    }
  }
};

void BM_ForEachRow(benchmark::State& state) {
  const auto rows = static_cast<std::size_t>(state.range(0));
  const Held held(rows);
  std::size_t bytes = 0;
  for (auto _ : state) {
    held.kv->for_each_row(0, rows, [&bytes](std::size_t, std::span<const std::byte> row) { bytes += row.size(); });
  }
  benchmark::DoNotOptimize(bytes);
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_ReadRowByRow(benchmark::State& state) {
  const auto rows = static_cast<std::size_t>(state.range(0));
  const Held held(rows);
  for (auto _ : state) {
    for (std::size_t row = 0; row < rows; ++row) benchmark::DoNotOptimize(held.kv->read_rows(row, row + 1));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

BENCHMARK(BM_ForEachRow)->ArgName("rows")->RangeMultiplier(2)->Range(1024, 8192)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadRowByRow)->ArgName("rows")->RangeMultiplier(2)->Range(1024, 8192)->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: pfx_llama_read_bench MODEL.gguf [benchmark flags]\n");
    return 2;
  }
  model_path = argv[1];
  argv[1] = argv[0];  // the benchmark flags follow the program's name
  return pfx::bench::run_benchmarks(argc - 1, argv + 1, "0.5");
}
