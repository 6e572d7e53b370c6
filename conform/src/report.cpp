#include <pfx/conform/report.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <string>

namespace pfx::conform {
namespace {

/// A float with all its digits, and its bits: two values that print alike still show how they differ.
std::string exact(float x) {
  char text[64];
  std::snprintf(text, sizeof text, "%.9g (0x%08x)", static_cast<double>(x),
                static_cast<unsigned>(std::bit_cast<std::uint32_t>(x)));
  return text;
}

std::string tokens(const std::vector<token>& ids) {
  std::string text = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) text += ' ';
    text += std::to_string(ids[i]);
  }
  text += ']';
  return text;
}

std::string grid_list(const Report& report, bool exact_ones) {
  std::string text;
  for (const GridResult& g : report.grids) {
    if (g.exact() != exact_ones) continue;
    if (!text.empty()) text += ", ";
    text += std::to_string(g.grid);
  }
  return text.empty() ? "none" : text;
}

}  // namespace

std::string Difference::describe() const {
  if (where == Where::generated) {
    // Token ids: exact as floats below 2^24, printed as the integers they are.
    return "generated token " + std::to_string(index) + ": " + std::to_string(static_cast<long long>(got)) + " vs " +
           std::to_string(static_cast<long long>(expected));
  }
  if (where == Where::logprob) {
    return "logprob of generated token " + std::to_string(index) + ": " + exact(got) + " vs " + exact(expected);
  }
  if (where == Where::logits) return "logit " + std::to_string(index) + ": " + exact(got) + " vs " + exact(expected);
  if (where == Where::row_bytes) {
    const auto byte = [](float x) { return x < 0 ? std::string("none") : std::to_string(static_cast<unsigned>(x)); };
    return "row " + std::to_string(row) + " (in the engine's format), byte " + std::to_string(index) + ": " +
           byte(got) + " vs " + byte(expected);
  }
  return "row " + std::to_string(row) + " (layer " + std::to_string(layer) + ", " +
         (plane == driver::Plane::key ? "key" : "value") + ", column " + std::to_string(index) + "): " + exact(got) +
         " vs " + exact(expected);
}

const char* to_string(Difference::Where where) noexcept {
  switch (where) {
    case Difference::Where::row: return "row";
    case Difference::Where::logits: return "logits";
    case Difference::Where::row_bytes: return "row bytes";
    case Difference::Where::generated: return "generated";
    case Difference::Where::logprob: return "logprob";
  }
  return "?";
}

const char* to_string(Verdict verdict) noexcept {
  switch (verdict) {
    case Verdict::safe: return "safe";
    case Verdict::unsafe: return "unsafe";
    case Verdict::nondeterministic: return "nondeterministic";
    case Verdict::no_exact_grid: return "no exact grid";
    case Verdict::degenerate: return "degenerate";
  }
  return "?";
}

const char* to_string(Premise premise) noexcept {
  switch (premise) {
    case Premise::rows_written: return "rows written";
    case Premise::finite_logits: return "finite logits";
    case Premise::logits_depend_on_tokens: return "logits depend on tokens";
  }
  return "?";
}

std::size_t Report::comparisons() const noexcept {
  std::size_t resumes = 0;
  for (const GridResult& g : grids) resumes += g.resumes;  // a skipped offset compared nothing
  if (decode_rows) resumes += decode_rows->resumes;
  const std::size_t batches = batching ? batching->batches : 0;
  // Every cold run after a prompt's first is compared with the first.
  return resumes + batches + (cold_runs > prompts ? cold_runs - prompts : 0);
}

std::size_t Report::skipped() const noexcept {
  std::size_t offsets = 0;
  for (const GridResult& g : grids) offsets += g.skipped;
  return offsets;
}

const GridResult* Report::find(std::size_t grid) const noexcept {
  const auto it = std::find_if(grids.begin(), grids.end(), [&](const GridResult& g) { return g.grid == grid; });
  return it == grids.end() ? nullptr : &*it;
}

void decide(Report& report) {
  report.recommended.reset();
  if (report.premise_failure) {
    report.verdict = Verdict::degenerate;
    return;
  }
  if (report.cold_disagreement) {
    report.verdict = Verdict::nondeterministic;
    return;
  }
  for (const GridResult& g : report.grids) {
    if (g.exact()) {
      report.recommended = g.grid;
      break;
    }
  }
  if (!report.recommended) {
    report.verdict = Verdict::no_exact_grid;
    return;
  }
  const GridResult* rule = report.find(report.rule_chunk);
  report.verdict = rule != nullptr && rule->exact() ? Verdict::safe : Verdict::unsafe;
}

int exit_status(Verdict verdict) noexcept {
  switch (verdict) {
    case Verdict::safe: return 0;
    case Verdict::unsafe: return 1;
    case Verdict::nondeterministic: return 4;
    case Verdict::no_exact_grid: return 5;
    case Verdict::degenerate: return 6;
  }
  return 3;  // no verdict: an internal error (docs/cli.md, "Exit status")
}

namespace {

/// "1 batch", "3 batches": a count and its noun.
std::string counted(std::size_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

/// A grid none of whose offsets was resumed because every one was skipped: no resume vouches for it.
bool only_skipped(const GridResult& g) noexcept { return g.resumes == 0 && g.skipped > 0 && !g.mismatch; }

/// Said when a grid had only skipped offsets: it is not exact, and why.
std::string skipped_only(const Report& r) {
  std::string grids;
  std::size_t count = 0;
  for (const GridResult& g : r.grids) {
    if (!only_skipped(g)) continue;
    grids += (count++ == 0 ? "" : ", ") + std::to_string(g.grid);
  }
  if (count == 0) return "";
  return count == 1 ? " Grid " + grids + " is not exact: the rule never resumes at its offsets, so every one was "
                      "skipped and no resume on it was compared."
                    : " Grids " + grids + " are not exact: the rule never resumes at their offsets, so every one "
                      "was skipped and no resume on them was compared.";
}

/// Said when a request's answer depended on what was batched beside it: the guarantee is for one alone.
std::string served_alone(const Report& r) {
  if (!r.batching || !r.batching->mismatch) return "";
  return " A request's answer depends on what is batched beside it (the batching finding): the verdict holds for a "
         "request served alone, not for one batched with others.";
}

/// Said when the recommended grid is not a multiple of the engine's chunk: THM-1 does not cover it.
std::string measured_only(const Report& r) {
  if (!r.recommended || *r.recommended % r.chunk == 0) return "";
  return " Grid " + std::to_string(*r.recommended) + " is not a multiple of the prefill chunk " +
         std::to_string(r.chunk) + ", so THM-1 does not cover it: it is exact as measured here, not as proved; a "
         "multiple of " + std::to_string(r.chunk) + " is covered when its grid is exact.";
}

}  // namespace

std::string prefill_step_words(std::size_t step) {
  return step == SIZE_MAX ? "one step, whatever the length" : counted(step, "token", "tokens");
}

std::string prefill_step_skip_reason(std::size_t step) {
  return "the prefill step (" + prefill_step_words(step) + "): pfx's rule (decide, bound 'prefill step') never resumes where the "
         "resumed prefill would end with a step of one token and the cold run's would not, or the other way round";
}

std::string Report::explanation() const {
  switch (verdict) {
    case Verdict::safe:
      return "Rule chunk " + std::to_string(rule_chunk) + " is safe: every resume on its grid equalled its cold run "
             "bit for bit. The smallest exact grid is " + std::to_string(*recommended) + "." + measured_only(*this) +
             skipped_only(*this) + served_alone(*this);
    case Verdict::unsafe: {
      const GridResult* rule = find(rule_chunk);
      // Its grid differs, as on every engine `pfx conform` judges, or no resume on it was compared.
      const std::string why = rule != nullptr && rule->mismatch ? "a resume on its grid differs from its cold run"
                                                                : "no resume on its grid was compared";
      return "Rule chunk " + std::to_string(rule_chunk) + " is UNSAFE: " + why + ". Configure the rule's chunk to " +
             std::to_string(*recommended) + ", the smallest grid on which every resume equalled its cold run bit for "
             "bit." + measured_only(*this) + skipped_only(*this) + served_alone(*this);
    }
    case Verdict::nondeterministic:
      return "No grid is exact: two cold runs of the same prompt differ, so the engine is not deterministic and no "
             "resume can be promised to equal a cold run. Fix the engine (a fixed reduction order, no atomics, no "
             "split-K chosen per call) before configuring reuse.";
    case Verdict::no_exact_grid:
      return "No grid is exact: cold runs agree, so the engine is deterministic, but resumes differ on every "
             "candidate grid. Its results depend on something other than a chunk's tokens, its start and the rows "
             "before it (rows past the chunk, what the KV state held before, the number of calls), or its own grid "
             "is larger than the grids tried (raise max_grid)." + skipped_only(*this);
    case Verdict::degenerate:
      return "The engine is DEGENERATE: the premise \"" + std::string(to_string(premise_failure->premise)) +
             "\" failed: " + premise_failure->detail + ". No grid was judged: a resume that equals its cold run "
             "proves nothing when neither computed anything. Check the adapter: that prefill writes the rows of its "
             "chunk and returns the logits of its last token.";
  }
  return "";
}

namespace {

/// The resume that differs: "prompt 4 (3 tokens), offset 1, after a run of 7 held tokens: <difference>".
std::string mismatch_text(const Mismatch& m) {
  return "prompt " + std::to_string(m.prompt_number) + " (" + std::to_string(m.prompt.size()) + " tokens), offset " +
         std::to_string(m.offset) + ", after a run of " + std::to_string(m.held.size()) + " held tokens";
}

/// How the resumes were served, where any was served beside another request: "; served 60 alone, 100 in
/// batches of 2 to 8, 40 joining another mid-decode"; nothing where every one was served alone.
std::string decode_rows_served(const DecodeRows& d) {
  if (d.batched == 0 && d.joining == 0) return "";
  std::string sizes;
  if (!d.batch_sizes.empty()) {
    const auto [low, high] = std::ranges::minmax(d.batch_sizes);
    sizes = " in batches of " + std::to_string(low) + (low == high ? "" : " to " + std::to_string(high));
  }
  return "; served " + std::to_string(d.alone) + " alone, " + std::to_string(d.batched) + sizes + ", " +
         std::to_string(d.joining) + " joining another mid-decode";
}

/// "; 1260 decode logprobs equal to a prefill's rescoring", where any was rescored.
std::string decode_rows_rescored(const DecodeRows& d) {
  if (d.rescored == 0) return "";
  return "; " + std::to_string(d.rescored) + " decode logprobs equal to a prefill's rescoring";
}

/// "; 80 blocks of K and V rows decode wrote byte-equal to a cold prefill's", where any was compared.
std::string decode_rows_kv(const DecodeRows& d) {
  if (d.kv_blocks == 0) return "";
  return "; " + std::to_string(d.kv_blocks) + " blocks of K and V rows decode wrote byte-equal to a cold prefill's";
}

std::string decode_rows_line(const DecodeRows& d) {
  if (d.reusable()) {
    return "decode rows: reusable as measured (" + std::to_string(d.resumes) +
           " resumes from rows decode wrote equalled their cold runs" + decode_rows_served(d) +
           decode_rows_rescored(d) + decode_rows_kv(d) + ")\n";
  }
  if (!d.mismatch && d.kv_blocks_differ > 0) {
    return "decode rows: DIFFER: " + std::to_string(d.kv_blocks_differ) + " of " + std::to_string(d.kv_blocks) +
           " blocks of K and V rows decode wrote differ, byte for byte, from a cold prefill's of the same tokens; "
           "pfx's rule never reuses them\n";
  }
  if (!d.mismatch && d.rescoring_differs > 0) {
    return "decode rows: DIFFER: " + std::to_string(d.rescoring_differs) + " of " + std::to_string(d.rescored) +
           " logprobs decode computed differ from a cold prefill's rescoring of the same tokens; pfx's rule never "
           "reuses them\n";
  }
  if (!d.mismatch) return "decode rows: not resumed\n";
  const Mismatch& m = *d.mismatch;
  return "decode rows: DIFFER at resume " + std::to_string(d.resumes) + ": " + mismatch_text(m) + " (rows from " +
         std::to_string(d.canonical_end) + " on written by decode): " + m.difference.describe() +
         "; pfx's rule never reuses them\n";
}

/// The batching finding: independent, dependent (the first request that differs), or nothing served.
std::string batching_line(const Batching& b) {
  const std::string batches = counted(b.batches, "batch", "batches");
  if (b.independent()) return "batching: " + batches + ", every answer equalled the request served alone\n";
  if (!b.mismatch) return "batching: not tried (no batch served)\n";
  const BatchMismatch& m = *b.mismatch;
  return "batching: " + batches + ", a request's answer DEPENDS on what is batched beside it: prompt " +
         std::to_string(m.prompt_number) + " (" + std::to_string(m.prompt.size()) + " tokens) beside " +
         counted(m.beside.size(), "other", "others") + ": " + m.difference.describe() + "\n";
}

/// A grid's line after its name. Skips are said only where there were some: `pfx conform` without
/// --prefill-step never skips, and its lines stay as they were.
std::string grid_line(const GridResult& g) {
  const std::string skipped = counted(g.skipped, "offset", "offsets") + " skipped";
  if (g.exact()) {
    return "exact (" + std::to_string(g.resumes) + " resumes" + (g.skipped > 0 ? ", " + skipped : "") + ")\n";
  }
  if (g.mismatch) {
    const Mismatch& m = *g.mismatch;
    return "DIFFERS at resume " + std::to_string(g.resumes) + (g.skipped > 0 ? " (" + skipped + ")" : "") + ": " +
           mismatch_text(m) + ": " + m.difference.describe() + "\n";
  }
  if (g.skipped > 0) return "not exact: no resume, " + skipped + " (the rule never resumes there)\n";
  return "not resumed (no offset on this grid)\n";
}

/// Said once when offsets were skipped (or a reason given): how many, and why the rule never resumes there.
std::string skipped_line(const Report& r) {
  const std::size_t skipped = r.skipped();
  if (skipped == 0 && r.skip_reason.empty()) return "";
  return "skipped: " + counted(skipped, "offset", "offsets") + " the rule never resumes at" +
         (r.skip_reason.empty() ? "" : ": " + r.skip_reason) + "\n";
}

}  // namespace

std::string to_text(const Report& r) {
  std::string text = "pfx conform: " + r.engine + ", prefill chunk " + std::to_string(r.chunk) + ", rule chunk " +
                     std::to_string(r.rule_chunk) + "\n";
  text += "budget: " + std::to_string(r.prompts) + " prompts of " + std::to_string(r.lengths.front()) + ".." +
          std::to_string(r.lengths.back()) + " tokens (" + std::to_string(r.lengths.size()) + " lengths), " +
          std::to_string(r.budget.cold_runs) + " cold runs each, grids up to " + std::to_string(r.budget.max_grid) +
          ", seed " + std::to_string(r.budget.seed) + "\n";
  if (r.premise_failure) {
    text += "premises: FAILED: " + std::string(to_string(r.premise_failure->premise)) + ": " + r.premise_failure->detail +
            "\n";
  } else {
    std::string checked;
    for (const Premise premise : r.premises_checked) checked += (checked.empty() ? "" : ", ") + std::string(to_string(premise));
    text += "premises: " + (checked.empty() ? std::string("none checked") : checked) + "\n";
  }
  if (r.premise_failure) {
    text += "cold runs and grids: not run (a premise failed)\n";
  } else if (r.cold_disagreement) {
    const ColdDisagreement& d = *r.cold_disagreement;
    text += "cold runs: DIFFER: prompt " + std::to_string(d.prompt_number) + " (" + std::to_string(d.prompt.size()) +
            " tokens " + tokens(d.prompt) + "), run " + std::to_string(d.run + 1) + " vs run 1: " +
            d.difference.describe() + "\n";
  } else {
    text += "cold runs: " + std::to_string(r.cold_runs) + ", every repeat identical to the first (deterministic)\n";
  }
  for (const GridResult& g : r.grids) {
    if (r.premise_failure) break;
    std::string name = "grid " + std::to_string(g.grid);
    std::string roles;
    if (g.grid == r.chunk) roles += "prefill chunk";
    if (g.grid == r.rule_chunk) roles += roles.empty() ? "rule chunk" : ", rule chunk";
    if (!roles.empty()) name += " (" + roles + ")";
    text += name + ": " + grid_line(g);
  }
  if (!r.premise_failure) text += skipped_line(r);
  if (r.decode_rows && !r.premise_failure) text += decode_rows_line(*r.decode_rows);
  if (r.batching && !r.premise_failure) text += batching_line(*r.batching);
  if (!r.premise_failure) text += "exact grids: " + grid_list(r, true) + "\n";
  if (r.recommended) text += "recommended rule chunk: " + std::to_string(*r.recommended) + "\n";
  text += std::string("verdict: ") + to_string(r.verdict) + "\n" + r.explanation() + "\n";
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.2f", r.elapsed_s);
  text += "time: " + std::string(seconds) + " s, " + std::to_string(r.prefilled_tokens) + " tokens prefilled\n";
  // What the verdict rests on, in every rendering (`pfx conform`, pfx.conform's str): a check that
  // compared nothing vouches for nothing.
  text += "compared: " + std::to_string(r.comparisons()) + " runs with their cold run, bit for bit\n";
  return text;
}

}  // namespace pfx::conform
