#pragma once

/// \file
/// The options of `pfx replay`, `pfx soak` and `pfx workload` (docs/cli.md): one value the command
/// line fills (src/replay_command.cpp), and a run (replay_run.hpp) and its report (replay_report.hpp)
/// read.

#include <pfx/cli/command.hpp>
#include <pfx/cli/engine_option.hpp>
#include <pfx/replay/soak.hpp>
#include <pfx/replay/workload.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace pfx::cli {

/// The options of `pfx replay`, `pfx soak` and `pfx workload` (docs/cli.md); each command keeps its
/// own defaults, and the checks are these, once.
struct ReplayOptions {
  std::size_t chunk = default_chunk;  ///< the engine's prefill chunk = the rule's chunk
  /// 262144 ids: any common tokenizer's fit; the capacity in KV rows, allocated once.
  replay::WorkloadOptions workload{.seed = 253, .vocab = std::size_t{1} << 18, .requests = 100, .capacity = 32768};
  std::optional<std::size_t> keep_min;      ///< default: TF_GLM53_PREFIX_CACHE_MIN, else 64
  bool capacity_given = false;              ///< --capacity was given (llama: it caps the model's context)
  EngineChoice engine;                      ///< --engine (engine_option.hpp)
  double faults = 0;
  std::optional<std::uint64_t> fault_seed;  ///< of the injected failures; default: the seed
  bool json = false;
  bool no_progress = false;
  // replay's
  std::optional<std::string> trace;       ///< none: the embedded workload; "-": standard input
  std::optional<std::size_t> rule_chunk;  ///< the rule's alignment; default: the engine's chunk (THM-1)
  std::string backend;                    ///< --backend, a deprecated spelling of --engine reference|cuda
  bool verify = false;
  std::size_t dcp = 1;                    ///< shards of the KV state (under mpirun: one per rank)
  std::size_t interleave = 1;
  // soak's
  replay::SoakSettings soak;
  std::optional<std::size_t> warmup;      ///< default: the settings' 2000, shrunk to half of --requests
  std::string tolerance = "4096";
};

}  // namespace pfx::cli
