// `pfx replay`, `pfx soak` and `pfx workload`: options, the engine, the input, and each run's result as
// text or JSON (docs/cli.md). A soak is a replay of the workload stream that samples its responses and
// watches memory: the two share their options, their loop (replay()) and their ending.

#include <pfx/cli/command.hpp>
#include <pfx/cli/engine_option.hpp>
#include <pfx/cli/interrupt.hpp>
#include <pfx/cli/json_kind.hpp>
#include <pfx/cli/progress.hpp>
#include <pfx/cli/trace.hpp>
#include <pfx/driver/cuda.hpp>
#include <pfx/driver/environment.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/driver/verify.hpp>
#include <pfx/replay/replay.hpp>
#include <pfx/replay/soak.hpp>
#include <pfx/replay/workload.hpp>
#include <pfx/token.hpp>
#ifdef PFX_CLI_MPI
#include <pfx/driver/mpi_collective.hpp>
#endif

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

namespace pfx::cli {
namespace {

using json = nlohmann::ordered_json;  // keys in the order written: "type" first
using replay::FirstMismatch;
using replay::ItemSource;
using replay::MemorySample;
using replay::OnRequest;
using replay::ReplaySummary;
using replay::RequestReport;
using replay::RssTolerance;
using replay::SoakSettings;
using replay::SoakSummary;
using replay::TraceItem;
using replay::WorkloadOptions;

/// The run stops between two requests once SIGINT or SIGTERM arrived (interrupt.hpp).
bool signalled() { return interrupted_by() != 0; }

/// The options of `pfx replay`, `pfx soak` and `pfx workload` (docs/cli.md); each command keeps its
/// own defaults, and the checks are these, once.
struct Options {
  std::size_t chunk = default_chunk;  ///< the engine's prefill chunk = the rule's chunk
  /// 262144 ids: any common tokenizer's fit; the capacity in KV rows, allocated once.
  WorkloadOptions workload{.seed = 253, .vocab = std::size_t{1} << 18, .requests = 100, .capacity = 32768};
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
  SoakSettings soak;
  std::optional<std::size_t> warmup;      ///< default: the settings' 2000, shrunk to half of --requests
  std::string tolerance = "4096";
};

/// --chunk, --vocab, --capacity, --seed and --requests (at most `most`), with their ranges (a value
/// outside one is bad input, exit status 2).
void add_workload_options(CLI::App& command, Options& o, std::size_t most) {
  command.add_option("--chunk", o.chunk, "Prefill chunk of the engine, and so the rule's chunk")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))->capture_default_str();
  // At least 2: the reference engine refuses a vocabulary of one token (and 0 holds no token id).
  command.add_option("--vocab", o.workload.vocab,
                     "Vocabulary of the engine (--engine llama takes the model's): token ids are 0 .. vocab - 1 "
                     "(at most 2^24 with the reference engine)")
      ->check(CLI::Range(std::size_t{2}, static_cast<std::size_t>(std::numeric_limits<token>::max())))
      ->capture_default_str();
  command.add_option("--capacity", o.workload.capacity, "KV rows of the lane, allocated once")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 26))->capture_default_str();
  command.add_option("--seed", o.workload.seed, "Seed of the workload (and of the injected failures)")
      ->capture_default_str()->check(non_negative());
  command.add_option("--requests", o.workload.requests, "Requests of the workload")
      ->check(CLI::Range(std::size_t{1}, most))->capture_default_str();
}

/// The options a run adds to its workload's: the lane's, the engine, failures, the output.
void add_run_options(CLI::App& command, Options& o) {
  command.add_option("--keep-min", o.keep_min, "Shortest reuse worth taking (default: TF_GLM53_PREFIX_CACHE_MIN, else 64)")
      ->check(non_negative());  // CLI11 would wrap -1 round to 2^64 - 1
  add_engine_option(command, o.engine);
  command.add_option("--faults", o.faults, "Probability that each engine call (one prefill chunk or decode step) fails, injected")
      ->check(CLI::Validator(
          [](std::string& value) {  // CLI11's range check lets NaN through (every comparison with it is false)
            return std::isnan(std::strtod(value.c_str(), nullptr)) ? "expected a probability from 0 to 1, got " + value : "";
          },
          "PROBABILITY"))
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  command.add_option("--fault-seed", o.fault_seed,
                     "Seed of the injected failures alone (default: --seed), to replay the same workload under other faults")
      ->check(non_negative());
  command.add_option("--dcp", o.dcp,
                     "Decode context parallelism: ranks the KV rows are split over, each attending its own (one "
                     "process drives them all; under mpirun, one rank per process)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1024}))->capture_default_str();
  command.add_option("--interleave", o.interleave, "Consecutive positions per rank: row p lives on rank (p / interleave) mod dcp")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))->capture_default_str();
  command.add_flag("--json", o.json, "Write the result as JSON");
  command.add_flag("--no-progress", o.no_progress, "No progress bar, even on a terminal");
}

/// The engine of a run: for shards (--dcp above 1, or ranks under mpirun) its decode-context-parallel
/// form where it has one (make_engine with a Dcp).
ChosenEngine run_engine(const Options& o, const engines::ReferenceModelShape& shape, driver::Collective* ranks) {
  if (o.dcp > 1 || ranks != nullptr) return make_engine(o.engine, shape, Dcp{{o.dcp, o.interleave}, ranks});
  return make_engine(o.engine, shape);
}

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

void check_embedded_workload_capacity(std::size_t capacity) {
  if (capacity < 256) {
    throw InputError(fmt::format("--capacity {} is too small for the embedded workload (at least 256)", capacity));
  }
}

/// The lane a run serves: enabled and keep_min from the environment (TF_GLM53_PREFIX_CACHE,
/// TF_GLM53_PREFIX_CACHE_MIN; a malformed value throws driver::ConfigError), --keep-min over it, and
/// poisoning on so that a stale read is caught.
driver::LaneOptions lane_options(const Options& o) {
  driver::LaneOptions lane{.capacity = o.workload.capacity, .config = driver::config_from_environment(),
                           .rule_chunk = o.rule_chunk.value_or(0), .poison = true};
  if (o.keep_min) lane.config.keep_min = *o.keep_min;
  return lane;
}

/// "<engine>, capacity N, reuse on|off, keep_min K": the lane line of the text output.
std::string describe_lane(const std::string& engine, const driver::LaneOptions& lane) {
  return fmt::format("{}, capacity {}, reuse {}, keep_min {}{}", engine, lane.capacity, lane.config.enabled ? "on" : "off",
                     lane.config.keep_min, lane.rule_chunk != 0 ? fmt::format(", rule chunk {}", lane.rule_chunk) : "");
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

json lane_json(json j, const Options& o, const std::string& engine, const driver::LaneOptions& lane) {
  j["engine"] = engine;
  j["chunk"] = o.chunk;
  j["vocab"] = o.workload.vocab;
  j["capacity"] = lane.capacity;
  j["reuse"] = lane.config.enabled;
  j["keep_min"] = lane.config.keep_min;
  return j;
}

/// The run's ending, after its summary: the interruption's line, and the exit status.
int finish(const Streams& streams, const Options& o, int signal, std::size_t requests, bool passed) {
  if (signal != 0) {
    streams.out << (o.json ? json{{"type", "interrupted"}, {"signal", signal}, {"requests", requests}}.dump()
                           : describe_interruption(signal, requests))
                << "\n";
  }
  streams.out.flush();
  return signal != 0 ? interrupted_status(signal) : passed ? exit_ok : exit_mismatch;
}

// ---------------------------------------------------------------- pfx replay

struct Input {
  std::string source;  ///< how messages name it
  std::vector<TraceItem> items;
};

/// The input, checked against the lane's vocabulary and capacity; `context`: the model's trained
/// context when the engine has one (the capacity is then that, or --capacity below it).
Input read_input(const Options& o, std::size_t context) {
  if (!o.trace) {
    check_embedded_workload_capacity(o.workload.capacity);
    return {fmt::format("embedded workload (seed {})", o.workload.seed), replay::embedded_workload(o.workload)};
  }
  TraceLimits limits{.vocab = o.workload.vocab, .capacity = o.workload.capacity};
  if (context != 0 && o.workload.capacity == context) limits.capacity_source = "the model's trained context";
  Trace trace;
  const std::string& path = *o.trace;
  if (path.empty()) throw InputError("cannot read the trace '': the path is empty (without a trace argument, the embedded workload runs)");
  std::string source = path;
  if (path == "-") {
    source = "<stdin>";
    trace = read_trace(std::cin, limits);
  } else {
    std::ifstream in = open_file(path, path, "");
    trace = read_trace(in, limits);
    check_read(in, path);
  }
  if (!trace.problems.empty()) {
    constexpr std::size_t shown = 10;
    std::string message;
    for (std::size_t i = 0; i < trace.problems.size() && i < shown; ++i) {
      message += (i == 0 ? "" : "\n") + trace.problems[i].describe(source);
    }
    if (trace.problems.size() > shown) message += fmt::format("\n... and {} more", trace.problems.size() - shown);
    message += fmt::format("\n{} bad line{}; nothing was replayed", trace.problems.size(),
                           trace.problems.size() == 1 ? "" : "s");
    throw InputError(message);
  }
  if (replay::count_requests(trace.items) == 0) {
    if (!trace.items.empty()) {  // clears only: not empty, but nothing to serve
      throw InputError(fmt::format("{} holds no request, only {} clear{}: nothing to replay", source, trace.items.size(),
                                   trace.items.size() == 1 ? "" : "s"));
    }
    throw InputError(fmt::format("{} holds no request (it is empty or blank): nothing to replay", source));
  }
  return {source, std::move(trace.items)};
}

/// Whether this process is one rank of an mpirun job (replay then shards across the ranks).
bool under_mpirun() noexcept {
#ifdef PFX_CLI_MPI
  return driver::launched_by_mpi();
#else
  return false;
#endif
}

/// Throws InputError for an engine asked for what it cannot do (`none`: a check or shards; `llama`:
/// shards), before anything is read or run.
void check_engine_options(const Options& options) {
  const std::string& engine = options.engine.name;
  if (engine == "llama" && (under_mpirun() || options.dcp > 1)) {  // one llama.cpp context per KV state
    throw InputError("--engine llama cannot shard its KV state: run it with --dcp 1 in one process");
  }
  if (engine != "none") return;
  if (options.verify) {
    throw InputError("--verify needs a model: --engine none computes no KV row and no logit to compare with a cold run");
  }
  // Sharding splits a KV state's rows; without one, the decisions are one state's (SHARD-1).
  if (under_mpirun()) {
    throw InputError("--engine none has no KV state to shard across mpirun's ranks: run it in one process");
  }
  if (options.dcp > 1) {
    throw InputError(fmt::format("--dcp {}: --engine none has no KV state to shard (its decisions are those of any dcp)",
                                 options.dcp));
  }
}

/// `--backend` as the `--engine` it spells (host: reference; cuda: cuda; auto: cuda when a device is
/// usable, else reference), with a warning that names the new spelling. InputError when --engine
/// names another engine.
void apply_deprecated_backend(Options& options, bool engine_given, std::ostream& err) {
  const std::string engine = options.backend == "host"   ? "reference"
                             : options.backend == "cuda" ? "cuda"
                             : driver::cuda::unavailable_reason().empty() ? "cuda" : "reference";
  if (engine_given && options.engine.name != engine) {
    throw InputError(fmt::format("--backend {} contradicts --engine {}: give --engine alone", options.backend,
                                 options.engine.name));
  }
  err << fmt::format("pfx replay: warning: --backend is deprecated; --backend {} is --engine {}\n", options.backend, engine);
  options.engine.name = engine;
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

/// A replay's result, rendered as text or JSON from the same fields.
struct ReplayResult {
  ReplaySummary summary;
  const Options& options;
  const driver::LaneOptions& lane;
  std::string source;
  std::string engine;
  bool interrupted = false;

  [[nodiscard]] json to_json() const {
    const ReplaySummary& s = summary;
    const Options& o = options;
    json j = counters_json({{"type", "summary"}}, s);
    j["divergences"] = s.divergences;
    j = kv_bytes_json(std::move(j), s);
    j["elapsed_s"] = s.elapsed_s;
    j["interrupted"] = interrupted;
    if (const std::string why = s.unchecked(o.verify); !why.empty()) j["unchecked"] = why;
    j["ok"] = !interrupted && s.passed(o.verify);
    json settings = lane_json({{"trace", source}}, o, engine, lane);
    settings["rule_chunk"] = lane.rule_chunk != 0 ? lane.rule_chunk : o.chunk;
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

  [[nodiscard]] std::string to_text() const {
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
};

int replay_on(const Options& options, const Streams& streams, driver::Collective* ranks) {
  // A model's vocabulary and context are its own: the trace is checked against them, so llama's
  // engine comes first.
  Options checked = options;
  const engines::ReferenceModelShape shape{.vocab = options.workload.vocab, .chunk = options.chunk};
  ChosenEngine early;
  if (options.engine.name == "llama") {
    early = run_engine(options, shape, ranks);
    checked.workload.vocab = early.engine->vocab();
    checked.workload.capacity = lane_capacity(early, options.workload.capacity, options.capacity_given);
  }
  const driver::LaneOptions lane = lane_options(checked);
  Input input = read_input(checked, early.context);  // every line checked before anything runs
  const ChosenEngine engine = early.engine ? std::move(early) : run_engine(options, shape, ranks);
  const replay::ReplaySettings settings{.lane = lane, .verify = options.verify, .fault_rate = options.faults,
                                        .seed = options.fault_seed.value_or(options.workload.seed),
                                        .dcp = options.dcp, .interleave = options.interleave, .collective = ranks,
                                        .stop = signalled};

  const std::size_t requests = replay::count_requests(input.items);
  if (lane.rule_chunk % options.chunk != 0) {  // THM-1's premise does not hold: say so first
    streams.err << fmt::format("pfx replay: warning: --rule-chunk {} is not a multiple of the engine's chunk {}: resumes "
                               "may start off the prefill grid and differ from a cold run (THM-1)\n",
                               lane.rule_chunk, options.chunk);
  }
  if (!options.json) {
    const std::string faults =
        options.faults > 0 ? fmt::format(", faults {} (seed {})", options.faults, settings.seed) : "";
    const std::string shards =
        options.dcp > 1 || ranks != nullptr
            ? fmt::format(", {} shards (interleave {}), {}", options.dcp, options.interleave,
                          ranks != nullptr ? fmt::format("{} ranks", ranks->size()) : "one process")
            : "";
    std::string header = fmt::format("{:>5} {:>5} {:<13} {:>7} {:>7} {:<16} {:<14} {:>7} {:>9}", "#", "line", "kind",
                                     "prompt", "offset", "reason", "bound", "prefill", "ttft ms");
    if (options.verify) header += fmt::format(" {:>9} {}", "cold ms", "bit-exact");
    streams.out << fmt::format("pfx replay: {}: {}\n", input.source, counted(requests, "request"))
                << fmt::format("lane: {}{}{}{}\n", describe_lane(engine.description, lane),
                               options.verify ? ", verify" : "", faults, shards)
                << header << "\n" << std::flush;
  }
  ProgressBar progress(streams.err, streams.err_is_terminal && !options.no_progress, requests, "requests");
  const OnRequest on_request = [&](const RequestReport& r) {
    progress.erase();
    streams.out << (options.json ? request_json(r).dump() : request_text(r, options.verify)) << "\n";
    streams.out.flush();
    progress.update(r.number);
  };
  std::size_t given = 0;  // each item moved out as it is served: a trace is held once
  const ItemSource next = [&]() -> std::optional<TraceItem> {
    return given < input.items.size() ? std::optional(std::move(input.items[given++])) : std::nullopt;
  };
  const ReplaySummary summary = replay::run(next, *engine.engine, settings, on_request);
  progress.erase();
  const int signal = interrupted_by();
  const ReplayResult result{summary, checked, lane, input.source, engine.description, signal != 0};
  streams.out << (options.json ? result.to_json().dump() + "\n" : result.to_text());
  return finish(streams, options, signal, summary.requests, summary.passed(options.verify));
}

/// A run (replay_on, soak_on) on this process's ranks: none in one process.
using RunOn = int (*)(const Options&, const Streams&, driver::Collective*);

/// Under mpirun, one rank per process: every rank runs `run` with --dcp the number of ranks, rank 0
/// prints, and every rank exits with the worst status of all (docs/driver.md, "The sharded lane").
/// In one process, `run` without ranks.
int on_every_rank(const Options& options, const Streams& streams, RunOn run, const char* command) {
#ifdef PFX_CLI_MPI
  if (driver::launched_by_mpi()) {
    int argc = 0;
    char** argv = nullptr;
    const driver::MpiSession session(argc, argv);
    driver::MpiCollective world;
    std::ostringstream discarded;
    const Streams quiet{discarded, streams.err, false};
    Options per_rank = options;
    per_rank.dcp = world.size();
    int status = exit_internal;
    std::string error;  // every rank reads the same input, so a bad one fails on every rank
    try {
      if (options.dcp > 1 && options.dcp != world.size()) {
        throw InputError(fmt::format("--dcp {} under mpirun's {} ranks: each rank holds one shard, so --dcp is the "
                                     "number of ranks (give it as {}, or leave it out)",
                                     options.dcp, world.size(), world.size()));
      }
      status = run(per_rank, world.rank() == 0 ? streams : quiet, &world);
    } catch (const InputError& e) {
      status = exit_bad_input;
      error = e.what();
    } catch (const driver::ConfigError& e) {
      status = exit_bad_input;
      error = e.what();
    }
    // Rank 0 says why before any rank exits: mpirun ends the job when the first rank exits non-zero.
    if (!error.empty() && world.rank() == 0) streams.err << "pfx " << command << ": " << error << "\n" << std::flush;
    const std::vector<std::uint64_t> mine{static_cast<std::uint64_t>(status)};
    std::vector<std::uint64_t> all(world.size());
    world.all_gather(mine, all);
    std::uint64_t worst = 0;
    for (const std::uint64_t s : all) worst = std::max(worst, s);
    return static_cast<int>(worst);
  }
#else
  (void)command;
#endif
  return run(options, streams, nullptr);
}

// ---------------------------------------------------------------- pfx soak

/// At most this many failed checks are printed one by one; the summary counts them all.
constexpr std::size_t shown_failures = 10;

/// A soak's result, rendered as text or JSON from the same fields.
struct SoakResult {
  SoakSummary summary;
  const Options& options;
  const driver::LaneOptions& lane;
  std::string engine;
  bool interrupted = false;

  [[nodiscard]] json to_json() const {
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

  [[nodiscard]] std::string to_text() const {
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
};

int soak_on(const Options& given, const Streams& streams, driver::Collective* ranks) {
  Options options = given;
  SoakSettings& settings = options.soak;
  settings.workload = options.workload;
  settings.tolerance = RssTolerance::parse(options.tolerance, "--rss-tolerance");
  // The default warm-up shrinks to fit a short run; one asked for explicitly must fit as it is.
  settings.warmup = options.warmup.value_or(std::min(settings.warmup, settings.workload.requests / 2));
  if (settings.warmup >= settings.workload.requests) {
    throw InputError(fmt::format("--warmup {} leaves no request to watch memory on: it must be less than --requests {}",
                                 settings.warmup, settings.workload.requests));
  }
  const ChosenEngine engine = run_engine(options, {.vocab = settings.workload.vocab, .chunk = options.chunk}, ranks);
  options.workload.vocab = settings.workload.vocab = engine.engine->vocab();  // llama's: the workload's tokens are the model's
  options.workload.capacity = settings.workload.capacity =  // llama's: the model's context, capped by --capacity
      lane_capacity(engine, settings.workload.capacity, options.capacity_given);
  check_embedded_workload_capacity(settings.workload.capacity);
  const driver::LaneOptions lane = settings.replay.lane = lane_options(options);
  settings.replay.fault_rate = options.faults;
  settings.replay.seed = options.fault_seed.value_or(settings.workload.seed);
  settings.replay.stop = signalled;
  settings.replay.dcp = options.dcp;
  settings.replay.interleave = options.interleave;
  settings.replay.collective = ranks;

  const std::size_t requests = settings.workload.requests;
  if (!options.json) {
    streams.out << fmt::format("pfx soak: {} of the embedded workload (seed {}), faults {} per engine call\n",
                               counted(requests, "request"), settings.workload.seed, settings.replay.fault_rate)
                << fmt::format("lane: {}\n", describe_lane(engine.description, lane))
                << fmt::format("verify: every {}th request, every request after a failure and the last, against a "
                               "cold run\n",
                               settings.replay.verify_every)
                << fmt::format("memory: baseline after {} requests, then a sample every {}; tolerance {}\n",
                               settings.warmup, settings.memory_every, settings.tolerance.describe())
                << std::flush;
  }
  ProgressBar progress(streams.err, streams.err_is_terminal && !options.no_progress, requests, "requests");
  std::size_t failed_checks = 0;
  const OnRequest on_request = [&](const RequestReport& r) {
    const bool failed = (!r.error.empty() && !r.injected) || r.bitexact == std::optional<bool>(false);
    if (failed && !options.json && ++failed_checks <= shown_failures) {
      const std::string what = r.error.empty() ? "differs from its cold run: " + r.mismatch : "read a poisoned row: " + r.error;
      progress.erase();
      streams.out << fmt::format("request {} ({}, {} prompt tokens, offset {}) {}\n", r.number, r.label, r.prompt_tokens,
                                 r.decision.offset, what)
                  << std::flush;
    }
    progress.update(r.number);
  };
  const SoakSummary summary = replay::soak(*engine.engine, settings, on_request);
  progress.erase();
  const int signal = interrupted_by();
  const SoakResult result{summary, options, lane, engine.description, signal != 0};
  if (failed_checks > shown_failures && !options.json) {
    streams.out << fmt::format("... and {} more\n", failed_checks - shown_failures);
  }
  streams.out << (options.json ? result.to_json().dump() + "\n" : result.to_text());
  return finish(streams, options, signal, summary.replay.requests, summary.ok());
}

}  // namespace

void add_replay_command(CLI::App& app, const Streams& streams, int& status) {
  auto options = std::make_shared<Options>();
  CLI::App* command = app.add_subcommand(
      "replay", "Serve a trace (or the embedded workload) through a lane on an engine (--engine); report what was reused");
  command->add_option("trace", options->trace,
                      "JSON Lines trace: {\"prompt\": [ids], \"max_new_tokens\": n} or {\"op\": \"clear\"} per line; "
                      "- reads standard input; without it, the embedded workload");
  add_workload_options(*command, *options, 1000000);
  add_run_options(*command, *options);
  command->add_option("--rule-chunk", options->rule_chunk,
                      "Alignment of the rule's offsets (default: --chunk). The engine still prefills on --chunk's grid: a "
                      "rule chunk that is not a multiple of it shows THM-1's counterexample under --verify")
      ->check(non_negative())
      ->check(CLI::Range(std::size_t{1}, std::numeric_limits<std::size_t>::max()));
  CLI::Option* backend =
      command->add_option("--backend", options->backend, "Deprecated: --engine reference (host) or --engine cuda")
          ->check(CLI::IsMember({"host", "cuda", "auto"}));
  command->add_flag("--verify", options->verify, "Also serve each request cold and compare bit for bit");
  command->callback([options, backend, command, &streams, &status] {
    if (options->trace && command->count("--requests") > 0) {
      throw InputError("--requests sizes the embedded workload; it cannot be given with a trace");
    }
    if (backend->count() > 0) apply_deprecated_backend(*options, command->count("--engine") > 0, streams.err);
    check_llama_options_unused(*command, options->engine);
    check_engine_options(*options);
    options->capacity_given = command->count("--capacity") > 0;
    status = on_every_rank(*options, streams, replay_on, "replay");
  });
}

void add_soak_command(CLI::App& app, const Streams& streams, int& status) {
  auto options = std::make_shared<Options>();
  SoakSettings& s = options->soak;
  options->workload = s.workload;
  options->faults = s.replay.fault_rate;
  CLI::App* command = app.add_subcommand(
      "soak", "Serve a long stream of mixed traffic with injected failures through one lane; check a sample of the "
              "responses against cold runs bit for bit, and that resident memory stays flat");
  add_workload_options(*command, *options, 1000000000);
  add_run_options(*command, *options);
  command->add_option("--verify-every", s.replay.verify_every,
                      "Compare every Nth request, and every request after a failure, with a cold run")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1000000000}))->capture_default_str();
  command->add_option("--warmup", options->warmup,
                      "Requests served before the baseline of resident memory is taken (default: 2000, or half of "
                      "--requests when that is fewer)")
      ->check(non_negative());
  command->add_option("--rss-tolerance", options->tolerance,
                      "Growth of resident memory past the baseline that fails the run: KiB, or a percentage such as 5%")
      ->capture_default_str();
  command->callback([options, command, &streams, &status] {
    check_llama_options_unused(*command, options->engine);
    if (options->engine.name == "none") {
      throw InputError("--engine none computes no KV row and no logit: a soak compares responses with cold runs, so it "
                       "needs a model");
    }
    check_engine_options(*options);
    options->capacity_given = command->count("--capacity") > 0;
    status = on_every_rank(*options, streams, soak_on, "soak");
  });
}

void add_workload_command(CLI::App& app, const Streams& streams, int& status) {
  auto options = std::make_shared<Options>();
  CLI::App* command = app.add_subcommand("workload", "Print the embedded workload of pfx replay as a JSON Lines trace");
  add_workload_options(*command, *options, 1000000);
  command->callback([options, &streams, &status] {
    check_embedded_workload_capacity(options->workload.capacity);
    const ItemSource next = replay::workload_stream(options->workload);
    std::size_t written = 0;
    for (std::optional<TraceItem> item = next(); item; item = next()) {
      if (const int signal = interrupted_by(); signal != 0) {
        // Standard output is a trace: the note goes to standard error, and the trace stops at a whole line.
        streams.out.flush();
        streams.err << "pfx workload: " << describe_interruption(signal, written, "line") << "\n";
        status = interrupted_status(signal);
        return;
      }
      streams.out << to_trace_line(*item) << "\n";
      ++written;
    }
    streams.out.flush();
    status = exit_ok;
  });
}

}  // namespace pfx::cli
