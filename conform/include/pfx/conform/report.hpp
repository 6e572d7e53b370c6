#pragma once

/// \file
/// What a conformance check found (docs/conform.md, "Reading a report"): whether repeated cold runs
/// agree, for each candidate grid whether every resume on it equals its cold run bit for bit (or the
/// first one that does not) and how many of its offsets were skipped, the grid to configure, the
/// verdict on the rule chunk, and the findings that leave the verdict as it is (decode rows, batching).

#include <pfx/conform/budget.hpp>
#include <pfx/driver/kv_shape.hpp>
#include <pfx/token.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace pfx::conform {

/// The first place where two runs of one prompt differ: a KV row (the lowest row that differs in any
/// layer or plane, and there the first float), or, when every row agrees, the last row's logits. Rows
/// of a cache the engine owns are compared as bytes in its own format: row_bytes names the row and
/// the first byte that differs (got and expected hold the bytes' values, -1 past a shorter row). An
/// engine checked through what it serves (vLLM, through its own prefix cache) is compared by its
/// greedy output: generated names the first step whose token differs (got and expected hold the two
/// token ids, exact below 2^24), logprob the first step whose chosen token's logprob does.
struct Difference {
  enum class Where { row, logits, row_bytes, generated, logprob };
  Where where = Where::row;
  std::size_t row = 0;     ///< Where::row: the row (position) that differs
  std::size_t layer = 0;   ///< Where::row
  driver::Plane plane = driver::Plane::key;  ///< Where::row
  /// the float within the row (column), the logit's index, the byte within the row, or the generated step
  std::size_t index = 0;
  float got = 0;           ///< the resumed (or repeated) run's value
  float expected = 0;      ///< the cold run's value

  /// "row 5 (layer 1, value, column 3): 0.25 (0x3e800000) vs 0.2500001 (0x3e800001)",
  /// "logit 17: ... vs ...", "generated token 2: 17 vs 42" or "logprob of generated token 2: ... vs ...".
  [[nodiscard]] std::string describe() const;
};

/// The JSON `where` of a difference: "row", "logits", "row bytes", "generated", "logprob".
[[nodiscard]] const char* to_string(Difference::Where where) noexcept;

/// A resume that differs from its cold run: the prompt, the tokens whose cold run wrote the rows the
/// resume started from (they share the prompt's first `offset` tokens), the offset, and where.
struct Mismatch {
  std::size_t prompt_number = 0;  ///< which prompt of the check (0-based, in the order they were run)
  std::vector<token> prompt;
  std::vector<token> held;
  std::size_t offset = 0;
  Difference difference;
};

/// Whether rows that decode wrote can be reused (docs/engines.md, "vLLM"): resumes whose offset reaches
/// past the held run's prompt (its canonical_end), each compared with a cold run. Only a check that can
/// make an engine reuse such rows fills it (vLLM's, through its prefix cache); pfx's rule never reuses
/// them (INV-2), so the finding does not change the verdict.
struct DecodeRows {
  std::size_t resumes = 0;  ///< resumes compared (the check stops at the first mismatch)
  std::optional<Mismatch> mismatch;
  std::size_t canonical_end = 0;  ///< with a mismatch: the held run's prompt length; rows from it on were decoded
  // How the resumes compared were served: each alone, in one batch with other resumes of the same held
  // rows, or as one of two requests of which one joined the other mid-decode (alone + batched + joining
  // = resumes). A resume's cold run is always served alone.
  std::size_t alone = 0;
  std::size_t batched = 0;
  std::size_t joining = 0;
  std::vector<std::size_t> batch_sizes{};  ///< the sizes of the batches served, each size once, ascending
  /// Logprobs decode computed (each generated token's, from the row decode wrote before it) compared bit
  /// for bit with a cold prefill's rescoring of the same tokens (its prompt logprobs), and how many differ.
  std::size_t rescored = 0;
  std::size_t rescoring_differs = 0;
  /// Blocks of K and V rows (each layer's counted apart) holding a row decode wrote, compared byte for byte
  /// with a cold prefill's of the same tokens, and how many differ. A whole block is what a prefix cache
  /// reuses; its bytes are the engine's own, whatever its layout.
  std::size_t kv_blocks = 0;
  std::size_t kv_blocks_differ = 0;
  /// Every resume compared equalled its cold run, there was at least one, no decode logprob differed from
  /// its rescoring and no block of rows decode wrote from a prefill's.
  [[nodiscard]] bool reusable() const noexcept {
    return resumes > 0 && !mismatch && rescoring_differs == 0 && kv_blocks_differ == 0;
  }
};

/// A request whose answer depends on what is batched beside it: the prompt served alone and the same
/// prompt served in one batch with the `beside` prompts, both cold; the difference in what it served
/// (got: in the batch, expected: alone).
struct BatchMismatch {
  std::size_t prompt_number = 0;  ///< which prompt of the batches (0-based, in the order they were served)
  std::vector<token> prompt;
  std::vector<std::vector<token>> beside;  ///< the other prompts of its batch
  Difference difference;
};

/// Whether a request's answer depends on what is batched beside it: batches of cold requests, each
/// request's answer compared with the same request served alone. Only a check that can batch requests
/// fills it (vLLM's); THM-1 speaks of one request's prefill, so the finding does not change the
/// verdict, and with a mismatch the verdict holds for a request served alone.
struct Batching {
  std::size_t batches = 0;  ///< batches whose answers were compared (a check may stop at the first mismatch)
  std::optional<BatchMismatch> mismatch;
  /// Every answer of every batch compared equalled its request served alone, and there was a batch.
  [[nodiscard]] bool independent() const noexcept { return batches > 0 && !mismatch; }
};

/// Two cold runs of one prompt that differ: the engine is not deterministic.
struct ColdDisagreement {
  std::size_t prompt_number = 0;
  std::vector<token> prompt;
  std::size_t run = 0;  ///< the cold run (1-based; run 0 is the first) that differs from the first
  Difference difference;
};

/// One candidate grid g: resumes at multiples of g, each followed by a prefill on the engine's grid.
struct GridResult {
  std::size_t grid = 0;
  std::size_t resumes = 0;  ///< resumes compared (the check stops at the grid's first mismatch)
  /// Offsets of this grid not resumed at because the rule never resumes there (Report::skip_reason
  /// says why). A skip compares nothing: it never makes a grid exact.
  std::size_t skipped = 0;
  std::optional<Mismatch> mismatch;
  /// Every resume compared equalled its cold run, and there was at least one.
  [[nodiscard]] bool exact() const noexcept { return resumes > 0 && !mismatch; }
};

/// What the check establishes of an engine before it judges any grid (docs/conform.md, "Premises"):
/// without them a resume could equal its cold run because neither computed anything.
enum class Premise {
  rows_written,             ///< the rows a prefill is asked to write differ from the poison and from what was there
  finite_logits,            ///< every chunk's logits are finite
  logits_depend_on_tokens,  ///< two prompts that differ in every token give different logits
};

/// "rows written", "finite logits", "logits depend on tokens".
[[nodiscard]] const char* to_string(Premise premise) noexcept;

/// A premise that failed, and how.
struct PremiseFailure {
  Premise premise = Premise::rows_written;
  std::string detail;  ///< what was seen, e.g. "row 3 of a 9-token prompt is still poisoned (NaN)"
};

enum class Verdict {
  safe,             ///< a grid is exact and the rule chunk's grid is exact (exit status 0)
  unsafe,           ///< a grid is exact, but not the rule chunk's (exit status 1)
  nondeterministic, ///< two cold runs of a prompt differ: no grid can be exact (exit status 4)
  no_exact_grid,    ///< cold runs agree, yet every grid has a resume that differs (exit status 5)
  degenerate,       ///< a premise failed: the engine writes no rows, or its logits are not finite or
                    ///< ignore the tokens; no grid was judged (exit status 6)
};

/// "safe", "unsafe", "nondeterministic", "no exact grid", "degenerate".
[[nodiscard]] const char* to_string(Verdict verdict) noexcept;

struct Report {
  std::string engine;          ///< what the caller called the engine
  Budget budget;
  std::size_t chunk = 0;       ///< the engine's prefill chunk: the grid of its cold runs and of every resume
  std::size_t rule_chunk = 0;  ///< the chunk the rule would use
  std::size_t vocab = 0;
  std::vector<std::size_t> lengths;  ///< the prompt lengths
  std::size_t prompts = 0;     ///< prompts run
  std::size_t cold_runs = 0;   ///< cold runs, all prompts together
  std::size_t prefilled_tokens = 0;  ///< tokens handed to the engine's prefill, everything included
  /// The premises the check established (in this order when it failed none). An engine whose rows the
  /// check cannot read (vLLM, checked through its own cache) leaves rows_written out, and the text
  /// says only what was checked.
  std::vector<Premise> premises_checked{Premise::rows_written, Premise::finite_logits,
                                        Premise::logits_depend_on_tokens};
  std::optional<PremiseFailure> premise_failure;  ///< set: the verdict is degenerate and no grid was run
  std::optional<ColdDisagreement> cold_disagreement;
  std::vector<GridResult> grids;  ///< ascending
  /// Why offsets were skipped (GridResult::skipped): the premise of the rule for this engine that never
  /// makes such a resume. Empty when the check skips nothing (`pfx conform` skips only under
  /// --prefill-step: prefill_step_skip_reason).
  std::string skip_reason;
  std::optional<DecodeRows> decode_rows;  ///< unset unless the check tried rows decode wrote
  std::optional<Batching> batching;       ///< unset unless the check served batches
  std::optional<std::size_t> recommended;  ///< the smallest exact grid, when the cold runs agree
  Verdict verdict = Verdict::no_exact_grid;
  double elapsed_s = 0;

  /// The result for `grid` (nullptr if it was not a candidate).
  [[nodiscard]] const GridResult* find(std::size_t grid) const noexcept;
  /// One paragraph that says why the verdict is what it is, and what to configure.
  [[nodiscard]] std::string explanation() const;
  /// How many runs were compared with a cold run bit for bit: every resume (decode rows' included),
  /// every batch, and every repeated cold run. A verdict with none would vouch for nothing.
  [[nodiscard]] std::size_t comparisons() const noexcept;
  /// The offsets skipped on every grid together (GridResult::skipped).
  [[nodiscard]] std::size_t skipped() const noexcept;
};

/// Report::skip_reason for offsets skipped because the rule, told the engine's prefill step of `step`
/// tokens (Config::prefill_step, INV-12), never resumes there.
[[nodiscard]] std::string prefill_step_skip_reason(std::size_t step);

/// A prefill step (Config::prefill_step, nonzero) in a report's words: "256 tokens", or "one step,
/// whatever the length" for SIZE_MAX, a scheduler that prefills a whole prompt at once.
[[nodiscard]] std::string prefill_step_words(std::size_t step);

/// The verdict from the results (report.recommended and report.verdict), as check() sets them:
/// degenerate when a premise failed; nondeterministic when the cold runs disagree; else the smallest exact grid is recommended, and the
/// rule chunk is safe when its own grid is exact.
void decide(Report& report);

/// The exit status of `pfx conform` for a verdict: 0 safe, 1 unsafe, 4 nondeterministic, 5 no exact
/// grid, 6 degenerate (a premise failed: nothing was judged).
[[nodiscard]] int exit_status(Verdict verdict) noexcept;

/// The report as text, as `pfx conform` prints it (docs/conform.md shows one).
[[nodiscard]] std::string to_text(const Report& report);

/// The report as one compact JSON object: `pfx conform --json` and pfx.ConformReport.to_json()
/// (docs/conform.md, "JSON"; docs/schemas/conform.schema.json).
[[nodiscard]] std::string to_json(const Report& report);

}  // namespace pfx::conform
