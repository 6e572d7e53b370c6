// What `pfx replay` and `pfx soak` print: the lane line, each request's row or record, the summaries
// as text or JSON from the same fields, and the run's ending (docs/cli.md; docs/schemas/).

#include <pfx/cli/replay_report.hpp>

#include <pfx/cli/interrupt.hpp>
#include <pfx/cli/trace.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/driver/verify.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>
#include <utility>

namespace pfx::cli {
namespace {

using json = nlohmann::ordered_json;  // keys in the order written: "type" first
using replay::FirstMismatch;
using replay::MemorySample;
using replay::ReplaySummary;
using replay::RequestReport;
using replay::SoakSettings;
using replay::SoakSummary;

/// The KV bytes a run's lane holds (replay::ReplaySummary), as JSON fields.
json kv_bytes_json(json j, const ReplaySummary& s) {
  j["kv_bytes_per_rank"] = s.kv_bytes_per_rank;
  j["kv_bytes_by_rank"] = s.kv_bytes_by_rank;
  j["kv_bytes_total"] = s.kv_bytes_total;
  return j;
}

/// "KV state: 262656 bytes (0.3 MiB) held per rank, 1050624 bytes (1.0 MiB) in all over 4 ranks\n":
/// the text summaries' line;
/// none without a KV state (--engine none).
std::string kv_bytes_text(const ReplaySummary& s) {
  if (s.kv_bytes_total == 0) return "";
  constexpr double mib = 1024.0 * 1024.0;
  const std::size_t ranks = s.kv_bytes_by_rank.size();
  return fmt::format("KV state: {} bytes ({:.1f} MiB) held per rank, {} bytes ({:.1f} MiB) in all over {} rank{}\n",
                     s.kv_bytes_per_rank, static_cast<double>(s.kv_bytes_per_rank) / mib, s.kv_bytes_total,
                     static_cast<double>(s.kv_bytes_total) / mib, ranks, ranks == 1 ? "" : "s");
}

std::string percent(std::size_t part, std::size_t whole) {
  return whole == 0 ? "0%" : fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

double ratio(double cold, double resumed) { return resumed > 0 ? cold / resumed : 0; }

/// The counters and lane settings both summaries write, in this order (docs/schemas).
json counters_json(json j, const ReplaySummary& s) {
  j["requests"] = s.requests;
  j["served"] = s.requests - s.failures;
  j["failures"] = s.failures;
  j["stale_reads"] = s.stale_reads;
  j["clears"] = s.clears;
  j["prompt_tokens"] = s.prompt_tokens;
  j["reused_tokens"] = s.reused_tokens;
  j["prefill_tokens"] = s.prefill_tokens;
  j["reuse_fraction"] = s.prompt_tokens > 0 ? static_cast<double>(s.reused_tokens) / static_cast<double>(s.prompt_tokens) : 0.0;
  j["mismatches"] = s.mismatches;
  return j;
}

json lane_json(json j, const ReplayOptions& o, const std::string& engine, const driver::LaneOptions& lane) {
  j["engine"] = engine;
  j["chunk"] = o.chunk;
  j["vocab"] = o.workload.vocab;
  j["capacity"] = lane.capacity;
  j["reuse"] = lane.config.enabled;
  j["keep_min"] = lane.config.keep_min;
  return j;
}

}  // namespace

/// "<engine>, capacity N, reuse on|off, keep_min K": the lane line of the text output.
std::string describe_lane(const std::string& engine, const driver::LaneOptions& lane) {
  return fmt::format("{}, capacity {}, reuse {}, keep_min {}{}", engine, lane.capacity, lane.config.enabled ? "on" : "off",
                     lane.config.keep_min, lane.rule_chunk ? fmt::format(", rule chunk {}", *lane.rule_chunk) : "");
}

json request_json(const RequestReport& r) {
  json j{{"type", "request"}, {"request", r.number}, {"line", r.line}, {"prompt_tokens", r.prompt_tokens},
         {"max_new_tokens", r.max_new_tokens}};
  if (!r.label.empty()) j["label"] = r.label;
  if (!r.id.empty()) j["id"] = json::parse(r.id);  // the trace's own value, echoed as it was
  j["offset"] = r.decision.offset;
  j["reason"] = std::string(name(r.decision.reason));
  j["bound"] = std::string(name(r.decision.bound));
  j["common_prefix"] = r.decision.common_prefix;
  if (!r.error.empty()) {
    j["failed"] = true;
    j["injected"] = r.injected;
    j["error"] = r.error;
    return j;
  }
  j["prefill_tokens"] = r.prefill_tokens;
  j["generated_tokens"] = r.generated_tokens;
  j["ttft_ms"] = r.ttft_ms;
  j["prefill_ms"] = r.prefill_ms;
  if (r.bitexact) {
    j["bitexact"] = *r.bitexact;
    if (!*r.bitexact) j["mismatch"] = r.mismatch;
    j["cold_ttft_ms"] = r.cold_ttft_ms;
    j["cold_prefill_ms"] = r.cold_prefill_ms;
  }
  return j;
}

std::string request_text(const RequestReport& r, bool verify) {
  std::string row = fmt::format("{:>5} {:>5} {:<13} {:>7} ", r.number, r.line, r.label.empty() ? "-" : escaped(r.label),
                                r.prompt_tokens);
  if (!r.error.empty()) {
    return row + fmt::format("{:>7} FAILED ({}): {}", r.decision.offset, r.injected ? "injected" : "not injected", r.error);
  }
  row += fmt::format("{:>7} {:<16} {:<14} {:>7} {:>9.2f}", r.decision.offset, name(r.decision.reason),
                     name(r.decision.bound), r.prefill_tokens, r.ttft_ms);
  if (verify && r.bitexact) row += fmt::format(" {:>9.2f} {}", r.cold_ttft_ms, *r.bitexact ? "yes" : "NO: " + r.mismatch);
  return row;
}

json ReplayResult::to_json() const {
  const ReplaySummary& s = summary;
  const ReplayOptions& o = options;
  json j = counters_json({{"type", "summary"}}, s);
  j["divergences"] = s.divergences;
  j = kv_bytes_json(std::move(j), s);
  j["elapsed_s"] = s.elapsed_s;
  j["interrupted"] = interrupted;
  if (const std::string why = s.unchecked(o.verify); !why.empty()) j["unchecked"] = why;
  j["ok"] = !interrupted && s.passed(o.verify);
  json settings = lane_json({{"trace", source}}, o, engine, lane);
  settings["rule_chunk"] = driver::resolved_rule_chunk(lane.rule_chunk, o.chunk);
  settings["verify"] = o.verify;
  settings["faults"] = o.faults;
  settings["seed"] = o.workload.seed;
  settings["fault_seed"] = o.fault_seed.value_or(o.workload.seed);
  settings["dcp"] = o.dcp;
  settings["interleave"] = o.interleave;
  j["settings"] = settings;
  if (o.verify) {
    j["verified"] = s.verified;
    j["prefill_ms"] = s.prefill_ms;
    j["cold_prefill_ms"] = s.cold_prefill_ms;
    j["prefill_time_ratio"] = ratio(s.cold_prefill_ms, s.prefill_ms);
    j["ttft_ms"] = s.ttft_ms;
    j["cold_ttft_ms"] = s.cold_ttft_ms;
    j["ttft_ratio"] = ratio(s.cold_ttft_ms, s.ttft_ms);
    if (s.mismatches > 0) {
      j["first_mismatch"] = {{"request", s.first_mismatch.request}, {"line", s.first_mismatch.line},
                             {"label", s.first_mismatch.label}, {"what", s.first_mismatch.what}};
    }
  }
  return j;
}

std::string ReplayResult::to_text() const {
  const ReplaySummary& s = summary;
  const bool verify = options.verify;
  std::string text = fmt::format(
      "{} ({} failed{}), {}; {} prompt tokens: {} reused ({}), {} prefilled; {:.1f} s\n", counted(s.requests, "request"),
      s.failures, s.stale_reads > 0 ? fmt::format(", {} by a stale-row read", s.stale_reads) : "", counted(s.clears, "clear"),
      s.prompt_tokens, s.reused_tokens, percent(s.reused_tokens, s.prompt_tokens), s.prefill_tokens, s.elapsed_s);
  if (verify) {
    text += fmt::format("verify: {} compared with a cold run, {}; prefill {:.1f} ms cold vs {:.1f} "
                        "ms resumed ({:.2f}x), time to first token {:.2f}x\n",
                        counted(s.verified, "response"), counted(s.mismatches, "mismatch", "mismatches"), s.cold_prefill_ms, s.prefill_ms, ratio(s.cold_prefill_ms, s.prefill_ms),
                        ratio(s.cold_ttft_ms, s.ttft_ms));
  }
  text += kv_bytes_text(s);
  if (s.divergences > 0) text += fmt::format("{} requests served cold because the ranks' records differed\n", s.divergences);
  if (s.mismatches > 0) {
    FirstMismatch first = s.first_mismatch;
    first.label = escaped(first.label);  // the trace's text, shown on a terminal
    text += "MISMATCH: " + driver::describe_mismatches(s.mismatches, first) + " (exit status 1)\n";
  }
  if (s.stale_reads > 0) text += "FAILED: the engine read poisoned KV rows (exit status 1)\n";
  // An interrupted run is judged by its own line (exit 130/143); it did not get to compare the rest.
  if (const std::string why = s.unchecked(verify); !why.empty() && !interrupted) text += "FAILED: " + why + " (exit status 1)\n";
  return text;
}

json SoakResult::to_json() const {
  const SoakSummary& s = summary;
  const SoakSettings& settings = options.soak;
  json samples = json::array();
  for (const MemorySample& sample : s.samples) samples.push_back({{"requests", sample.requests}, {"kib", sample.kib}});
  json memory{{"checked", s.memory_checked}, {"final_kib", s.final_kib}, {"samples", samples}};
  if (s.baseline) {
    memory["baseline_kib"] = s.baseline->kib;
    memory["peak_kib"] = s.peak_kib;
    memory["growth_kib"] = s.growth_kib();
    memory["allowed_kib"] = s.allowed_kib;
  }
  memory["flat"] = s.memory_flat();
  json j = counters_json({{"type", "soak"}}, s.replay);
  j["injected"] = s.injected;
  j = kv_bytes_json(std::move(j), s.replay);
  j["verified"] = s.replay.verified;
  j["memory"] = memory;
  j["elapsed_s"] = s.replay.elapsed_s;
  j["interrupted"] = interrupted;
  if (const std::string why = s.replay.unchecked(true); !why.empty()) j["unchecked"] = why;
  j["ok"] = !interrupted && s.ok();
  json settings_json = lane_json(json::object(), options, engine, lane);
  settings_json["faults"] = settings.replay.fault_rate;
  settings_json["seed"] = settings.workload.seed;
  settings_json["fault_seed"] = settings.replay.seed;
  settings_json["verify_every"] = settings.replay.verify_every;
  settings_json["warmup"] = settings.warmup;
  settings_json["rss_tolerance"] = settings.tolerance.describe();
  settings_json["dcp"] = options.dcp;
  settings_json["interleave"] = options.interleave;
  j["settings"] = settings_json;
  return j;
}

std::string SoakResult::to_text() const {
  const SoakSummary& s = summary;
  const ReplaySummary& r = s.replay;
  const SoakSettings& settings = options.soak;
  std::string text = fmt::format("requests: {} ({} failed: {} injected, {} by a stale-row read), {} clears\n",
                                 r.requests, r.failures, s.injected, r.stale_reads, r.clears);
  text += fmt::format("verify: {} compared with a cold run, {}\n", counted(r.verified, "response"),
                      counted(r.mismatches, "mismatch", "mismatches"));
  text += fmt::format("reuse: {} of {} prompt tokens reused ({}), {} prefilled\n", r.reused_tokens, r.prompt_tokens,
                      percent(r.reused_tokens, r.prompt_tokens), r.prefill_tokens);
  text += kv_bytes_text(r);
  if (!s.baseline) {
    text += fmt::format("memory: {} KiB resident at the end; the run ended within the warm-up of {} requests, so "
                        "nothing was compared\n",
                        s.final_kib, settings.warmup);
  } else {
    text += fmt::format("memory: {} KiB resident after {} requests of warm-up; at most {} KiB after it, {} KiB at the "
                        "end: +{} KiB ({} samples)",
                        s.baseline->kib, s.baseline->requests, s.peak_kib, s.final_kib, s.growth_kib(), s.samples.size());
    const std::string tolerance = settings.tolerance.percent ? fmt::format(" ({})", settings.tolerance.describe()) : "";
    text += !s.memory_checked ? "; not checked: AddressSanitizer holds freed memory in quarantine\n"
                              : fmt::format(", {} the tolerance of {} KiB{}\n", s.memory_flat() ? "within" : "OVER",
                                            s.allowed_kib, tolerance);
  }
  text += fmt::format("time: {:.1f} s\n", r.elapsed_s);
  if (r.mismatches > 0) text += "MISMATCH: some responses differ from their cold run (exit status 1)\n";
  if (r.stale_reads > 0) text += "FAILED: the engine read poisoned KV rows (exit status 1)\n";
  if (!s.memory_flat()) text += "FAILED: resident memory grew past the tolerance after the warm-up (exit status 1)\n";
  if (interrupted) return text;  // judged by the INTERRUPTED line that follows: the run did not finish
  if (const std::string why = r.unchecked(true); !why.empty()) text += "FAILED: " + why + " (exit status 1)\n";
  if (s.ok()) text += "pfx soak: every check passed\n";
  return text;
}

/// The run's ending, after its summary: the interruption's line, and the exit status.
int finish(const Streams& streams, const ReplayOptions& o, int signal, std::size_t requests, bool passed) {
  if (signal != 0) {
    streams.out << (o.json ? json{{"type", "interrupted"}, {"signal", signal}, {"requests", requests}}.dump()
                           : describe_interruption(signal, requests))
                << "\n";
  }
  streams.out.flush();
  return signal != 0 ? interrupted_status(signal) : passed ? exit_ok : exit_mismatch;
}

}  // namespace pfx::cli
