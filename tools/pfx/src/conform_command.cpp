// `pfx conform`: the engine by name, the budget, the check, and the report as text or JSON
// (docs/cli.md, "pfx conform"; docs/conform.md).

#include <pfx/cli/command.hpp>
#include <pfx/cli/engine_option.hpp>
#include <pfx/cli/interrupt.hpp>
#include <pfx/cli/progress.hpp>
#include <pfx/conform/check.hpp>
#include <pfx/driver/lane.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace pfx::cli {
namespace {

struct ConformOptions {
  EngineChoice engine;
  std::size_t chunk = default_chunk;
  std::optional<std::size_t> rule_chunk;
  std::size_t prefill_step = 0;  ///< the rule's prefill step (Config::prefill_step; 0: none)
  std::string budget = "default";
  std::optional<std::uint64_t> seed;
  std::optional<std::size_t> max_grid;
  std::size_t dcp = 1;         ///< ranks of the decode-context-parallel form (1: none)
  std::size_t interleave = 1;
  bool decode_rows = false;    ///< the decode rows finding (conform::CheckOptions::decode_rows)
  std::string certify;        ///< where to write the configuration's certificate (--engine llama); "": none
  bool json = false;
  bool no_progress = false;
};

/// What a run a signal stopped prints: how far it got, and no verdict.
int report_interruption(const ConformOptions& o, const Streams& streams, std::size_t done, std::size_t prompts) {
  const int signal = interrupted_by();
  streams.out << (o.json ? nlohmann::ordered_json{{"type", "interrupted"}, {"signal", signal}, {"prompts", done},
                                                  {"of", prompts}, {"verdict", nullptr}, {"ok", false}}.dump()
                         : describe_interruption(signal, done, "prompt"))
              << "\n" << std::flush;
  return interrupted_status(signal);
}

/// Writes the certificate, then says in one line what it proves; a file that cannot be written is an
/// error that names it (nothing half-written is left as a certificate).
void write_certificate(const std::string& path, const std::string& text, const Streams& streams) {
  const std::string partial = path + ".partial";
  {
    std::ofstream file(partial, std::ios::binary | std::ios::trunc);
    file << text;
    file.close();
    if (!file) {
      std::remove(partial.c_str());
      throw InputError(fmt::format("--certify {}: cannot write the certificate there", path));
    }
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    std::remove(partial.c_str());
    throw InputError(fmt::format("--certify {}: cannot write the certificate there", path));
  }
  const nlohmann::json proved = nlohmann::json::parse(text).at("proved");
  streams.err << fmt::format("pfx conform: certificate written to {}: decode rows exact: {}; exact grids: {}\n", path,
                             proved.at("decode rows equal").get<bool>() ? "yes" : "no (llama-server refuses it)",
                             proved.at("exact grids").dump());
}

int run_conform(const ConformOptions& o, const Streams& streams) {
  conform::CheckOptions check;
  try {
    check.budget = conform::Budget::named(o.budget);
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("--budget: {}", e.what()));
  }
  if (o.seed) check.budget.seed = *o.seed;
  if (o.max_grid) check.budget.max_grid = *o.max_grid;
  check.rule_chunk = o.rule_chunk;
  check.prefill_step = o.prefill_step;
  check.decode_rows = o.decode_rows;
  const ChosenEngine engine = o.dcp > 1 ? make_engine(o.engine, {.chunk = o.chunk}, Dcp{{o.dcp, o.interleave}, nullptr})
                                        : make_engine(o.engine, {.chunk = o.chunk});
  check.engine_name = engine.description;
  check.serve_together = engine.serve_together;
  if (!o.certify.empty()) {  // a certificate that cannot be written is said before the check runs, not after
    const std::string partial = o.certify + ".partial";
    if (!std::ofstream(partial, std::ios::binary | std::ios::trunc)) {
      throw InputError(fmt::format("--certify {}: cannot write the certificate there", o.certify));
    }
    std::remove(partial.c_str());
  }
  const conform::Budget& b = check.budget;
  const std::vector<std::size_t> lengths =
      conform::prompt_lengths(conform::candidate_grids(b, o.chunk, driver::resolved_rule_chunk(o.rule_chunk, o.chunk)));
  // The check's KV states hold its longest prompt and a chunk past it (with --decode-rows, its decoded
  // runs where they are longer): a model's context must hold them.
  const std::size_t rule_chunk = driver::resolved_rule_chunk(o.rule_chunk, o.chunk);
  const std::size_t rows = conform::check_capacity(lengths, o.chunk, rule_chunk, o.decode_rows);
  if (engine.context != 0 && rows > engine.context) {
    throw InputError(fmt::format("the check's longest prompt, {} tokens, {}and a chunk of {} past it need {} KV rows, "
                                 "more than the model's trained context, {} (lower --max-grid or --chunk{})",
                                 lengths.back(),
                                 rows > lengths.back() + o.chunk ? "its decoded runs, " : "", o.chunk,
                                 rows, engine.context, o.decode_rows ? ", or --rule-chunk" : ""));
  }
  const std::size_t prompts = lengths.size() * b.prompts;
  ProgressBar progress(streams.err, streams.err_is_terminal && !o.no_progress && !o.json, prompts, "prompts");
  std::size_t done = 0;
  check.progress = [&progress, &done](std::size_t prompts_done, std::size_t) {
    done = prompts_done;
    progress.update(prompts_done);
    stop_if_interrupted();  // between two prompts: conform::check unwinds, nothing half-judged is reported
  };
  std::optional<conform::Report> report;
  try {
    report = conform::check(*engine.engine, check);
  } catch (const Interrupted&) {
    progress.erase();
    if (!o.json) streams.out << fmt::format("pfx conform: {} of {} prompts checked; no verdict\n", done, prompts);
    return report_interruption(o, streams, done, prompts);
  }
  progress.erase();
  streams.out << (o.json ? conform::to_json(*report) + "\n" : conform::to_text(*report)) << std::flush;
  if (!o.certify.empty()) write_certificate(o.certify, engine.certify(conform::to_json(*report)), streams);
  // A verdict that compared nothing vouches for nothing (conform::check never gives one: defence in depth).
  if (report->comparisons() == 0 && conform::exit_status(report->verdict) == exit_ok) {
    streams.err << "pfx conform: FAILED: no run was compared with a cold run: the check compared nothing\n";
    return exit_mismatch;
  }
  // A signal after the last prompt: the report is whole, but the run was asked to stop.
  if (interrupted_by() != 0) return report_interruption(o, streams, done, prompts);
  return conform::exit_status(report->verdict);
}

}  // namespace

void add_conform_command(CLI::App& app, const Streams& streams, int& status) {
  CLI::App* command = app.add_subcommand(
      "conform", "Check that an engine meets THM-1's premise: on which chunk grid a resume equals a cold run bit "
                 "for bit, and whether the rule's chunk is on it");
  auto options = std::make_shared<ConformOptions>();
  add_engine_option(*command, options->engine);
  command->add_option("--chunk", options->chunk, "The engine's own prefill chunk (its cold runs' grid)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 12))
      ->capture_default_str();
  command->add_option("--rule-chunk", options->rule_chunk, "The chunk the rule would use (default: --chunk)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 12));
  command->add_option("--prefill-step", options->prefill_step,
                      "The rule's prefill step (Config::prefill_step, INV-12): offsets the rule never resumes at "
                      "under it are skipped and counted, not resumed; 0: none")
      ->check(non_negative())
      ->capture_default_str();
  command->add_option("--budget", options->budget, "How much to run: quick, default or thorough")
      ->check(CLI::IsMember(conform::Budget::names()))
      ->capture_default_str();
  command->add_option("--seed", options->seed, "Seed of the prompts, offsets and held tails (default: the budget's, 1)")
      ->check(non_negative());
  command->add_option("--max-grid", options->max_grid,
                      "Largest power-of-two grid tried (default: the budget's; the chunks are tried too)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 12));
  command->add_option("--dcp", options->dcp,
                      "Check the engine's decode-context-parallel form over this many ranks, in one process "
                      "(--engine reference or cuda)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1024}))->capture_default_str();
  command->add_option("--interleave", options->interleave, "With --dcp: consecutive positions per rank")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))->capture_default_str();
  command->add_flag("--decode-rows", options->decode_rows,
                    "Also find whether rows the engine's decode wrote equal a cold prefill's of the same tokens "
                    "(compared byte for byte, rescored and resumed from): what --decode-rows-exact in the rule "
                    "would lean on");
  command->add_option("--certify", options->certify,
                      "With --engine llama: also write the certificate of this configuration to FILE, what "
                      "llama-server --pfx-certificate takes (implies --decode-rows)");
  command->add_flag("--json", options->json, "Write the report as one JSON object");
  command->add_flag("--no-progress", options->no_progress, "Draw no progress bar");
  command->callback([&streams, &status, options, command] {
    check_llama_options_unused(*command, options->engine);
    if (options->engine.name == "none") {
      throw InputError("--engine none computes no KV row and no logit: conform compares them, so it needs a model");
    }
    if (!options->certify.empty()) {
      if (options->engine.name != "llama") {
        throw InputError(fmt::format("--certify: --engine {} has no certificate (--engine llama has: the one "
                                     "llama-server --pfx-certificate reads)", options->engine.name));
      }
      options->decode_rows = true;  // a certificate says whether decode rows are exact: always measured
    }
    if (options->dcp > 1 && !has_dcp_form(options->engine.name)) {
      throw InputError(fmt::format("--dcp {}: --engine {} has no decode-context-parallel form (--engine reference "
                                   "and --engine cuda have)",
                                   options->dcp, options->engine.name));
    }
    status = run_conform(*options, streams);
  });
}

}  // namespace pfx::cli
