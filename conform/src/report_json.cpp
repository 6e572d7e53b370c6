// The report as the JSON object of `pfx conform --json` and of pfx.ConformReport.to_json()
// (docs/conform.md, "JSON"; docs/schemas/conform.schema.json): one writer for both.

#include <pfx/conform/report.hpp>

#include <nlohmann/json.hpp>

#include <array>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <string>

namespace pfx::conform {
namespace {

using json = nlohmann::ordered_json;

json bits(float x) {
  std::array<char, 16> text{};
  (void)std::snprintf(text.data(), text.size(), "0x%08x", static_cast<unsigned>(std::bit_cast<std::uint32_t>(x)));
  return std::string(text.data());
}

json difference_json(const Difference& d) {
  json j;
  j["where"] = to_string(d.where);
  if (d.where == Difference::Where::generated || d.where == Difference::Where::logprob) {
    j["step"] = d.index;  // what an engine served: the step of its greedy output
  } else if (d.where == Difference::Where::logits) {
    j["logit"] = d.index;
  } else if (d.where == Difference::Where::row_bytes) {
    // A cache the engine owns is compared as bytes in its own format: a row and a byte, no layer.
    j["row"] = d.row;
    j["byte"] = d.index;
  } else {
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

json mismatch_json(const Mismatch& m) {
  return {{"prompt_number", m.prompt_number}, {"prompt", m.prompt}, {"held", m.held}, {"offset", m.offset},
          {"difference", difference_json(m.difference)}};
}

}  // namespace

std::string to_json(const Report& r) {
  json grids = json::array();
  for (const GridResult& g : r.grids) {
    json grid{{"grid", g.grid}, {"resumes", g.resumes}, {"skipped", g.skipped}, {"exact", g.exact()}};
    if (g.mismatch) grid["mismatch"] = mismatch_json(*g.mismatch);
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
    const ColdDisagreement& d = *r.cold_disagreement;
    j["cold_disagreement"] = {{"prompt_number", d.prompt_number}, {"prompt", d.prompt}, {"run", d.run},
                              {"difference", difference_json(d.difference)}};
  }
  j["grids"] = grids;
  j["skip_reason"] = r.skip_reason.empty() ? json(nullptr) : json(r.skip_reason);
  if (r.decode_rows) {
    // Only where the check tried rows decode wrote: `pfx conform`'s objects stay as they were.
    json decode{{"resumes", r.decode_rows->resumes}, {"reusable", r.decode_rows->reusable()}};
    if (r.decode_rows->mismatch) {
      decode["mismatch"] = mismatch_json(*r.decode_rows->mismatch);
      decode["canonical_end"] = r.decode_rows->canonical_end;
    }
    // How the resumes were served: alone, batched with other resumes, joining another mid-decode.
    decode["alone"] = r.decode_rows->alone;
    decode["batched"] = r.decode_rows->batched;
    decode["joining"] = r.decode_rows->joining;
    decode["batch_sizes"] = r.decode_rows->batch_sizes;
    // Decode's logprobs against a prefill's rescoring of the same tokens, bit for bit.
    decode["rescored"] = r.decode_rows->rescored;
    decode["rescoring_differs"] = r.decode_rows->rescoring_differs;
    // The K and V rows decode wrote against a cold prefill's, byte for byte, a whole block at a time.
    decode["kv_blocks"] = r.decode_rows->kv_blocks;
    decode["kv_blocks_differ"] = r.decode_rows->kv_blocks_differ;
    j["decode_rows"] = decode;
  }
  if (r.batching) {
    // Only where the check served batches, as decode_rows.
    json batching{{"batches", r.batching->batches}, {"independent", r.batching->independent()}};
    if (r.batching->mismatch) {
      const BatchMismatch& m = *r.batching->mismatch;
      batching["mismatch"] = {{"prompt_number", m.prompt_number}, {"prompt", m.prompt}, {"beside", m.beside},
                              {"difference", difference_json(m.difference)}};
    }
    j["batching"] = batching;
  }
  j["recommended"] = r.recommended ? json(*r.recommended) : json(nullptr);
  j["premise_failure"] = r.premise_failure ? json{{"premise", to_string(r.premise_failure->premise)},
                                                    {"detail", r.premise_failure->detail}}
                                             : json(nullptr);
  j["verdict"] = to_string(r.verdict);
  j["explanation"] = r.explanation();
  j["exit_status"] = exit_status(r.verdict);
  j["prefilled_tokens"] = r.prefilled_tokens;
  j["elapsed_s"] = r.elapsed_s;
  j["comparisons"] = r.comparisons();
  return j.dump();
}

}  // namespace pfx::conform
