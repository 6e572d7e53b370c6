#pragma once

/// \file
/// The benchmark programs' main body: Google Benchmark with a default minimum time per benchmark
/// that a --benchmark_min_time on the command line overrides.

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

namespace pfx::bench {

/// Runs the registered benchmarks. The default minimum time is given as the first flag, so that one
/// on the command line overrides it (a per-benchmark MinTime would be written into every name).
inline int run_benchmarks(int argc, char** argv, const char* default_min_time) {
  std::string min_time_flag = "--benchmark_min_time=";
  min_time_flag += default_min_time;
  std::vector<char*> args(argv, argv + argc);
  args.insert(args.begin() + (argc > 0 ? 1 : 0), min_time_flag.data());
  int args_count = static_cast<int>(args.size());
  benchmark::Initialize(&args_count, args.data());
  if (benchmark::ReportUnrecognizedArguments(args_count, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace pfx::bench
