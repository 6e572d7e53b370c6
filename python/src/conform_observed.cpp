// pfx._native.conform_observed: a conformance report built from what a check written in Python saw
// of an engine it cannot drive chunk by chunk (vLLM, through its own prefix cache:
// pfx.integrations.vllm.conform), judged by the one C++ verdict (pfx::conform::decide) and printed by
// the one writer of text and JSON (pfx::conform::to_text, to_json), as `pfx conform` prints its own.
// With it, the budgets and prompt lengths that check uses are conform's own (budget.hpp).

#include "conform_observed.hpp"
#include "convert.hpp"

#include <pfx/conform/budget.hpp>
#include <pfx/conform/report.hpp>

#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace pfx::python {
namespace {

using conform::Difference;
using conform::Mismatch;

constexpr const char* who = "pfx._native.conform_observed";

/// `object` as a dict; TypeError naming `what` when it is not one.
py::dict dict_of(py::handle object, const std::string& what) {
  if (!py::isinstance<py::dict>(object)) raise(PyExc_TypeError, std::string(who) + ": " + what + " must be a dict");
  return py::reinterpret_borrow<py::dict>(object);
}

/// `object[key]`, a dict's entry; ValueError naming `what` and the key when it is missing.
py::handle entry(py::handle object, const char* key, const std::string& what) {
  const py::dict dict = dict_of(object, what);
  if (!dict.contains(key)) raise(PyExc_ValueError, std::string(who) + ": " + what + " has no '" + key + "'");
  return dict[key];
}

std::size_t count_of(py::handle object, const char* key, const std::string& what) {
  return count(entry(object, key, what), (what + "['" + key + "']").c_str());
}

std::vector<token> token_list(py::handle value, const std::string& argument) {
  Tokens ids(value, argument.c_str());
  const std::span<const token> all = ids.all();
  return {all.begin(), all.end()};  // the span may live in storage the next conversion reuses
}

std::vector<token> tokens_of(py::handle object, const char* key, const std::string& what) {
  return token_list(entry(object, key, what), what + "['" + key + "']");
}

float float_of(py::handle object, const char* key, const std::string& what) {
  const py::handle value = entry(object, key, what);
  if (!py::isinstance<py::float_>(value) && !py::isinstance<py::int_>(value)) {
    raise(PyExc_TypeError, std::string(who) + ": " + what + "['" + key + "'] must be a number");
  }
  return value.cast<float>();
}

/// A difference in what an engine served: {"where": "generated" or "logprob", "step", "got", "expected"}.
Difference difference_of(py::handle object, const std::string& what) {
  const std::string where = py::str(entry(object, "where", what));
  Difference d;
  if (where == conform::to_string(Difference::Where::generated)) {
    d.where = Difference::Where::generated;
  } else if (where == conform::to_string(Difference::Where::logprob)) {
    d.where = Difference::Where::logprob;
  } else {
    raise(PyExc_ValueError, std::string(who) + ": " + what + "['where'] is '" + where +
                                "': expected 'generated' or 'logprob' (a difference in what the engine served)");
  }
  d.index = count_of(object, "step", what);
  d.got = float_of(object, "got", what);
  d.expected = float_of(object, "expected", what);
  return d;
}

Mismatch mismatch_of(py::handle object, const std::string& what) {
  return Mismatch{.prompt_number = count_of(object, "prompt_number", what),
                  .prompt = tokens_of(object, "prompt", what),
                  .held = tokens_of(object, "held", what),
                  .offset = count_of(object, "offset", what),
                  .difference = difference_of(entry(object, "difference", what), what + "['difference']")};
}

/// Refuses a key of `object` (a dict) other than `known`: a misspelt optional key would otherwise be
/// read as absent.
void known_keys(py::handle object, std::initializer_list<const char*> known, const std::string& what) {
  std::optional<py::handle> unknown;
  for (const auto& item : dict_of(object, what)) {
    const py::handle key = item.first;
    const bool expected = py::isinstance<py::str>(key) && std::any_of(known.begin(), known.end(), [&](const char* k) {
                            return key.cast<std::string>() == k;
                          });
    if (!expected) {
      unknown = key;
      break;
    }
  }
  if (!unknown) return;
  std::string names;
  for (const char* k : known) names.append(names.empty() ? "'" : ", '").append(k).append("'");
  std::string message = std::string(who) + ": " + what + " has an unknown key ";
  message.append(py::repr(*unknown).cast<std::string>()).append(": expected ").append(names);
  raise(PyExc_ValueError, message);
}

std::optional<Mismatch> optional_mismatch(py::handle object, const std::string& what) {
  const py::handle value = entry(object, "mismatch", what);
  if (value.is_none()) return std::nullopt;
  return mismatch_of(value, what + "['mismatch']");
}

/// A grid's result: {"grid", "resumes", "mismatch"}, and "skipped" (0 when absent).
conform::GridResult grid_of(py::handle object, const std::string& what) {
  known_keys(object, {"grid", "resumes", "skipped", "mismatch"}, what);
  const bool has_skipped = dict_of(object, what).contains("skipped");
  return conform::GridResult{.grid = count_of(object, "grid", what),
                             .resumes = count_of(object, "resumes", what),
                             .skipped = has_skipped ? count_of(object, "skipped", what) : 0,
                             .mismatch = optional_mismatch(object, what)};
}

/// The batching finding: {"batches", "mismatch": None or {"prompt_number", "prompt", "beside", "difference"}}.
conform::Batching batching_of(py::handle object) {
  const std::string what = "batching";
  known_keys(object, {"batches", "mismatch"}, what);
  conform::Batching b{.batches = count_of(object, "batches", what), .mismatch = std::nullopt};
  const py::handle mismatch = entry(object, "mismatch", what);
  if (mismatch.is_none()) return b;
  const std::string where = what + "['mismatch']";
  known_keys(mismatch, {"prompt_number", "prompt", "beside", "difference"}, where);
  conform::BatchMismatch m{.prompt_number = count_of(mismatch, "prompt_number", where),
                           .prompt = tokens_of(mismatch, "prompt", where),
                           .beside = {},
                           .difference = difference_of(entry(mismatch, "difference", where), where + "['difference']")};
  const py::handle beside = entry(mismatch, "beside", where);
  if (!py::isinstance<py::list>(beside) && !py::isinstance<py::tuple>(beside)) {
    raise(PyExc_TypeError, std::string(who) + ": " + where + "['beside'] must be a list of prompts");
  }
  for (const py::handle prompt : py::iter(beside)) {
    m.beside.push_back(token_list(prompt, where + "['beside'][" + std::to_string(m.beside.size()) + "]"));
  }
  // A batch holds the request and at least one other, and the mismatch was found in one of the batches.
  if (m.beside.empty()) raise(PyExc_ValueError, std::string(who) + ": " + where + "['beside'] is empty: no batch");
  if (b.batches == 0) raise(PyExc_ValueError, std::string(who) + ": " + what + " has a mismatch but 0 batches");
  b.mismatch = std::move(m);
  return b;
}

/// The decode rows' finding: {"resumes", "mismatch", "canonical_end", "alone", "batched", "joining",
/// "batch_sizes", "rescored", "rescoring_differs", "kv_blocks", "kv_blocks_differ"}; each resume compared
/// was served one of the three ways, a batch holds at least two, and no more logprobs differ from their
/// rescoring than were rescored, nor blocks of K and V rows than were compared.
conform::DecodeRows decode_rows_of(py::handle object) {
  const std::string what = "decode_rows";
  known_keys(object, {"resumes", "mismatch", "canonical_end", "alone", "batched", "joining", "batch_sizes",
                      "rescored", "rescoring_differs", "kv_blocks", "kv_blocks_differ"}, what);
  conform::DecodeRows d{.resumes = count_of(object, "resumes", what),
                        .mismatch = optional_mismatch(object, what),
                        .canonical_end = count_of(object, "canonical_end", what),
                        .alone = count_of(object, "alone", what),
                        .batched = count_of(object, "batched", what),
                        .joining = count_of(object, "joining", what),
                        .batch_sizes = {},
                        .rescored = count_of(object, "rescored", what),
                        .rescoring_differs = count_of(object, "rescoring_differs", what),
                        .kv_blocks = count_of(object, "kv_blocks", what),
                        .kv_blocks_differ = count_of(object, "kv_blocks_differ", what)};
  if (d.rescoring_differs > d.rescored) {
    raise(PyExc_ValueError, std::string(who) + ": " + what + ": " + std::to_string(d.rescoring_differs) +
                                " rescored logprobs differ, of " + std::to_string(d.rescored) + " rescored");
  }
  if (d.kv_blocks_differ > d.kv_blocks) {
    raise(PyExc_ValueError, std::string(who) + ": " + what + ": " + std::to_string(d.kv_blocks_differ) +
                                " blocks of K and V rows differ, of " + std::to_string(d.kv_blocks) + " compared");
  }
  if (d.alone + d.batched + d.joining != d.resumes) {
    raise(PyExc_ValueError, std::string(who) + ": " + what + ": " + std::to_string(d.alone) + " alone, " +
                                std::to_string(d.batched) + " batched and " + std::to_string(d.joining) +
                                " joining are not its " + std::to_string(d.resumes) + " resumes");
  }
  for (const py::handle size : py::iter(entry(object, "batch_sizes", what))) {
    const std::size_t n = count(size, (what + "['batch_sizes'][]").c_str());
    if (n < 2 || (!d.batch_sizes.empty() && n <= d.batch_sizes.back())) {
      raise(PyExc_ValueError, std::string(who) + ": " + what + "['batch_sizes'] must be sizes of at least 2, "
                                  "ascending, each once");
    }
    d.batch_sizes.push_back(n);
  }
  return d;
}

/// The premise `name` names (`what` says where it came from in the error).
conform::Premise premise_of(const std::string& name, const std::string& what) {
  for (const conform::Premise p : {conform::Premise::rows_written, conform::Premise::finite_logits,
                                   conform::Premise::logits_depend_on_tokens}) {
    if (name == conform::to_string(p)) return p;
  }
  raise(PyExc_ValueError, std::string(who) + ": " + what + " names '" + name +
                              "': expected 'rows written', 'finite logits' or 'logits depend on tokens'");
}

conform::Budget budget_of(py::handle object) {
  conform::Budget b{.prompts = count_of(object, "prompts", "budget"),
                    .max_grid = count_of(object, "max_grid", "budget"),
                    .exhaustive_up_to = count_of(object, "exhaustive_up_to", "budget"),
                    .sampled_offsets = count_of(object, "sampled_offsets", "budget"),
                    .cold_runs = count_of(object, "cold_runs", "budget"),
                    .seed = count_of(object, "seed", "budget")};
  try {
    b.validate();
  } catch (const std::invalid_argument& e) {
    raise(PyExc_ValueError, std::string(who) + ": " + e.what());
  }
  return b;
}

py::dict budget_dict(const conform::Budget& b) {
  py::dict d;
  d["prompts"] = b.prompts;
  d["max_grid"] = b.max_grid;
  d["exhaustive_up_to"] = b.exhaustive_up_to;
  d["sampled_offsets"] = b.sampled_offsets;
  d["cold_runs"] = b.cold_runs;
  d["seed"] = b.seed;
  return d;
}

}  // namespace

void add_conform_observed(py::module_& m) {
  py::class_<conform::DecodeRows>(m, "ConformDecodeRows",
                                  "Whether rows decode wrote can be reused: resumes past a prompt's end, compared "
                                  "with cold runs (docs/engines.md, \"vLLM\").")
      .def_readonly("resumes", &conform::DecodeRows::resumes)
      .def_property_readonly("reusable", &conform::DecodeRows::reusable)
      .def_readonly("mismatch", &conform::DecodeRows::mismatch)
      .def_readonly("canonical_end", &conform::DecodeRows::canonical_end,
                    "with a mismatch: the held run's prompt length; its rows from there on were decoded")
      .def_readonly("alone", &conform::DecodeRows::alone, "resumes served alone")
      .def_readonly("batched", &conform::DecodeRows::batched, "resumes served in one batch with other resumes")
      .def_readonly("joining", &conform::DecodeRows::joining,
                    "resumes served as two requests, one joining the other mid-decode")
      .def_readonly("batch_sizes", &conform::DecodeRows::batch_sizes,
                    "the sizes of the batches served, each once, ascending")
      .def_readonly("rescored", &conform::DecodeRows::rescored,
                    "logprobs decode computed, compared bit for bit with a cold prefill's rescoring")
      .def_readonly("rescoring_differs", &conform::DecodeRows::rescoring_differs,
                    "of them, those that differ from the rescoring")
      .def_readonly("kv_blocks", &conform::DecodeRows::kv_blocks,
                    "blocks of K and V rows holding a row decode wrote (each layer's apart), compared byte for byte "
                    "with a cold prefill's")
      .def_readonly("kv_blocks_differ", &conform::DecodeRows::kv_blocks_differ,
                    "of them, those whose bytes differ");
  py::class_<conform::BatchMismatch>(m, "ConformBatchMismatch",
                                     "A request whose answer depends on what is batched beside it: the prompt served "
                                     "alone vs in one batch with `beside`; difference: got in the batch, expected alone.")
      .def_readonly("prompt_number", &conform::BatchMismatch::prompt_number)
      .def_readonly("prompt", &conform::BatchMismatch::prompt)
      .def_readonly("beside", &conform::BatchMismatch::beside, "the other prompts of its batch")
      .def_readonly("difference", &conform::BatchMismatch::difference);
  py::class_<conform::Batching>(m, "ConformBatching",
                                "Whether a request's answer depends on what is batched beside it: batches of cold "
                                "requests, each answer compared with the request served alone.")
      .def_readonly("batches", &conform::Batching::batches)
      .def_property_readonly("independent", &conform::Batching::independent)
      .def_readonly("mismatch", &conform::Batching::mismatch);
  // ConformReport is add_conform's; what only a check of an engine's output fills (decode_rows and
  // batching: None unless it tried them; skip_reason: None unless it skipped offsets) is added here,
  // beside the one check that fills it.
  const py::object report = m.attr("ConformReport");
  const py::object property = py::module_::import("builtins").attr("property");
  report.attr("decode_rows") = property(py::cpp_function(
      [](const conform::Report& r) { return r.decode_rows; }, py::is_method(report)));
  report.attr("batching") = property(py::cpp_function(
      [](const conform::Report& r) { return r.batching; }, py::is_method(report)));
  report.attr("skip_reason") = property(py::cpp_function(
      [](const conform::Report& r) {
        return r.skip_reason.empty() ? std::optional<std::string>() : std::optional<std::string>(r.skip_reason);
      },
      py::is_method(report)));
  m.def(
      "conform_budget",
      [](const std::string& name) {
        try {
          return budget_dict(conform::Budget::named(name));
        } catch (const std::invalid_argument& e) {
          raise(PyExc_ValueError, e.what());
        }
      },
      py::arg("name"), "The named budget's fields as a dict (conform/include/pfx/conform/budget.hpp).");
  m.def(
      "conform_prompt_lengths",
      [](const std::vector<std::size_t>& grids) { return conform::prompt_lengths(grids); }, py::arg("grids"),
      "The prompt lengths the conformance check runs for these candidate grids (docs/conform.md).");
  m.def(
      "conform_offsets",
      [](py::handle n, py::handle grid, py::handle budget, py::handle seed) {
        const std::size_t length = count(n, "n");
        const std::size_t g = count(grid, "grid");
        if (length < 1 || g < 1) raise(PyExc_ValueError, "conform_offsets: n and grid must be at least 1");
        std::mt19937_64 random(count(seed, "seed"));
        return conform::resume_offsets(length, g, budget_of(budget), random);
      },
      py::arg("n"), py::arg("grid"), py::arg("budget"), py::arg("seed"),
      "The offsets the conformance check resumes a prompt of n tokens at on `grid` (docs/conform.md), the "
      "sampled ones drawn from `seed`.");
  m.def(
      "conform_skip_reason",
      [](py::handle prefill_step) { return conform::prefill_step_skip_reason(count(prefill_step, "prefill_step")); },
      py::arg("prefill_step"),
      "Why the check skips the offsets pfx's rule, told the engine's prefill step, never resumes at: pfx "
      "conform's own words (2^64 - 1: one step, whatever the length).");
  m.def(
      "prefill_step_words",
      [](py::handle prefill_step) { return conform::prefill_step_words(count(prefill_step, "prefill_step")); },
      py::arg("prefill_step"),
      "A prefill step in pfx conform's words: \"256 tokens\", or \"one step, whatever the length\" for 2^64 - 1.");
  m.def(
      "conform_observed",
      [](const std::string& engine, py::handle budget, py::handle chunk, py::handle rule_chunk, py::handle vocab,
         py::handle lengths, py::handle prompts, py::handle cold_runs, py::handle prefilled_tokens,
         py::handle premises_checked, py::handle premise_failure, py::handle cold_disagreement, py::handle grids,
         py::handle decode_rows, double elapsed_s, py::handle skip_reason, py::handle batching) {
        conform::Report r;
        r.engine = engine;
        r.budget = budget_of(budget);
        r.chunk = count(chunk, "chunk");
        r.rule_chunk = count(rule_chunk, "rule_chunk");
        r.vocab = count(vocab, "vocab");
        if (r.chunk == 0 || r.rule_chunk == 0) raise(PyExc_ValueError, std::string(who) + ": a chunk of 0");
        for (const py::handle n : py::iter(lengths)) r.lengths.push_back(count(n, "lengths[]"));
        if (r.lengths.empty()) raise(PyExc_ValueError, std::string(who) + ": no prompt lengths");
        r.prompts = count(prompts, "prompts");
        r.cold_runs = count(cold_runs, "cold_runs");
        r.prefilled_tokens = count(prefilled_tokens, "prefilled_tokens");
        r.premises_checked.clear();
        for (const py::handle name : py::iter(premises_checked)) {
          r.premises_checked.push_back(premise_of(name.cast<std::string>(), "premises_checked"));
        }
        if (!premise_failure.is_none()) {
          const auto [premise, detail] = premise_failure.cast<std::pair<std::string, std::string>>();
          r.premise_failure = conform::PremiseFailure{.premise = premise_of(premise, "premise_failure"), .detail = detail};
        }
        if (!cold_disagreement.is_none()) {
          const std::string what = "cold_disagreement";
          r.cold_disagreement = conform::ColdDisagreement{
              .prompt_number = count_of(cold_disagreement, "prompt_number", what),
              .prompt = tokens_of(cold_disagreement, "prompt", what),
              .run = count_of(cold_disagreement, "run", what),
              .difference = difference_of(entry(cold_disagreement, "difference", what), what + "['difference']")};
        }
        for (const py::handle g : py::iter(grids)) {
          conform::GridResult result = grid_of(g, "grids[" + std::to_string(r.grids.size()) + "]");
          // decide() recommends the first exact grid as the smallest.
          if (result.grid == 0 || (!r.grids.empty() && result.grid <= r.grids.back().grid)) {
            raise(PyExc_ValueError, std::string(who) + ": the grids must be at least 1 and ascending, each once");
          }
          r.grids.push_back(std::move(result));
        }
        if (!skip_reason.is_none()) {
          if (!py::isinstance<py::str>(skip_reason)) raise(PyExc_TypeError, std::string(who) + ": skip_reason must be a str or None");
          r.skip_reason = skip_reason.cast<std::string>();
          if (r.skip_reason.empty()) raise(PyExc_ValueError, std::string(who) + ": skip_reason is empty: say why, or pass None");
        }
        // A skip is said with its reason: the report prints the reason once, for every grid's skips.
        if (r.skipped() > 0 && r.skip_reason.empty()) {
          raise(PyExc_ValueError, std::string(who) + ": " + std::to_string(r.skipped()) +
                                      " offsets skipped, but no skip_reason says why the rule never resumes there");
        }
        if (!decode_rows.is_none()) r.decode_rows = decode_rows_of(decode_rows);
        if (!batching.is_none()) r.batching = batching_of(batching);
        r.elapsed_s = elapsed_s;
        conform::decide(r);
        return r;
      },
      py::kw_only(), py::arg("engine"), py::arg("budget"), py::arg("chunk"), py::arg("rule_chunk"), py::arg("vocab"),
      py::arg("lengths"), py::arg("prompts"), py::arg("cold_runs"), py::arg("prefilled_tokens"),
      py::arg("premises_checked"), py::arg("premise_failure"), py::arg("cold_disagreement"), py::arg("grids"),
      py::arg("decode_rows"), py::arg("elapsed_s"), py::arg("skip_reason") = py::none(),
      py::arg("batching") = py::none(),
      "A ConformReport from what a check of an engine's output saw (pfx.integrations.vllm.conform), its "
      "verdict decided by pfx::conform::decide. A grid's optional 'skipped' counts its offsets the rule never "
      "resumes at, and skip_reason says why; batching is whether a request's answer depends on what is batched "
      "beside it.");
}

}  // namespace pfx::python
