#pragma once

/// \file
/// A run of `pfx replay` or `pfx soak` on this process's ranks (docs/cli.md): the engine, the input
/// checked before anything runs, the lane, the loop (pfx::replay), and the report (replay_report.hpp).
/// SIGINT or SIGTERM stops it between two requests (interrupt.hpp).

#include <pfx/cli/command.hpp>
#include <pfx/cli/replay_options.hpp>
#include <pfx/driver/collective.hpp>

#include <cstddef>

namespace pfx::cli {

/// Throws InputError for a capacity below the embedded workload's 256 rows.
void check_embedded_workload_capacity(std::size_t capacity);

/// `pfx replay` with `options`, printing to `streams`; `group`: this rank's end of mpirun's group, or
/// null in one process. Returns the exit status. Throws InputError for bad input (a trace line, an
/// engine that refuses its options), driver::ConfigError for a malformed environment variable.
[[nodiscard]] int replay_on(const ReplayOptions& options, const Streams& streams, driver::Collective* group);

/// `pfx soak`, as replay_on: the embedded workload's stream, a sample of it compared with cold runs,
/// and resident memory watched after the warm-up.
[[nodiscard]] int soak_on(const ReplayOptions& options, const Streams& streams, driver::Collective* group);

}  // namespace pfx::cli
