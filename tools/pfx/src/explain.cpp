#include <pfx/cli/explain.hpp>
#include <pfx/cli/json_kind.hpp>
#include <pfx/cli/command.hpp>
#include <pfx/driver/environment.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace pfx::cli {
namespace {

using nlohmann::json;

/// An input's JSON, and its name for messages: "--record" (inline) or "--record record.json".
struct Input {
  std::string label;
  json value;

  [[noreturn]] void fail(std::string_view field, std::string_view message) const {
    if (field.empty()) throw InputError(fmt::format("{}: {}", label, message));
    throw InputError(fmt::format("{}: field \"{}\": {}", label, field, message));
  }

  /// The ids: the value itself when it is an array, else its `field`, of an object like `shape`.
  std::vector<token> ids(const std::string& field, std::string_view shape) const {
    const bool whole = value.is_array();
    if (!whole && !value.is_object()) {
      fail("", fmt::format("expected an array of token ids or an object {}, got {}", shape, kind_of(value)));
    }
    if (!whole && !value.contains(field)) fail(field, "missing");
    std::vector<token> ids;
    const std::string problem = read_token_ids(whole ? value : value[field], ids);
    if (!problem.empty()) fail(whole ? "" : field, problem);
    return ids;
  }
};

/// Inline JSON starts with `[` or `{` (after blanks); anything else names a file.
Input read(std::string_view option, std::string_view argument) {
  const std::size_t first = argument.find_first_not_of(" \t\r\n");
  const bool is_inline = first != std::string_view::npos && (argument[first] == '[' || argument[first] == '{');
  Input input{is_inline ? std::string(option) : fmt::format("{} {}", option, argument), {}};
  const std::string text = is_inline ? std::string(argument)
                                     : read_file(input.label, std::string(argument),
                                                 "; inline JSON starts with [ or {, such as [1,2,3]");
  try {
    input.value = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number such as 1e500
    input.fail("", malformed(e));
  }
  return input;
}

/// One line of the explanation: a bound of the rule (or keep_min), its value, and what it keeps.
struct Row {
  std::string_view name;
  std::size_t value = 0;
  std::string_view invariant;
  std::string meaning;
  bool tightest = false;  ///< the Decision's bound
};

/// The prefill step in words: "256", or "2^64 - 1 (one step)".
std::string step_words(std::size_t step) {
  return step == SIZE_MAX ? std::string("2^64 - 1 (one step)") : std::to_string(step);
}

/// The prefill step and, when there is one, the admission padding: "prefill step 256" or "prefill
/// step 256, admission padding 3" (a padded resume at len(prompt) - 1 is not one token alone).
std::string step_and_padding(const Config& config) {
  std::string words = fmt::format("prefill step {}", step_words(config.prefill_step));
  if (config.admission_padding != 0) words += fmt::format(", admission padding {}", config.admission_padding);
  return words;
}

/// The bounds in decide's order (ties go to the earlier; the prefill step's only when one is
/// configured), then keep_min: each value as core computed it. Empty when no bound was consulted
/// (reuse off, or nothing held: INV-6).
std::vector<Row> rows_of(const Decision& d, const Bounds& b, const Config& config) {
  if (d.bound == Bound::none) return {};
  const std::size_t chunk = config.chunk;
  const std::string keep = d.reason == Reason::below_keep_min
                               ? fmt::format("{} rows are too few to be worth reusing: offset 0", b.stepped)
                           : d.reason == Reason::reused ? fmt::format("{} >= {}: worth reusing", b.stepped, b.keep_min)
                                                        : std::string("nothing to reuse");
  std::vector<Row> rows = {
      {name(Bound::common_prefix), b.common_prefix, "INV-1", "lcp(ids, prompt): past it the rows hold other tokens",
       d.bound == Bound::common_prefix},
      {name(Bound::canonical_end), b.canonical_end, "INV-2",
       config.decode_rows_exact ? "len(ids): decode rows are exact, so every row held may be reused"
                                : "rows from here on were written by decode",
       d.bound == Bound::canonical_end},
      {name(Bound::one_token_left), b.one_token_left, "INV-3",
       "len(prompt) - 1: the engine prefills at least one token", d.bound == Bound::one_token_left},
      {name(Bound::alignment), b.aligned, "INV-5",
       fmt::format("the smallest above, rounded down to a multiple of chunk {}", chunk), d.bound == Bound::alignment},
  };
  if (config.prefill_step != 0) {
    rows.push_back({name(Bound::prefill_step), b.stepped, "INV-12",
                    fmt::format("alignment, lowered so a resume ends with a one-token step iff the cold run does "
                                "({})",
                                step_and_padding(config)),
                    d.bound == Bound::prefill_step});
  }
  rows.push_back({"keep_min", b.keep_min, "INV-4", keep, false});
  return rows;
}

/// explain's answer: the text and the JSON are both written from it.
struct Explanation {
  Config config;
  HeldRecord record;
  std::size_t prompt_tokens = 0;
  Decision decision;
  std::vector<Row> rows;
};

std::string to_text(const Explanation& e) {
  const Decision& d = e.decision;
  std::string text = fmt::format("record: {} ids, canonical_end {}\nprompt: {} tokens\nconfig: reuse {}, keep_min {}, "
                                 "chunk {}{}{}\n\n",
                                 e.record.ids.size(), e.record.canonical_end, e.prompt_tokens,
                                 e.config.enabled ? "on" : "off", e.config.keep_min, e.config.chunk,
                                 e.config.prefill_step == 0 ? std::string() : ", " + step_and_padding(e.config),
                                 e.config.decode_rows_exact ? ", decode rows exact" : "");
  if (e.rows.empty()) {
    text += fmt::format("no bound was consulted: {} (INV-6)\n",
                        d.reason == Reason::disabled ? "reuse is off" : "nothing is held");
  } else {
    text += fmt::format("  {:<15} {:>9}  {:<6} {}\n", "bound", "value", "keeps", "meaning");
    for (const Row& r : e.rows) {
      text += fmt::format("  {:<15} {:>9}  {:<6} {}{}\n", r.name, r.value, r.invariant, r.meaning,
                          r.tightest ? "   <- tightest" : "");
    }
  }
  return text + fmt::format("\noffset {}: {}, decided by {}\n", d.offset, name(d.reason), name(d.bound));
}

json to_json(const Explanation& e) {
  json bounds = json::array();
  for (const Row& r : e.rows) {
    bounds.push_back({{"name", r.name}, {"value", r.value}, {"invariant", r.invariant}, {"tightest", r.tightest}});
  }
  return {{"offset", e.decision.offset},
          {"reason", name(e.decision.reason)},
          {"bound", name(e.decision.bound)},
          {"common_prefix", e.decision.common_prefix},
          {"record", {{"ids", e.record.ids.size()}, {"canonical_end", e.record.canonical_end}}},
          {"prompt_tokens", e.prompt_tokens},
          {"config",
           {{"enabled", e.config.enabled},
            {"keep_min", e.config.keep_min},
            {"chunk", e.config.chunk},
            {"prefill_step", e.config.prefill_step},
            {"admission_padding", e.config.admission_padding},
            {"decode_rows_exact", e.config.decode_rows_exact}}},
          {"bounds", bounds}};
}

/// The real machine decides, so that a refused configuration or record is reported in its words.
Explanation explain(const ExplainOptions& options) {
  Explanation e;
  e.config = explain_config(options);
  e.record = read_record("--record", options.record, options.canonical_end);
  const std::vector<token> prompt = read_prompt("--prompt", options.prompt);
  Machine machine;
  if (const Outcome o = machine.configure(e.config); !o.accepted()) {
    throw InputError(fmt::format("--chunk {}: {}", e.config.chunk, describe(o.refusal)));  // INV-9
  }
  if (const Outcome o = machine.record(e.record.ids, e.record.canonical_end); !o.accepted()) {
    throw InputError(fmt::format("{}: canonical_end {} with {} ids: {}",
                                 options.canonical_end ? "--canonical-end" : "--record", e.record.canonical_end,
                                 e.record.ids.size(), describe(o.refusal)));  // INV-9
  }
  e.prompt_tokens = prompt.size();
  e.decision = machine.query(prompt).decision;
  const Record& held = machine.held();
  e.rows = rows_of(e.decision, bounds(e.config, held.ids, held.canonical_end, prompt), e.config);
  return e;
}

}  // namespace

HeldRecord read_record(std::string_view option, std::string_view argument, std::optional<std::size_t> canonical_end) {
  const Input input = read(option, argument);
  HeldRecord record{input.ids("ids", R"({"ids": [...], "canonical_end": n})"), 0};
  record.canonical_end = canonical_end.value_or(record.ids.size());  // the option wins
  if (input.value.is_array()) return record;
  const auto end = input.value.find("canonical_end");
  if (end == input.value.end() && !canonical_end) {
    input.fail("canonical_end", "missing (give it here, or with --canonical-end)");
  }
  if (end != input.value.end()) {
    const std::optional<std::uint64_t> n = as_count(*end);
    if (!n) input.fail("canonical_end", fmt::format("expected a non-negative integer, got {}", kind_of(*end)));
    record.canonical_end = canonical_end.value_or(*n);
  }
  return record;
}

std::vector<token> read_prompt(std::string_view option, std::string_view argument) {
  return read(option, argument).ids("prompt", R"({"prompt": [...]})");
}

Config explain_config(const ExplainOptions& options) {
  const Config environment = driver::config_from_environment();
  Config config;
  config.enabled = options.enabled.value_or(environment.enabled) && !options.disabled;
  config.keep_min = options.keep_min.value_or(environment.keep_min);
  config.chunk = options.chunk.value_or(default_chunk);
  config.prefill_step = options.prefill_step;
  config.admission_padding = options.admission_padding;
  config.decode_rows_exact = options.decode_rows_exact;
  return config;
}

int run_explain(const ExplainOptions& options, const Streams& streams) {
  const Explanation e = explain(options);
  streams.out << (options.json ? to_json(e).dump(2) + "\n" : to_text(e));
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
  explain->add_option("--prefill-step", options->prefill_step,
                      "The engine's prefill step, where it computes a one-token step otherwise (INV-12); 0: none")
      ->default_str("0")
      ->check(non_negative());
  explain->add_option("--admission-padding", options->admission_padding,
                      "Rows the engine adds to an admission that leaves one token to compute (vLLM: "
                      "num_speculative_tokens when speculating), so that resume is not a one-token step "
                      "(INV-12); 0: none")
      ->default_str("0")
      ->check(non_negative());
  explain->add_flag("--decode-rows-exact", options->decode_rows_exact,
                    "The engine writes a decode row bit-equal to the row a cold prefill of the same tokens writes, "
                    "so that rows decode wrote may be reused (INV-2); off: never past canonical_end");
  explain->add_option("--keep-min", options->keep_min,
                      "Shortest reuse worth taking (default: TF_GLM53_PREFIX_CACHE_MIN, or 64)")
      ->check(non_negative());
  CLI::Option* enabled = explain->add_option("--enabled", options->enabled,
                                             "Reuse on (1) or off (0) (default: TF_GLM53_PREFIX_CACHE, else 1)");
  enabled->check(CLI::IsMember({"0", "1"}));
  explain->add_flag("--disabled", options->disabled, "Deprecated: the same as --enabled 0")->excludes(enabled);
  explain->add_flag("--json", options->json, "Write the explanation as JSON");
  explain->callback([&streams, &status, options] {
    if (options->disabled) streams.err << "pfx explain: warning: --disabled is deprecated; it is --enabled 0\n";
    status = run_explain(*options, streams);
  });
}

}  // namespace pfx::cli
