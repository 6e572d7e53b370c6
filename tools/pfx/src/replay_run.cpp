// A run of `pfx replay` or `pfx soak` on this process's ranks: the engine, the input checked before
// anything runs, the lane, the loop (pfx::replay), each request and the summary printed as it goes
// (docs/cli.md). A soak is a replay of the workload stream that samples its responses and watches
// memory: the two share their options, their loop and their ending.

#include <pfx/cli/replay_run.hpp>

#include <pfx/cli/engine_option.hpp>
#include <pfx/cli/interrupt.hpp>
#include <pfx/cli/json_kind.hpp>
#include <pfx/cli/progress.hpp>
#include <pfx/cli/replay_report.hpp>
#include <pfx/cli/trace.hpp>
#include <pfx/driver/environment.hpp>
#include <pfx/replay/replay.hpp>
#include <pfx/replay/soak.hpp>
#include <pfx/replay/workload.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pfx::cli {
namespace {

using replay::ItemSource;
using replay::OnRequest;
using replay::ReplaySummary;
using replay::RequestReport;
using replay::RssTolerance;
using replay::SoakSettings;
using replay::SoakSummary;
using replay::TraceItem;

/// The run stops between two requests once SIGINT or SIGTERM arrived (interrupt.hpp).
bool signalled() { return interrupted_by() != 0; }

/// The engine of a run: for shards (--dcp above 1, or ranks under mpirun) its decode-context-parallel
/// form where it has one (make_engine with a Dcp).
ChosenEngine run_engine(const ReplayOptions& o, const engines::ReferenceModelShape& shape, driver::Collective* group) {
  if (o.dcp > 1 || group != nullptr) return make_engine(o.engine, shape, Dcp{{o.dcp, o.interleave}, group});
  return make_engine(o.engine, shape);
}

/// The lane a run serves: enabled and keep_min from the environment (TF_GLM53_PREFIX_CACHE,
/// TF_GLM53_PREFIX_CACHE_MIN; a malformed value throws driver::ConfigError), --keep-min over it, and
/// poisoning on so that a stale read is caught.
driver::LaneOptions lane_options(const ReplayOptions& o) {
  driver::LaneOptions lane{.capacity = o.workload.capacity, .config = driver::config_from_environment(),
                           .rule_chunk = o.rule_chunk, .poison = true};
  if (o.keep_min) lane.config.keep_min = *o.keep_min;
  return lane;
}

struct Input {
  std::string source;  ///< how messages name it
  std::vector<TraceItem> items;
};

/// The input, checked against the lane's vocabulary and capacity; `context`: the model's trained
/// context when the engine has one (the capacity is then that, or --capacity below it).
Input read_input(const ReplayOptions& o, std::size_t context) {
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
      // Appended in two steps: GCC 12 warns (-Wrestrict) of `"\n" + std::string` inlined here.
      if (i > 0) message += "\n";
      message += trace.problems[i].describe(source);
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

/// At most this many failed checks are printed one by one; the summary counts them all.
constexpr std::size_t shown_failures = 10;

}  // namespace

void check_embedded_workload_capacity(std::size_t capacity) {
  if (capacity < 256) {
    throw InputError(fmt::format("--capacity {} is too small for the embedded workload (at least 256)", capacity));
  }
}

int replay_on(const ReplayOptions& options, const Streams& streams, driver::Collective* group) {
  // A model's vocabulary and context are its own: the trace is checked against them, so llama's
  // engine comes first.
  ReplayOptions checked = options;
  const engines::ReferenceModelShape shape{.vocab = options.workload.vocab, .chunk = options.chunk};
  ChosenEngine early;
  if (options.engine.name == "llama") {
    early = run_engine(options, shape, group);
    checked.workload.vocab = early.engine->vocab();
    checked.workload.capacity = lane_capacity(early, options.workload.capacity, options.capacity_given);
  }
  const driver::LaneOptions lane = lane_options(checked);
  Input input = read_input(checked, early.context);  // every line checked before anything runs
  const ChosenEngine engine = early.engine ? std::move(early) : run_engine(options, shape, group);
  const replay::ReplaySettings settings{.lane = lane, .verify = options.verify, .fault_rate = options.faults,
                                        .seed = options.fault_seed.value_or(options.workload.seed),
                                        .dcp = options.dcp, .interleave = options.interleave, .collective = group,
                                        .stop = signalled};

  const std::size_t requests = replay::count_requests(input.items);
  if (lane.rule_chunk && *lane.rule_chunk % options.chunk != 0) {  // THM-1's premise does not hold: say so first
    streams.err << fmt::format("pfx replay: warning: --rule-chunk {} is not a multiple of the engine's chunk {}: resumes "
                               "may start off the prefill grid and differ from a cold run (THM-1)\n",
                               *lane.rule_chunk, options.chunk);
  }
  if (!options.json) {
    const std::string faults =
        options.faults > 0 ? fmt::format(", faults {} (seed {})", options.faults, settings.seed) : "";
    const std::string shards =
        options.dcp > 1 || group != nullptr
            ? fmt::format(", {} shards (interleave {}), {}", options.dcp, options.interleave,
                          group != nullptr ? fmt::format("{} ranks", group->size()) : "one process")
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

int soak_on(const ReplayOptions& given, const Streams& streams, driver::Collective* group) {
  ReplayOptions options = given;
  SoakSettings& settings = options.soak;
  settings.workload = options.workload;
  settings.tolerance = RssTolerance::parse(options.tolerance, "--rss-tolerance");
  // The default warm-up shrinks to fit a short run; one asked for explicitly must fit as it is.
  settings.warmup = options.warmup.value_or(std::min(settings.warmup, settings.workload.requests / 2));
  if (settings.warmup >= settings.workload.requests) {
    throw InputError(fmt::format("--warmup {} leaves no request to watch memory on: it must be less than --requests {}",
                                 settings.warmup, settings.workload.requests));
  }
  const ChosenEngine engine = run_engine(options, {.vocab = settings.workload.vocab, .chunk = options.chunk}, group);
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
  settings.replay.collective = group;

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

}  // namespace pfx::cli
