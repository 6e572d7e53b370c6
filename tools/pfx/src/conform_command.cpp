// `pfx conform`: the engine by name, the budget, the check, and the report as text or JSON
// (docs/cli.md, "pfx conform"; docs/conform.md).

#include <pfx/cli/conform.hpp>

#include <pfx/cli/lane_options.hpp>
#include <pfx/cli/llama_options.hpp>
#include <pfx/cli/options.hpp>
#include <pfx/cli/progress.hpp>
#include <pfx/conform/check.hpp>
#include <pfx/driver/cuda.hpp>
#include <pfx/engines/blocked_attention_engine.hpp>
#include <pfx/engines/host_reference_engine.hpp>
#include <pfx/engines/nondeterministic_engine.hpp>
#include <pfx/engines/reference_engine_on_device.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <bit>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace pfx::cli {
namespace {

using json = nlohmann::ordered_json;

struct ConformOptions {
  std::string engine = "reference";
  std::size_t chunk = driver::ReferenceModelShape{}.chunk;
  std::optional<std::size_t> rule_chunk;
  std::string budget = "default";
  std::optional<std::uint64_t> seed;
  std::optional<std::size_t> max_grid;
  bool json = false;
  bool no_progress = false;
  LlamaOptions llama;  ///< of --engine llama
};

struct NamedEngine {
  std::unique_ptr<driver::Engine> engine;
  std::string description;
};

NamedEngine make_engine(const ConformOptions& o) {
  if (o.engine == "llama") {
    LlamaEngine llama = llama_engine(o.llama, o.chunk);
    return {std::move(llama.engine), std::move(llama.description)};
  }
  const driver::ReferenceModelShape shape{.chunk = o.chunk};
  const std::string model = describe_engine(shape);
  try {
    if (o.engine == "reference") return {std::make_unique<driver::HostReferenceEngine>(shape), "host " + model};
    if (o.engine == "blocked-attention") {
      return {std::make_unique<driver::BlockedAttentionEngine>(shape), "host blocked-attention " + model};
    }
    if (o.engine == "nondeterministic") {
      return {std::make_unique<driver::NondeterministicEngine>(shape), "host nondeterministic " + model};
    }
    if (o.engine == "cuda") {
      const std::string why_not = driver::cuda::unavailable_reason();
      if (!why_not.empty()) throw InputError(fmt::format("--engine cuda: {}", why_not));
      return {std::make_unique<driver::cuda::ReferenceEngineOnDevice>(shape), "CUDA " + model};
    }
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  throw InputError(fmt::format("--engine {}: unknown engine", o.engine));  // CLI11 checked the name
}

json bits(float x) { return fmt::format("0x{:08x}", std::bit_cast<std::uint32_t>(x)); }

json difference_json(const conform::Difference& d) {
  json j;
  if (d.where == conform::Difference::Where::logits) {
    j["where"] = "logits";
    j["logit"] = d.index;
  } else {
    j["where"] = "row";
    j["row"] = d.row;
    j["layer"] = d.layer;
    j["plane"] = d.plane == driver::Plane::key ? "key" : "value";
    j["column"] = d.index;
  }
  j["got"] = d.got;
  j["expected"] = d.expected;
  j["got_bits"] = bits(d.got);
  j["expected_bits"] = bits(d.expected);
  return j;
}

}  // namespace

std::vector<std::string> conform_engine_names() { return {"reference", "cuda", "blocked-attention", "nondeterministic", "llama"}; }

json conform_json(const conform::Report& r) {
  json grids = json::array();
  for (const conform::GridResult& g : r.grids) {
    json grid{{"grid", g.grid}, {"resumes", g.resumes}, {"exact", g.exact()}};
    if (g.mismatch) {
      const conform::Mismatch& m = *g.mismatch;
      grid["mismatch"] = {{"prompt_number", m.prompt_number}, {"prompt", m.prompt}, {"held", m.held},
                          {"offset", m.offset}, {"difference", difference_json(m.difference)}};
    }
    grids.push_back(grid);
  }
  json j{{"type", "conform"}, {"engine", r.engine}, {"chunk", r.chunk}, {"rule_chunk", r.rule_chunk},
         {"vocab", r.vocab}};
  j["budget"] = {{"prompts", r.budget.prompts}, {"max_grid", r.budget.max_grid},
                 {"exhaustive_up_to", r.budget.exhaustive_up_to}, {"sampled_offsets", r.budget.sampled_offsets},
                 {"cold_runs", r.budget.cold_runs}, {"seed", r.budget.seed}};
  j["lengths"] = r.lengths;
  j["prompts"] = r.prompts;
  j["cold_runs"] = r.cold_runs;
  j["deterministic"] = !r.cold_disagreement.has_value();
  if (r.cold_disagreement) {
    const conform::ColdDisagreement& d = *r.cold_disagreement;
    j["cold_disagreement"] = {{"prompt_number", d.prompt_number}, {"prompt", d.prompt}, {"run", d.run},
                              {"difference", difference_json(d.difference)}};
  }
  j["grids"] = grids;
  j["recommended"] = r.recommended ? json(*r.recommended) : json(nullptr);
  j["verdict"] = conform::to_string(r.verdict);
  j["explanation"] = r.explanation();
  j["exit_status"] = conform::exit_status(r.verdict);
  j["prefilled_tokens"] = r.prefilled_tokens;
  j["elapsed_s"] = r.elapsed_s;
  return j;
}

namespace {

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
  const NamedEngine engine = make_engine(o);
  check.engine_name = engine.description;
  const conform::Budget& b = check.budget;
  const std::size_t prompts =
      conform::prompt_lengths(conform::candidate_grids(b, o.chunk, o.rule_chunk.value_or(o.chunk))).size() * b.prompts;
  ProgressBar progress(streams.err, streams.err_is_terminal && !o.no_progress && !o.json, prompts);
  check.progress = [&progress](std::size_t done, std::size_t) { progress.update(done); };
  const conform::Report report = conform::check(*engine.engine, check);
  progress.erase();
  if (o.json) {
    streams.out << conform_json(report).dump() << "\n";
  } else {
    streams.out << conform::to_text(report);
  }
  streams.out.flush();
  return conform::exit_status(report.verdict);
}

}  // namespace

void add_conform_command(CLI::App& app, const Streams& streams, int& status) {
  CLI::App* command = app.add_subcommand(
      "conform", "Check that an engine meets THM-1's premise: on which chunk grid a resume equals a cold run bit "
                 "for bit, and whether the rule's chunk is on it");
  auto options = std::make_shared<ConformOptions>();
  command->add_option("--engine", options->engine, "The engine to check")
      ->check(CLI::IsMember(conform_engine_names()))
      ->capture_default_str();
  command->add_option("--chunk", options->chunk, "The engine's own prefill chunk (its cold runs' grid)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 12))
      ->capture_default_str();
  command->add_option("--rule-chunk", options->rule_chunk, "The chunk the rule would use (default: --chunk)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 12));
  command->add_option("--budget", options->budget, "How much to run: quick, default or thorough")
      ->check(CLI::IsMember(conform::Budget::names()))
      ->capture_default_str();
  command->add_option("--seed", options->seed, "Seed of the prompts, offsets and held tails (default: the budget's, 1)")
      ->check(non_negative());
  command->add_option("--max-grid", options->max_grid,
                      "Largest power-of-two grid tried (default: the budget's; the chunks are tried too)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 12));
  add_llama_options(*command, options->llama);
  command->add_flag("--json", options->json, "Write the report as one JSON object");
  command->add_flag("--no-progress", options->no_progress, "Draw no progress bar");
  command->callback([&streams, &status, options, command] {
    check_llama_options_unused(*command, options->engine);
    status = run_conform(*options, streams);
  });
}

}  // namespace pfx::cli
