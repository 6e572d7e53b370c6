#pragma once

/// \file
/// The conformance check (docs/conform.md): does an engine meet THM-1's premise, and on which grid?
/// It runs cold prefills of random prompts, repeats each, resumes each at offsets on candidate grids
/// as a lane would, and compares every resume with its cold run bit for bit, KV rows and logits.

#include <pfx/conform/budget.hpp>
#include <pfx/conform/report.hpp>
#include <pfx/driver/engine.hpp>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pfx::conform {

struct CheckOptions {
  Budget budget;
  /// The chunk the rule would use; unset: the engine's chunk.
  std::optional<std::size_t> rule_chunk;
  /// The rule's prefill step (Config::prefill_step, INV-12): an offset the rule told it never resumes
  /// at is skipped, not resumed. 0: no premise, every offset is resumed at.
  std::size_t prefill_step = 0;
  /// How the report names the engine.
  std::string engine_name = "engine";
  /// Called after each prompt with (prompts done, prompts in all), for a progress bar.
  std::function<void(std::size_t, std::size_t)> progress;
  /// For an engine that serves several requests in one batch (a server's slots): serves the prompts
  /// together, each cold, and returns for each what it answered (its logits, every step's, bit for
  /// bit). Given, the check adds the batching finding (Report::batching): each of budget.prompts
  /// prompts served alone (a batch of one) and beside kBeside others, compared.
  std::function<std::vector<std::vector<float>>(const std::vector<std::vector<token>>&)> serve_together{};
  /// Adds the decode rows finding (Report::decode_rows): whether rows the engine's decode wrote equal the
  /// rows a cold prefill of the same tokens writes, so that a rule told so (Config::decode_rows_exact)
  /// may reuse them. It needs an engine that decodes; it leaves the verdict as it is.
  bool decode_rows = false;
};

/// The decode rows finding's prompts: each decoded, its rows compared, its decode logits rescored and
/// its decode rows resumed from.
inline constexpr std::size_t kDecodePrompts = 20;
/// Resumes from the rows one prompt's decode wrote: one at each multiple of the rule chunk among them.
inline constexpr std::size_t kDecodeResumes = 10;
/// Decode steps of one prompt rescored by a cold prefill of the same tokens.
inline constexpr std::size_t kDecodeRescored = 5;

/// The decode steps of each prompt of the decode rows finding for a rule chunk of `rule_chunk`: enough to
/// hold kDecodeResumes multiples of it, so that a resume reaches into rows decode wrote at each.
[[nodiscard]] constexpr std::size_t decode_steps(std::size_t rule_chunk) noexcept {
  return kDecodeResumes * rule_chunk;
}

/// The prompt lengths of the decode rows finding: kDecodePrompts of the check's `lengths` (ascending),
/// spread over those whose decoded run and resumes fit the rows the check's other runs need (its longest
/// length and a chunk), so that the finding needs no longer context; the shortest where none does.
[[nodiscard]] std::vector<std::size_t> decode_lengths(const std::vector<std::size_t>& lengths, std::size_t rule_chunk);

/// The KV rows the check's states hold for `lengths` and a prefill chunk of `chunk`: its longest prompt
/// and a chunk past it, or with `decode_rows` the decode rows finding's longest prompt, a row more
/// (the prefill step's), its decode steps and a chunk, where that is more.
[[nodiscard]] std::size_t check_capacity(const std::vector<std::size_t>& lengths, std::size_t chunk,
                                         std::size_t rule_chunk, bool decode_rows);

/// Prompts served beside each prompt of the batching finding.
inline constexpr std::size_t kBeside = 3;

/// Checks `engine` (docs/conform.md, "What a resume is"). First the premises (docs/conform.md,
/// "Premises"): two cold runs of prompts that differ in every token must write their rows (none left
/// poisoned; rows that differ, where the state can be read) and give finite logits that differ;
/// when one fails the report says which, its verdict is degenerate and nothing else is run. Then,
/// for each prompt of each length of
/// prompt_lengths(candidate_grids(...)), budget.prompts of them, random tokens below engine.vocab():
///  - cold runs: prefill_on_grid from 0 on one KV state made once and forgotten from 0 (and, in pfx's
///    memory, poisoned) before each run, budget.cold_runs times; every run after
///    the first must equal the first, rows [0, n) and logits, bit for bit;
///  - for each candidate grid g and each offset o, a multiple of g in [g, n - 1] (all of them, or a
///    sample for a long prompt): on one KV state that the resumes share, a cold run of `held` (the
///    prompt's first o tokens, then a random tail of 0 .. chunk tokens that does not continue the
///    prompt), forget(o), then prefill_on_grid of the prompt from o; rows [0, n), where the state can
///    be read (as bytes in the engine's format), and the logits must equal the first cold run's, bit
///    for bit. A grid stops being resumed at its first mismatch. An offset at which pfx::decide, with
///    chunk g and the options' prefill_step, would not resume the prompt held up to o is skipped
///    (GridResult::skipped, Report::skip_reason): the rule never makes that resume.
///  - with serve_together, the batching finding: prompts of the check's lengths, each served alone and
///    at a random place among kBeside others; the first answer that differs stops it.
///  - with decode_rows, the decode rows finding (docs/conform.md, "Rows decode wrote"): kDecodePrompts
///    prompts of decode_lengths(), each prefilled cold on the engine's grid and then decoded greedily
///    for decode_steps(rule chunk) steps, one engine.decode each. Every row decode wrote is compared byte
///    for byte with the same row of a cold prefill of the prompt and its generated tokens; kDecodeRescored
///    decode steps' logits with a cold prefill's of the same tokens, bit for bit; and the prompt with its
///    generated tokens and a random tail is resumed from the decoded run at each multiple of the rule
///    chunk past the prompt (rows decode wrote below it), largest first, each compared with its cold
///    run. The first resume that differs stops the finding after its prompt's comparisons.
/// Effect: only on KV states the check makes itself; the engine is driven directly, never through a
/// Lane, so that a bug in the lane cannot hide in the check.
/// Throws: std::invalid_argument for a bad budget, an engine whose chunk or vocabulary is 0, or a
/// rule chunk of 0; whatever the engine throws passes through.
[[nodiscard]] Report check(driver::Engine& engine, const CheckOptions& options);

}  // namespace pfx::conform
