// `pfx replay`, `pfx soak` and `pfx workload` on the command line: their options and the checks of
// them, and where a run goes: one process, or every rank of an mpirun job (docs/cli.md). The run is
// replay_run.hpp's, its report replay_report.hpp's.

#include <pfx/cli/command.hpp>
#include <pfx/cli/engine_option.hpp>
#include <pfx/cli/interrupt.hpp>
#include <pfx/cli/replay_options.hpp>
#include <pfx/cli/replay_run.hpp>
#include <pfx/cli/trace.hpp>
#include <pfx/driver/cuda.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/replay/workload.hpp>
#include <pfx/token.hpp>
#ifdef PFX_CLI_MPI
#include <pfx/driver/mpi_collective.hpp>
#endif

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace pfx::cli {
namespace {

using replay::ItemSource;
using replay::SoakSettings;
using replay::TraceItem;

/// --chunk, --vocab, --capacity, --seed and --requests (at most `most`), with their ranges (a value
/// outside one is bad input, exit status 2).
void add_workload_options(CLI::App& command, ReplayOptions& o, std::size_t most) {
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
void add_run_options(CLI::App& command, ReplayOptions& o) {
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

/// A run (replay_on, soak_on) on this process's ranks: none in one process.
using RunOn = int (*)(const ReplayOptions&, const Streams&, driver::Collective*);

/// Under mpirun, one rank per process: every rank runs `run` with --dcp the number of ranks, rank 0
/// prints, and every rank exits with the worst status of all (docs/driver.md, "The sharded lane").
/// In one process, `run` without ranks.
int on_every_rank(const ReplayOptions& options, const Streams& streams, RunOn run, const char* command) {
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

}  // namespace

void add_replay_command(CLI::App& app, const Streams& streams, int& status) {
  auto options = std::make_shared<ReplayOptions>();
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
  auto options = std::make_shared<ReplayOptions>();
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
  auto options = std::make_shared<ReplayOptions>();
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
