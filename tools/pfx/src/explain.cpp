// pfx explain: the decision for a held record and a prompt, and the bound that decided it.

#include <pfx/cli/explain.hpp>
#include <pfx/cli/options.hpp>
#include <pfx/cli/explain_input.hpp>
#include <pfx/driver/environment.hpp>
#include <pfx/driver/lane.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <ostream>
#include <vector>

namespace pfx::cli {
namespace {

/// One line of the explanation: a bound of the rule (or keep_min), its value, and what it keeps.
struct Row {
  std::string_view name;
  std::size_t value = 0;
  std::string_view invariant;
  std::string meaning;
  bool tightest = false;  ///< the Decision's bound
};

/// The four bounds in decide's order (ties go to the earlier), then keep_min: each value as core
/// computed it. Empty when no bound was consulted (reuse off, or nothing held: INV-6).
std::vector<Row> rows_of(const Decision& d, const Bounds& b, std::size_t chunk) {
  if (d.bound == Bound::none) return {};
  const std::string keep = d.reason == Reason::below_keep_min
                               ? fmt::format("{} rows are too few to be worth reusing: offset 0", b.aligned)
                           : d.reason == Reason::reused ? fmt::format("{} >= {}: worth reusing", b.aligned, b.keep_min)
                                                        : std::string("nothing to reuse");
  return {
      {name(Bound::common_prefix), b.common_prefix, "INV-1", "lcp(ids, prompt): past it the rows hold other tokens",
       d.bound == Bound::common_prefix},
      {name(Bound::canonical_end), b.canonical_end, "INV-2", "rows from here on were written by decode",
       d.bound == Bound::canonical_end},
      {name(Bound::one_token_left), b.one_token_left, "INV-3", "len(prompt) - 1: the engine prefills at least one token",
       d.bound == Bound::one_token_left},
      {name(Bound::alignment), b.aligned, "INV-5",
       fmt::format("the smallest above, rounded down to a multiple of chunk {}", chunk), d.bound == Bound::alignment},
      {"keep_min", b.keep_min, "INV-4", keep, false},
  };
}

void print_text(std::ostream& out, const Config& config, const HeldRecord& record, std::size_t prompt_size,
                const Decision& d, const std::vector<Row>& rows) {
  out << fmt::format("record: {} ids, canonical_end {}\n", record.ids.size(), record.canonical_end);
  out << fmt::format("prompt: {} tokens\n", prompt_size);
  out << fmt::format("config: reuse {}, keep_min {}, chunk {}\n\n", config.enabled ? "on" : "off", config.keep_min,
                     config.chunk);
  if (rows.empty()) {
    out << fmt::format("no bound was consulted: {} (INV-6)\n",
                       d.reason == Reason::disabled ? "reuse is off" : "nothing is held");
  } else {
    out << fmt::format("  {:<15} {:>9}  {:<6} {}\n", "bound", "value", "keeps", "meaning");
    for (const Row& r : rows) {
      out << fmt::format("  {:<15} {:>9}  {:<6} {}{}\n", r.name, r.value, r.invariant, r.meaning,
                         r.tightest ? "   <- tightest" : "");
    }
  }
  out << fmt::format("\noffset {}: {}, decided by {}\n", d.offset, name(d.reason), name(d.bound));
}

void print_json(std::ostream& out, const Config& config, const HeldRecord& record, std::size_t prompt_size,
                const Decision& d, const std::vector<Row>& rows) {
  nlohmann::json report;
  report["offset"] = d.offset;
  report["reason"] = name(d.reason);
  report["bound"] = name(d.bound);
  report["common_prefix"] = d.common_prefix;
  report["record"] = {{"ids", record.ids.size()}, {"canonical_end", record.canonical_end}};
  report["prompt_tokens"] = prompt_size;
  report["config"] = {{"enabled", config.enabled}, {"keep_min", config.keep_min}, {"chunk", config.chunk}};
  report["bounds"] = nlohmann::json::array();
  for (const Row& r : rows) {
    report["bounds"].push_back(
        {{"name", r.name}, {"value", r.value}, {"invariant", r.invariant}, {"tightest", r.tightest}});
  }
  out << report.dump(2) << '\n';
}

}  // namespace

Config explain_config(const ExplainOptions& options) {
  const Config environment = driver::config_from_environment();
  Config config;
  config.enabled = options.enabled.value_or(environment.enabled) && !options.disabled;
  config.keep_min = options.keep_min.value_or(environment.keep_min);
  config.chunk = options.chunk.value_or(default_chunk);
  return config;
}

int run_explain(const ExplainOptions& options, const Streams& streams) {
  const Config config = explain_config(options);
  const HeldRecord record = read_record("--record", options.record, options.canonical_end);
  const std::vector<token> prompt = read_prompt("--prompt", options.prompt);

  // The real machine decides, so that a refused configuration or record is reported in its words.
  Machine machine;
  if (const Outcome o = machine.configure(config); !o.accepted()) {
    throw InputError(fmt::format("--chunk {}: {}", config.chunk, describe(o.refusal)));  // INV-9
  }
  if (const Outcome o = machine.record(record.ids, record.canonical_end); !o.accepted()) {
    throw InputError(fmt::format("{}: canonical_end {} with {} ids: {}",
                                 options.canonical_end ? "--canonical-end" : "--record", record.canonical_end,
                                 record.ids.size(), describe(o.refusal)));  // INV-9
  }
  const Outcome answer = machine.query(prompt);
  const Decision& d = answer.decision;
  const Record& held = machine.held();
  const std::vector<Row> rows = rows_of(d, bounds(config, held.ids, held.canonical_end, prompt), config.chunk);
  if (options.json) {
    print_json(streams.out, config, record, prompt.size(), d, rows);
  } else {
    print_text(streams.out, config, record, prompt.size(), d, rows);
  }
  return exit_ok;
}

void add_explain_command(CLI::App& app, const Streams& streams, int& status) {
  CLI::App* explain =
      app.add_subcommand("explain", "Print the decision for a held record and a prompt, and the bound that decided it");
  auto options = std::make_shared<ExplainOptions>();
  explain->add_option("--record", options->record,
                      "The held record: {\"ids\": [...], \"canonical_end\": n} or [ids...], inline or a file")
      ->required();
  explain->add_option("--prompt", options->prompt, "The prompt: [ids...] or {\"prompt\": [...]}, inline or a file")
      ->required();
  explain->add_option("--canonical-end", options->canonical_end, "Replaces the record's canonical_end")
      ->check(non_negative());  // CLI11 would wrap -1 round to 2^64 - 1
  explain->add_option("--chunk", options->chunk, "The engine's prefill chunk")
      ->default_str(std::to_string(default_chunk))
      ->check(non_negative());
  explain->add_option("--keep-min", options->keep_min,
                      "Shortest reuse worth taking (default: TF_GLM53_PREFIX_CACHE_MIN, or 64)")
      ->check(non_negative());
  CLI::Option* enabled =
      explain->add_option("--enabled", options->enabled, "Reuse on (1) or off (0) (default: TF_GLM53_PREFIX_CACHE, else 1)")
          ->check(CLI::IsMember({"0", "1"}));
  explain->add_flag("--disabled", options->disabled, "Deprecated: the same as --enabled 0")->excludes(enabled);
  explain->add_flag("--json", options->json, "Write the explanation as JSON");
  explain->callback([&streams, &status, options] {
    if (options->disabled) streams.err << "pfx explain: warning: --disabled is deprecated; it is --enabled 0\n";
    status = run_explain(*options, streams);
  });
}

}  // namespace pfx::cli
