#pragma once

/// \file
/// The parts of the JSON summary that `pfx replay --json` and `pfx soak --json` share (docs/cli.md,
/// "Output" and "pfx soak"): one writer, so that both report the same counters the same way.

#include <pfx/cli/replay.hpp>
#include <pfx/driver/lane.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>

namespace pfx::cli {

/// Appends the counters of a run to `summary`, in this order: requests, served, failures,
/// stale_reads, clears, prompt_tokens, reused_tokens, prefill_tokens, reuse_fraction, mismatches.
void add_summary_counters(nlohmann::ordered_json& summary, const ReplaySummary& s);

/// Appends the lane's settings to `settings`, in this order: engine, chunk, vocab, capacity, reuse
/// (LaneOptions::enabled), keep_min.
void add_lane_settings(nlohmann::ordered_json& settings, const std::string& engine, std::size_t chunk,
                       std::size_t vocab, const driver::LaneOptions& lane);

}  // namespace pfx::cli
