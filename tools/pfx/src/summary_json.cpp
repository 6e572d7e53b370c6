#include <pfx/cli/summary_json.hpp>

namespace pfx::cli {

void add_summary_counters(nlohmann::ordered_json& summary, const ReplaySummary& s) {
  summary["requests"] = s.requests;
  summary["served"] = s.requests - s.failures;
  summary["failures"] = s.failures;
  summary["stale_reads"] = s.stale_reads;
  summary["clears"] = s.clears;
  summary["prompt_tokens"] = s.prompt_tokens;
  summary["reused_tokens"] = s.reused_tokens;
  summary["prefill_tokens"] = s.prefill_tokens;
  summary["reuse_fraction"] =
      s.prompt_tokens > 0 ? static_cast<double>(s.reused_tokens) / static_cast<double>(s.prompt_tokens) : 0.0;
  summary["mismatches"] = s.mismatches;
}

void add_lane_settings(nlohmann::ordered_json& settings, const std::string& engine, std::size_t chunk,
                       std::size_t vocab, const driver::LaneOptions& lane) {
  settings["engine"] = engine;
  settings["chunk"] = chunk;
  settings["vocab"] = vocab;
  settings["capacity"] = lane.capacity;
  settings["reuse"] = lane.config.enabled;
  settings["keep_min"] = lane.config.keep_min;
}

}  // namespace pfx::cli
