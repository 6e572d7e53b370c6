// `pfx replay` and `pfx workload`: options, the engine, the trace, and the table or JSON output.

#include <pfx/cli/command.hpp>
#include <pfx/cli/interrupt.hpp>
#include <pfx/cli/lane_options.hpp>
#include <pfx/cli/engine_option.hpp>
#include <pfx/cli/options.hpp>
#include <pfx/cli/progress.hpp>
#include <pfx/cli/replay.hpp>
#include <pfx/cli/summary_json.hpp>
#include <pfx/cli/trace.hpp>
#include <pfx/cli/workload.hpp>
#include <pfx/driver/cuda.hpp>
#include <pfx/driver/environment.hpp>
#include <pfx/driver/errors.hpp>
#ifdef PFX_CLI_MPI
#include <pfx/driver/mpi_collective.hpp>
#endif

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace pfx::cli {
namespace {

using json = nlohmann::ordered_json;  // keys in the order written: "type" first

/// The options `pfx replay` and `pfx workload` share, with their defaults (docs/cli.md).
struct ModelOptions {
  std::size_t chunk = default_chunk;      ///< the reference engine's prefill chunk = the rule's chunk
  std::size_t vocab = std::size_t{1} << 18;  ///< 262144 ids: any common tokenizer's fit
  std::size_t capacity = 32768;           ///< KV rows, allocated once
};

struct ReplayOptions {
  ModelOptions model;
  std::optional<std::string> trace;       ///< none: the embedded workload; "-": standard input
  std::optional<std::size_t> keep_min;    ///< default: TF_GLM53_PREFIX_CACHE_MIN, else 64
  std::optional<std::size_t> rule_chunk;  ///< the rule's alignment; default: the engine's chunk (THM-1)
  EngineChoice engine;                    ///< --engine (engine_option.hpp)
  std::string backend;                    ///< --backend, a deprecated spelling of --engine reference|cuda
  bool verify = false;
  double faults = 0;
  std::uint64_t seed = 253;
  std::optional<std::uint64_t> fault_seed;  ///< of the injected failures; default: seed
  std::size_t dcp = 1;                     ///< shards of the KV state (under mpirun: one per rank)
  std::size_t interleave = 1;
  std::size_t requests = 100;              ///< of the embedded workload
  bool json = false;
  bool no_progress = false;
};

void add_model_options(CLI::App& command, ModelOptions& model) {
  add_model_options(command, ModelFields{model.chunk, model.vocab, model.capacity});
}

/// The workload `pfx replay` runs without a trace.
WorkloadOptions workload_options(const ModelOptions& model, std::uint64_t seed, std::size_t requests) {
  check_embedded_workload_capacity(model.capacity);
  return {.seed = seed, .vocab = model.vocab, .requests = requests, .capacity = model.capacity};
}

struct Input {
  std::string source;  ///< how messages name it
  std::vector<TraceItem> items;
};

Input read_input(const ReplayOptions& options) {
  if (!options.trace) {
    return {fmt::format("embedded workload (seed {})", options.seed),
            embedded_workload(workload_options(options.model, options.seed, options.requests))};
  }
  const TraceLimits limits{.vocab = options.model.vocab, .capacity = options.model.capacity};
  Trace trace;
  const std::string& path = *options.trace;
  if (path.empty()) throw InputError("cannot read the trace '': the path is empty (without a trace argument, the embedded workload runs)");
  std::string source = path;
  if (path == "-") {
    source = "<stdin>";
    trace = read_trace(std::cin, limits);
  } else {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw InputError(fmt::format("cannot read {}: it is a directory", source));
    std::ifstream in(path);
    if (!in) throw InputError(fmt::format("cannot read {}: {}", source, std::strerror(errno)));
    trace = read_trace(in, limits);
    if (in.bad()) throw InputError(fmt::format("cannot read {}: {}", source, std::strerror(errno)));
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
  if (count_requests(trace.items) == 0) {
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
void check_engine_options(const ReplayOptions& options) {
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
void apply_deprecated_backend(ReplayOptions& options, bool engine_given, std::ostream& err) {
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

double ratio(double cold, double resumed) { return resumed > 0 ? cold / resumed : 0; }

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

/// `interrupted`: a signal stopped the run, which then did not pass whatever it found so far.
json summary_json(const ReplaySummary& s, const ReplayOptions& o, const driver::LaneOptions& lane,
                  const Input& input, const std::string& engine, bool interrupted) {
  json j{{"type", "summary"}};
  add_summary_counters(j, s);
  j["divergences"] = s.divergences;
  j["elapsed_s"] = s.elapsed_s;
  j["interrupted"] = interrupted;
  if (const std::string why = s.unchecked(o.verify); !why.empty()) j["unchecked"] = why;
  j["ok"] = !interrupted && s.passed(o.verify);
  json settings{{"trace", input.source}};
  add_lane_settings(settings, engine, o.model.chunk, o.model.vocab, lane);
  settings["rule_chunk"] = lane.rule_chunk != 0 ? lane.rule_chunk : o.model.chunk;
  settings["verify"] = o.verify;
  settings["faults"] = o.faults;
  settings["seed"] = o.seed;
  settings["fault_seed"] = o.fault_seed.value_or(o.seed);
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

std::string table_header(bool verify) {
  std::string h = fmt::format("{:>5} {:>5} {:<13} {:>7} {:>7} {:<16} {:<14} {:>7} {:>9}", "#", "line", "kind", "prompt",
                              "offset", "reason", "bound", "prefill", "ttft ms");
  if (verify) h += fmt::format(" {:>9} {}", "cold ms", "bit-exact");
  return h;
}

std::string table_row(const RequestReport& r, bool verify) {
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

std::string summary_text(const ReplaySummary& s, bool verify, bool interrupted) {
  std::string text = fmt::format(
      "{} requests ({} failed{}), {} clears; {} prompt tokens: {} reused ({}), {} prefilled; {:.1f} s\n", s.requests,
      s.failures, s.stale_reads > 0 ? fmt::format(", {} by a stale-row read", s.stale_reads) : "", s.clears,
      s.prompt_tokens, s.reused_tokens, percent(s.reused_tokens, s.prompt_tokens), s.prefill_tokens, s.elapsed_s);
  if (verify) {
    text += fmt::format("verify: {} responses compared with a cold run, {} mismatches; prefill {:.1f} ms cold vs {:.1f} ms "
                        "resumed ({:.2f}x), time to first token {:.2f}x\n",
                        s.verified, s.mismatches, s.cold_prefill_ms, s.prefill_ms, ratio(s.cold_prefill_ms, s.prefill_ms),
                        ratio(s.cold_ttft_ms, s.ttft_ms));
  }
  if (s.divergences > 0) text += fmt::format("{} requests served cold because the ranks' records differed\n", s.divergences);
  if (s.mismatches > 0) {
    const FirstMismatch& first = s.first_mismatch;
    text += fmt::format("MISMATCH: {} responses differ from their cold run; the first is request {} (line {}{}): {} "
                        "(exit status 1)\n",
                        s.mismatches, first.request, first.line, first.label.empty() ? "" : ", " + escaped(first.label), first.what);
  }
  if (s.stale_reads > 0) text += "FAILED: the engine read poisoned KV rows (exit status 1)\n";
  // An interrupted run is judged by its own line (exit 130/143); it did not get to compare the rest.
  if (const std::string why = s.unchecked(verify); !why.empty() && !interrupted) text += "FAILED: " + why + " (exit status 1)\n";
  return text;
}

int replay_on(const ReplayOptions& options, const Streams& streams, driver::Collective* ranks);

/// Under mpirun, one rank per process: every rank replays, rank 0 prints, and every rank exits with
/// the worst status of all (docs/driver.md, "The sharded lane").
int run_replay(const ReplayOptions& options, const Streams& streams) {
#ifdef PFX_CLI_MPI
  if (driver::launched_by_mpi()) {
    int argc = 0;
    char** argv = nullptr;
    const driver::MpiSession session(argc, argv);
    driver::MpiCollective world;
    std::ostringstream discarded;
    const Streams quiet{discarded, streams.err, false};
    ReplayOptions per_rank = options;
    per_rank.dcp = world.size();
    int status = exit_internal;
    std::string error;  // every rank reads the same input, so a bad one fails on every rank
    try {
      status = replay_on(per_rank, world.rank() == 0 ? streams : quiet, &world);
    } catch (const InputError& e) {
      status = exit_bad_input;
      error = e.what();
    } catch (const driver::ConfigError& e) {
      status = exit_bad_input;
      error = e.what();
    }
    // Rank 0 says why before any rank exits: mpirun ends the job when the first rank exits non-zero.
    if (!error.empty() && world.rank() == 0) streams.err << "pfx replay: " << error << "\n" << std::flush;
    const std::vector<std::uint64_t> mine{static_cast<std::uint64_t>(status)};
    std::vector<std::uint64_t> all(world.size());
    world.all_gather(mine, all);
    std::uint64_t worst = 0;
    for (const std::uint64_t s : all) worst = std::max(worst, s);
    return static_cast<int>(worst);
  }
#endif
  return replay_on(options, streams, nullptr);
}

int replay_on(const ReplayOptions& options, const Streams& streams, driver::Collective* ranks) {
  driver::LaneOptions lane = lane_options(options.model.capacity, options.keep_min);
  lane.rule_chunk = options.rule_chunk.value_or(0);
  // A model's vocabulary is its own: the trace is checked against it, so llama's engine comes first.
  ReplayOptions checked = options;
  const engines::ReferenceModelShape shape{.vocab = options.model.vocab, .chunk = options.model.chunk};
  ChosenEngine early;
  if (options.engine.name == "llama") {
    early = make_engine(options.engine, shape);
    checked.model.vocab = early.engine->vocab();
  }
  const Input input = read_input(checked);  // every line checked before anything runs
  const ChosenEngine engine = early.engine ? std::move(early) : make_engine(options.engine, shape);
  const ReplaySettings settings{.lane = lane, .verify = options.verify, .fault_rate = options.faults,
                                .seed = options.fault_seed.value_or(options.seed),
                                .dcp = options.dcp, .interleave = options.interleave, .collective = ranks};

  const std::size_t requests = count_requests(input.items);
  if (lane.rule_chunk % options.model.chunk != 0) {  // THM-1's premise does not hold: say so first
    streams.err << fmt::format("pfx replay: warning: --rule-chunk {} is not a multiple of the engine's chunk {}: resumes "
                               "may start off the prefill grid and differ from a cold run (THM-1)\n",
                               lane.rule_chunk, options.model.chunk);
  }
  if (!options.json) {
    streams.out << fmt::format("pfx replay: {}: {} requests\n", input.source, requests)
                << fmt::format("lane: {}{}{}{}\n", describe_lane(engine.description, lane), options.verify ? ", verify" : "",
                               options.faults > 0 ? fmt::format(", faults {} (seed {})", options.faults, options.fault_seed.value_or(options.seed)) : "",
                               options.dcp > 1 || ranks != nullptr
                                   ? fmt::format(", {} shards (interleave {}), {}", options.dcp, options.interleave,
                                                 ranks != nullptr ? fmt::format("{} ranks", ranks->size()) : "one process")
                                   : "")
                << table_header(options.verify) << "\n"
                << std::flush;
  }
  ProgressBar progress(streams.err, streams.err_is_terminal && !options.no_progress, requests, "requests");
  ReplayListener listener;
  listener.request = [&](const RequestReport& r) {
    progress.erase();
    if (options.json) {
      streams.out << request_json(r).dump() << "\n";
    } else {
      streams.out << table_row(r, options.verify) << "\n";
    }
    streams.out.flush();
    progress.update(r.number);
  };
  const ReplaySummary summary = replay(input.items, *engine.engine, settings, listener);
  progress.erase();
  const int signal = interrupted_by();
  if (options.json) {
    streams.out << summary_json(summary, checked, lane, input, engine.description, signal != 0).dump() << "\n";
  } else {
    streams.out << summary_text(summary, options.verify, signal != 0);
  }
  if (signal != 0) {
    streams.out << (options.json ? nlohmann::ordered_json{{"type", "interrupted"}, {"signal", signal},
                                                          {"requests", summary.requests}}.dump() + "\n"
                                 : describe_interruption(signal, summary.requests) + "\n");
    streams.out.flush();
    return interrupted_status(signal);
  }
  streams.out.flush();
  return summary.passed(options.verify) ? exit_ok : exit_mismatch;
}

}  // namespace

void add_replay_command(CLI::App& app, const Streams& streams, int& status) {
  auto options = std::make_shared<ReplayOptions>();
  CLI::App* command = app.add_subcommand(
      "replay", "Serve a trace (or the embedded workload) through a lane on the reference engine; report what was reused");
  command->add_option("trace", options->trace,
                      "JSON Lines trace: {\"prompt\": [ids], \"max_new_tokens\": n} or {\"op\": \"clear\"} per line; "
                      "- reads standard input; without it, the embedded workload");
  add_model_options(*command, options->model);
  add_keep_min_option(*command, options->keep_min);
  command->add_option("--rule-chunk", options->rule_chunk,
                      "Alignment of the rule's offsets (default: --chunk). The engine still prefills on --chunk's grid: a "
                      "rule chunk that is not a multiple of it shows THM-1's counterexample under --verify")
      ->check(non_negative())
      ->check(CLI::Range(std::size_t{1}, std::numeric_limits<std::size_t>::max()));
  add_engine_option(*command, options->engine);
  CLI::Option* backend =
      command->add_option("--backend", options->backend, "Deprecated: --engine reference (host) or --engine cuda")
          ->check(CLI::IsMember({"host", "cuda", "auto"}));
  command->add_flag("--verify", options->verify, "Also serve each request cold and compare bit for bit");
  add_faults_option(*command, options->faults);
  command->add_option("--seed", options->seed, "Seed of the injected failures and of the embedded workload")
      ->capture_default_str()
      ->check(non_negative());
  command->add_option("--fault-seed", options->fault_seed,
                      "Seed of the injected failures alone (default: --seed), to replay the same workload under other faults")
      ->check(non_negative());
  CLI::Option* requests = command->add_option("--requests", options->requests, "Requests of the embedded workload")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1000000}))->capture_default_str();
  command->add_option("--dcp", options->dcp, "Shards of the KV state, driven by this process (under mpirun: one per rank)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1024}))->capture_default_str();
  command->add_option("--interleave", options->interleave, "Consecutive positions per shard: row p lives on shard (p / interleave) mod dcp")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))->capture_default_str();
  command->add_flag("--json", options->json, "One JSON object per request, then a summary object");
  command->add_flag("--no-progress", options->no_progress, "No progress bar, even on a terminal");
  command->callback([options, requests, backend, command, &streams, &status] {
    if (options->trace && requests->count() > 0) {
      throw InputError("--requests sizes the embedded workload; it cannot be given with a trace");
    }
    if (backend->count() > 0) apply_deprecated_backend(*options, command->count("--engine") > 0, streams.err);
    check_llama_options_unused(*command, options->engine);
    check_engine_options(*options);
    status = run_replay(*options, streams);
  });
}

void add_workload_command(CLI::App& app, const Streams& streams, int& status) {
  struct Options {
    ModelOptions model;
    std::uint64_t seed = 253;
    std::size_t requests = 100;
  };
  auto options = std::make_shared<Options>();
  CLI::App* command = app.add_subcommand("workload", "Print the embedded workload of pfx replay as a JSON Lines trace");
  add_model_options(*command, options->model);
  command->add_option("--seed", options->seed, "Seed of the workload")
      ->capture_default_str()
      ->check(non_negative());
  command->add_option("--requests", options->requests, "Requests to generate")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1000000}))->capture_default_str();
  command->callback([options, &streams, &status] {
    std::size_t written = 0;
    for (const TraceItem& item : embedded_workload(workload_options(options->model, options->seed, options->requests))) {
      if (const int signal = interrupted_by(); signal != 0) {
        // Standard output is a trace: the note goes to standard error, and the trace stops at a whole line.
        streams.out.flush();
        streams.err << "pfx workload: " << describe_interruption(signal, written, "lines") << "\n";
        status = interrupted_status(signal);
        return;
      }
      streams.out << to_trace_line(item) << "\n";
      ++written;
    }
    streams.out.flush();
    status = exit_ok;
  });
}

}  // namespace pfx::cli
