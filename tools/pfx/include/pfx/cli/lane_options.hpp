#pragma once

/// \file
/// What `pfx replay` and `pfx soak` share about the lane they run (docs/cli.md): the options that set
/// it up (--chunk, --vocab, --capacity, --keep-min, --faults), their ranges and messages, the lane's
/// settings from the environment, the host engine, and how both describe them. Each command keeps
/// its own defaults; the checks are these, once.

#include <pfx/driver/lane.hpp>
#include <pfx/engines/reference_model.hpp>

#include <cstddef>
#include <optional>
#include <string>

namespace CLI {
class App;
}

namespace pfx::cli {

/// Where a command keeps the model's options (its own fields, with its own defaults).
struct ModelFields {
  std::size_t& chunk;     ///< --chunk: the reference engine's prefill chunk = the rule's chunk
  std::size_t& vocab;     ///< --vocab: token ids are 0 .. vocab - 1
  std::size_t& capacity;  ///< --capacity: KV rows, allocated once
};

/// Adds --chunk, --vocab and --capacity to `command`, with their ranges (a value outside one is bad
/// input, exit status 2). `pfx replay`, `pfx workload` and `pfx soak` all take them.
void add_model_options(CLI::App& command, const ModelFields& fields);

/// Adds --keep-min (unset: TF_GLM53_PREFIX_CACHE_MIN, else 64; a negative value is bad input).
void add_keep_min_option(CLI::App& command, std::optional<std::size_t>& keep_min);

/// Adds --faults: the probability, 0 to 1, that each engine call fails, injected.
void add_faults_option(CLI::App& command, double& faults);

/// Throws InputError unless `capacity` leaves room for the embedded workload (256 rows).
void check_embedded_workload_capacity(std::size_t capacity);

/// The lane a command runs: enabled and keep_min from the environment (TF_GLM53_PREFIX_CACHE,
/// TF_GLM53_PREFIX_CACHE_MIN; a malformed value throws driver::ConfigError), --keep-min over it, the
/// capacity, and poisoning on so that a stale read is caught.
[[nodiscard]] driver::LaneOptions lane_options(std::size_t capacity, std::optional<std::size_t> keep_min);

/// "reference engine (vocab V, width W, L layers, chunk C)".
[[nodiscard]] std::string describe_engine(const engines::ReferenceModelShape& shape);

/// "<engine>, capacity N, reuse on|off, keep_min K": the lane line of the commands' text output.
[[nodiscard]] std::string describe_lane(const std::string& engine, const driver::LaneOptions& lane);

/// `part` as a percentage of `whole`, one decimal ("0%" when whole is 0).
[[nodiscard]] std::string percent(std::size_t part, std::size_t whole);

}  // namespace pfx::cli
