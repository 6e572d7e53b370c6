// `pfx soak`: options, the host engine, and the summary as text or JSON (docs/cli.md, "pfx soak").

#include <pfx/cli/command.hpp>
#include <pfx/cli/interrupt.hpp>
#include <pfx/cli/lane_options.hpp>
#include <pfx/cli/engine_option.hpp>
#include <pfx/cli/options.hpp>
#include <pfx/cli/progress.hpp>
#include <pfx/cli/soak.hpp>
#include <pfx/cli/summary_json.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>

namespace pfx::cli {
namespace {

using json = nlohmann::ordered_json;

struct SoakOptions {
  SoakSettings settings;
  std::size_t chunk = default_chunk;
  std::optional<std::size_t> keep_min;  ///< default: TF_GLM53_PREFIX_CACHE_MIN, else 64
  std::optional<std::size_t> warmup;    ///< default: the settings' 2000, shrunk to half of --requests
  std::optional<std::uint64_t> fault_seed;  ///< default: --seed
  std::string tolerance = "4096";
  bool json = false;
  bool no_progress = false;
  EngineChoice engine;               ///< --engine (engine_option.hpp); not none: a soak compares
};

/// At most this many failed checks are printed one by one; the summary counts them all.
constexpr std::size_t shown_failures = 10;

std::string memory_text(const SoakSummary& s, const SoakSettings& settings) {
  if (!s.baseline) {
    return fmt::format("memory: {} KiB resident at the end; the run ended within the warm-up of {} requests, so "
                       "nothing was compared\n",
                       s.final_kib, settings.warmup);
  }
  std::string text = fmt::format(
      "memory: {} KiB resident after {} requests of warm-up; at most {} KiB after it, {} KiB at the end: +{} KiB "
      "({} samples)",
      s.baseline->kib, s.baseline->requests, s.peak_kib, s.final_kib, s.growth_kib(), s.samples.size());
  if (!s.memory_checked) return text + "; not checked: AddressSanitizer holds freed memory in quarantine\n";
  const std::string tolerance = settings.tolerance.percent ? fmt::format(" ({})", settings.tolerance.describe()) : "";
  return text + fmt::format(", {} the tolerance of {} KiB{}\n", s.memory_flat() ? "within" : "OVER", s.allowed_kib,
                            tolerance);
}

std::string summary_text(const SoakSummary& s, const SoakSettings& settings, bool interrupted) {
  const ReplaySummary& r = s.replay;
  std::string text = fmt::format("requests: {} ({} failed: {} injected, {} by a stale-row read), {} clears\n",
                                 r.requests, r.failures, s.injected, r.stale_reads, r.clears);
  text += fmt::format("verify: {} responses compared with a cold run, {} mismatches\n", r.verified, r.mismatches);
  text += fmt::format("reuse: {} of {} prompt tokens reused ({}), {} prefilled\n", r.reused_tokens, r.prompt_tokens,
                      percent(r.reused_tokens, r.prompt_tokens), r.prefill_tokens);
  text += memory_text(s, settings);
  text += fmt::format("time: {:.1f} s\n", r.elapsed_s);
  if (r.mismatches > 0) text += "MISMATCH: some responses differ from their cold run (exit status 1)\n";
  if (r.stale_reads > 0) text += "FAILED: the engine read poisoned KV rows (exit status 1)\n";
  if (!s.memory_flat()) text += "FAILED: resident memory grew past the tolerance after the warm-up (exit status 1)\n";
  if (interrupted) return text;  // judged by the INTERRUPTED line that follows: the run did not finish
  if (const std::string why = r.unchecked(true); !why.empty()) text += "FAILED: " + why + " (exit status 1)\n";
  if (s.ok()) text += "pfx soak: every check passed\n";
  return text;
}

json summary_json(const SoakSummary& s, const SoakOptions& o, const driver::LaneOptions& lane, const std::string& engine,
                  bool interrupted) {
  const ReplaySummary& r = s.replay;
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
  json j{{"type", "soak"}};
  add_summary_counters(j, r);
  j["injected"] = s.injected;
  j["verified"] = r.verified;
  j["memory"] = memory;
  j["elapsed_s"] = r.elapsed_s;
  j["interrupted"] = interrupted;
  if (const std::string why = r.unchecked(true); !why.empty()) j["unchecked"] = why;
  j["ok"] = !interrupted && s.ok();
  json settings;
  add_lane_settings(settings, engine, o.chunk, o.settings.workload.vocab, lane);
  settings["faults"] = o.settings.replay.fault_rate;
  settings["seed"] = o.settings.workload.seed;
  settings["fault_seed"] = o.settings.replay.seed;
  settings["verify_every"] = o.settings.verify_every;
  settings["warmup"] = o.settings.warmup;
  settings["rss_tolerance"] = o.settings.tolerance.describe();
  j["settings"] = settings;
  return j;
}

std::string failed_check(const RequestReport& r) {
  const std::string what = r.error.empty() ? "differs from its cold run: " + r.mismatch : "read a poisoned row: " + r.error;
  return fmt::format("request {} ({}, {} prompt tokens, offset {}) {}\n", r.number, r.label, r.prompt_tokens,
                     r.decision.offset, what);
}

int run_soak(SoakOptions& options, const Streams& streams) {
  SoakSettings& settings = options.settings;
  settings.tolerance = RssTolerance::parse(options.tolerance, "--rss-tolerance");
  // The default warm-up shrinks to fit a short run; one asked for explicitly must fit as it is.
  settings.warmup = options.warmup.value_or(std::min(settings.warmup, settings.workload.requests / 2));
  if (settings.warmup >= settings.workload.requests) {
    throw InputError(fmt::format("--warmup {} leaves no request to watch memory on: it must be less than --requests {}",
                                 settings.warmup, settings.workload.requests));
  }
  check_embedded_workload_capacity(settings.workload.capacity);
  driver::LaneOptions& lane = settings.replay.lane;
  lane = lane_options(settings.workload.capacity, options.keep_min);
  settings.replay.seed = options.fault_seed.value_or(settings.workload.seed);

  const engines::ReferenceModelShape shape{.vocab = settings.workload.vocab, .chunk = options.chunk};
  ChosenEngine chosen = make_engine(options.engine, shape);
  std::unique_ptr<driver::Engine> engine = std::move(chosen.engine);
  const std::string description = std::move(chosen.description);
  settings.workload.vocab = engine->vocab();  // llama's: the workload's tokens are the model's
  const std::size_t requests = settings.workload.requests;
  if (!options.json) {
    streams.out << fmt::format("pfx soak: {} requests of the embedded workload (seed {}), faults {} per engine call\n",
                               requests, settings.workload.seed, settings.replay.fault_rate)
                << fmt::format("lane: {}\n", describe_lane(description, lane))
                << fmt::format("verify: every {}th request, every request after a failure and the last, against a "
                               "cold run\n",
                               settings.verify_every)
                << fmt::format("memory: baseline after {} requests, then a sample every {}; tolerance {}\n",
                               settings.warmup, settings.memory_every, settings.tolerance.describe())
                << std::flush;
  }

  ProgressBar progress(streams.err, streams.err_is_terminal && !options.no_progress, requests, "requests");
  std::size_t failed_checks = 0;
  SoakListener listener;
  listener.request = [&](const RequestReport& r) {
    const bool failed = (!r.error.empty() && !r.injected) || r.bitexact == std::optional<bool>(false);
    if (failed && !options.json && ++failed_checks <= shown_failures) {
      progress.erase();
      streams.out << failed_check(r) << std::flush;
    }
    progress.update(r.number);
  };
  const SoakSummary summary = soak(*engine, settings, listener);
  progress.erase();
  const int signal = interrupted_by();
  if (options.json) {
    streams.out << summary_json(summary, options, lane, description, signal != 0).dump() << "\n";
  } else {
    if (failed_checks > shown_failures) streams.out << fmt::format("... and {} more\n", failed_checks - shown_failures);
    streams.out << summary_text(summary, settings, signal != 0);
  }
  if (signal != 0) {
    streams.out << (options.json ? nlohmann::ordered_json{{"type", "interrupted"}, {"signal", signal},
                                                          {"requests", summary.replay.requests}}.dump() + "\n"
                                 : describe_interruption(signal, summary.replay.requests) + "\n");
    streams.out.flush();
    return interrupted_status(signal);
  }
  streams.out.flush();
  return summary.ok() ? exit_ok : exit_mismatch;
}

}  // namespace

void add_soak_command(CLI::App& app, const Streams& streams, int& status) {
  auto options = std::make_shared<SoakOptions>();
  SoakSettings& s = options->settings;
  CLI::App* command = app.add_subcommand(
      "soak", "Serve a long stream of mixed traffic with injected failures through one lane; check a sample of the "
              "responses against cold runs bit for bit, and that resident memory stays flat");
  command->add_option("--requests", s.workload.requests, "Requests to serve")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1000000000}))->capture_default_str();
  add_faults_option(*command, s.replay.fault_rate);
  command->add_option("--verify-every", s.verify_every,
                      "Compare every Nth request, and every request after a failure, with a cold run")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1000000000}))->capture_default_str();
  command->add_option("--seed", s.workload.seed, "Seed of the traffic and of the injected failures")
      ->capture_default_str()
      ->check(non_negative());
  add_model_options(*command, ModelFields{options->chunk, s.workload.vocab, s.workload.capacity});
  add_keep_min_option(*command, options->keep_min);
  command->add_option("--warmup", options->warmup,
                      "Requests served before the baseline of resident memory is taken (default: 2000, or half of "
                      "--requests when that is fewer)")
      ->check(non_negative());
  command->add_option("--fault-seed", options->fault_seed,
                      "Seed of the injected failures alone (default: --seed), to replay the same traffic under other faults")
      ->check(non_negative());
  command->add_option("--rss-tolerance", options->tolerance,
                      "Growth of resident memory past the baseline that fails the run: KiB, or a percentage such as 5%")
      ->capture_default_str();
  add_engine_option(*command, options->engine);
  command->add_flag("--json", options->json, "One JSON object with the summary");
  command->add_flag("--no-progress", options->no_progress, "No progress bar, even on a terminal");
  command->callback([options, command, &streams, &status] {
    check_llama_options_unused(*command, options->engine);
    if (options->engine.name == "none") {
      throw InputError("--engine none computes no KV row and no logit: a soak compares responses with cold runs, so it "
                       "needs a model");
    }
    status = run_soak(*options, streams);
  });
}

}  // namespace pfx::cli
