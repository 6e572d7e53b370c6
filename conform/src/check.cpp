// The conformance check (docs/conform.md): cold runs, their repeats, and resumes on candidate grids,
// each compared bit for bit with the first cold run.

#include <pfx/conform/check.hpp>

#include <pfx/driver/generation.hpp>
#include <pfx/driver/kv_state.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/offset_rule.hpp>
#include <pfx/prefill_step.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <random>
#include <span>
#include <stdexcept>
#include <string>

namespace pfx::conform {
namespace {

/// What a run leaves: rows [0, n) of the KV state, where they can be read, and the last row's logits.
/// A state in pfx's memory is read whole (KvState::copy_rows's layout, as bytes); an engine's own
/// cache as each row's bytes in the engine's format (for_each_row), so that a difference names its
/// row whatever the engine's layout.
struct Run {
  std::vector<std::byte> rows;
  std::vector<std::size_t> row_ends;  ///< an engine's own cache: where each row's bytes end in `rows`
  std::vector<float> logits;
};

/// Rows [0, n) of `kv` into `run` (nothing where the state cannot be read). Waits for the engine's writes.
void read_rows(const driver::KvState& kv, std::size_t n, Run& run) {
  run.rows.clear();
  run.row_ends.clear();
  if (!kv.readable()) return;
  if (kv.owns_rows()) {
    run.rows = kv.read_rows(0, n);
    return;
  }
  kv.for_each_row(0, n, [&run](std::size_t, std::span<const std::byte> bytes) {
    run.rows.insert(run.rows.end(), bytes.begin(), bytes.end());
    run.row_ends.push_back(run.rows.size());
  });
}

float float_at(const std::vector<std::byte>& bytes, std::size_t index) noexcept {
  float x = 0;
  std::memcpy(&x, bytes.data() + index * sizeof(float), sizeof x);
  return x;
}

bool same_bits(float a, float b) noexcept { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

/// The lowest row of [0, rows) that differs in any layer or plane, and its first differing float there
/// (a state in pfx's memory), or its first differing byte (an engine's own cache).
std::optional<Difference> first_row_difference(const Run& got_run, const Run& expected_run, std::size_t rows,
                                               const driver::KvShape& shape) {
  const std::vector<std::byte>& got_bytes = got_run.rows;
  const std::vector<std::byte>& expected_bytes = expected_run.rows;
  if (got_bytes == expected_bytes && got_run.row_ends == expected_run.row_ends) return std::nullopt;
  if (!expected_run.row_ends.empty() || !got_run.row_ends.empty()) {
    std::size_t begin = 0;
    for (std::size_t row = 0; row < rows; ++row) {
      const std::size_t got_end = got_run.row_ends.at(row);
      const std::size_t expected_end = expected_run.row_ends.at(row);
      for (std::size_t i = begin; i < std::max(got_end, expected_end); ++i) {
        const float a = i < got_end ? static_cast<float>(std::to_integer<unsigned>(got_bytes[i])) : -1.0f;
        const float b = i < expected_end ? static_cast<float>(std::to_integer<unsigned>(expected_bytes[i])) : -1.0f;
        if (a != b) {
          return Difference{.where = Difference::Where::row_bytes, .row = row, .index = i - begin, .got = a,
                            .expected = b};
        }
      }
      begin = got_end;  // equal rows have equal ends
    }
    return std::nullopt;
  }
  for (std::size_t row = 0; row < rows; ++row) {
    for (std::size_t layer = 0; layer < shape.layers; ++layer) {
      for (const driver::Plane plane : {driver::Plane::key, driver::Plane::value}) {
        const std::size_t begin = ((layer * 2 + static_cast<std::size_t>(plane)) * rows + row) * shape.width;
        for (std::size_t column = 0; column < shape.width; ++column) {
          const float a = float_at(got_bytes, begin + column);
          const float b = float_at(expected_bytes, begin + column);
          if (!same_bits(a, b)) {
            return Difference{.where = Difference::Where::row, .row = row, .layer = layer, .plane = plane,
                              .index = column, .got = a, .expected = b};
          }
        }
      }
    }
  }
  return std::nullopt;
}

std::optional<Difference> first_logit_difference(const std::vector<float>& got, const std::vector<float>& expected) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!same_bits(got[i], expected[i])) {
      return Difference{.where = Difference::Where::logits, .index = i, .got = got[i], .expected = expected[i]};
    }
  }
  return std::nullopt;
}

/// Where `got` first differs from `expected`: a KV row first, then the logits.
std::optional<Difference> compare(const Run& got, const Run& expected, std::size_t rows, const driver::KvShape& shape) {
  if (auto row = first_row_difference(got, expected, rows, shape)) return row;
  return first_logit_difference(got.logits, expected.logits);
}

/// The bytes of `row` of a run of `rows` rows: a state in pfx's memory interleaves its rows by layer
/// and plane (KvShape's layout), an engine's own cache was read row by row.
std::vector<std::byte> row_bytes(const Run& run, std::size_t row, std::size_t rows, const driver::KvShape& shape) {
  if (!run.row_ends.empty()) {
    const std::size_t begin = row == 0 ? 0 : run.row_ends[row - 1];
    return {run.rows.begin() + static_cast<std::ptrdiff_t>(begin),
            run.rows.begin() + static_cast<std::ptrdiff_t>(run.row_ends[row])};
  }
  std::vector<std::byte> out;
  const std::size_t row_size = shape.width * sizeof(float);
  for (std::size_t plane = 0; plane < shape.layers * 2; ++plane) {
    const auto begin = run.rows.begin() + static_cast<std::ptrdiff_t>((plane * rows + row) * row_size);
    out.insert(out.end(), begin, begin + static_cast<std::ptrdiff_t>(row_size));
  }
  return out;
}

/// Whether pfx's rule, on `grid` and told the engine's prefill step, would resume `prompt` at `offset`
/// after a run of the prompt's first `offset` tokens: the core's own answer (decide), never the
/// premise derived again here.
bool rule_resumes_at(std::span<const token> prompt, std::size_t offset, std::size_t grid, std::size_t prefill_step) {
  const pfx::Config config{.enabled = true, .keep_min = 0, .chunk = grid, .prefill_step = prefill_step};
  return pfx::decide(config, prompt.first(offset), offset, prompt).offset == offset;
}

class Checker {
 public:
  Checker(driver::Engine& engine, const CheckOptions& options) : engine_(engine), options_(options) {}

  Report run() {
    const auto start = std::chrono::steady_clock::now();
    const Budget& budget = options_.budget;
    budget.validate();
    if (engine_.chunk() == 0) throw std::invalid_argument("the engine's prefill chunk must be at least 1");
    if (engine_.vocab() == 0) throw std::invalid_argument("the engine's vocabulary must hold at least 1 token");
    report_.engine = options_.engine_name;
    report_.budget = budget;
    report_.chunk = engine_.chunk();
    report_.rule_chunk = driver::resolved_rule_chunk(options_.rule_chunk, report_.chunk);
    if (report_.rule_chunk == 0) throw std::invalid_argument("the rule chunk must be at least 1");
    report_.vocab = engine_.vocab();
    for (const std::size_t g : candidate_grids(budget, report_.chunk, report_.rule_chunk)) {
      report_.grids.push_back({.grid = g, .resumes = 0, .mismatch = std::nullopt});
    }
    std::vector<std::size_t> grids;
    for (const GridResult& g : report_.grids) grids.push_back(g.grid);
    report_.lengths = prompt_lengths(grids);
    capacity_ = check_capacity(report_.lengths, report_.chunk, report_.rule_chunk, options_.decode_rows);
    random_.seed(budget.seed);
    // Two states made once: cold runs share one (each forgets it from 0), resumes the other.
    resume_kv_ = engine_.make_kv_state(capacity_);
    cold_kv_ = engine_.make_kv_state(capacity_);
    cold_end_ = capacity_;  // whatever a new state holds is given up before its first run
    shape_ = resume_kv_->shape();

    report_.premise_failure = check_premises();
    if (report_.premise_failure) {
      decide(report_);
      report_.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return std::move(report_);
    }

    const std::size_t total = report_.lengths.size() * budget.prompts;
    for (const std::size_t n : report_.lengths) {
      for (std::size_t k = 0; k < budget.prompts; ++k) {
        check_prompt(random_tokens(n));
        if (options_.progress) options_.progress(report_.prompts, total);
      }
    }
    if (report_.skipped() > 0) report_.skip_reason = prefill_step_skip_reason(options_.prefill_step);
    if (options_.serve_together) report_.batching = check_batching();
    if (options_.decode_rows) report_.decode_rows = check_decode_rows();
    decide(report_);
    report_.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return std::move(report_);
  }

 private:
  std::vector<token> random_tokens(std::size_t n) {
    std::vector<token> out(n);
    for (token& t : out) t = static_cast<token>(random_() % report_.vocab);
    return out;
  }

  /// A cold run on the shared cold state: forgotten (and, in pfx's memory, poisoned) from 0, so it
  /// is as fresh as a new one and nothing an earlier run wrote can be read.
  Run cold_run(const std::vector<token>& prompt) {
    driver::forget_rows(*cold_kv_, 0, cold_end_, true);
    cold_end_ = prompt.size();
    Run run{.rows = {}, .row_ends = {}, .logits = std::vector<float>(report_.vocab)};
    driver::prefill_on_grid(engine_, *cold_kv_, prompt, 0, run.logits);
    read_rows(*cold_kv_, prompt.size(), run);
    report_.prefilled_tokens += prompt.size();
    return run;
  }

  /// A cold run that checks every chunk's logits, for the premises.
  Run premise_run(const std::vector<token>& prompt, std::optional<PremiseFailure>& failure) {
    driver::forget_rows(*cold_kv_, 0, cold_end_, true);
    cold_end_ = prompt.size();
    Run run{.rows = {}, .row_ends = {}, .logits = std::vector<float>(report_.vocab)};
    const auto finite = [&](std::size_t end) {
      if (failure || driver::all_finite(run.logits)) return;
      failure = PremiseFailure{.premise = Premise::finite_logits,
                               .detail = "the logits of the prefill chunk ending at position " + std::to_string(end) +
                                         " of a " + std::to_string(prompt.size()) + "-token cold run are not finite"};
    };
    driver::prefill_on_grid(engine_, *cold_kv_, prompt, 0, run.logits, [&](std::size_t begin, std::size_t) {
      if (begin > 0) finite(begin);
    });
    finite(prompt.size());
    read_rows(*cold_kv_, prompt.size(), run);
    report_.prefilled_tokens += prompt.size();
    return run;
  }

  /// The premises (docs/conform.md, "Premises"), on two cold runs of the longest length: a random
  /// prompt, and one that differs from it in every token. Their rows, where the state can be read,
  /// must all be written (no float of a state in pfx's memory still the NaN it was poisoned with) and
  /// differ row by row; their logits must be finite and differ. With a vocabulary of one token no
  /// second prompt exists: only the poison and finiteness are checked.
  std::optional<PremiseFailure> check_premises() {
    std::mt19937_64 random(options_.budget.seed ^ 0x9e3779b97f4a7c15ULL);  // leaves the check's own draws as they were
    const std::size_t n = report_.lengths.back();
    std::vector<token> first(n);
    for (token& t : first) t = static_cast<token>(random() % report_.vocab);
    std::vector<token> second = first;
    for (token& t : second) t = static_cast<token>((static_cast<std::size_t>(t) + 1) % report_.vocab);
    std::optional<PremiseFailure> failure;
    const std::string which = "a " + std::to_string(n) + "-token prompt";
    const Run a = premise_run(first, failure);
    if (failure) return failure;
    if (cold_kv_->owns_rows()) {
      for (std::size_t row = 0; row < n; ++row) {
        const std::vector<std::byte> bytes = row_bytes(a, row, n, shape_);
        for (std::size_t i = 0; i + sizeof(float) <= bytes.size(); i += sizeof(float)) {
          float x = 0;
          std::memcpy(&x, bytes.data() + i, sizeof x);
          if (std::isnan(x)) {
            return PremiseFailure{.premise = Premise::rows_written,
                                  .detail = "row " + std::to_string(row) + " of " + which +
                                            " still holds the NaN it was poisoned with after its cold run: prefill "
                                            "did not write it"};
          }
        }
      }
    }
    if (report_.vocab < 2) return std::nullopt;
    const Run b = premise_run(second, failure);
    if (failure) return failure;
    if (cold_kv_->readable()) {
      for (std::size_t row = 0; row < n; ++row) {
        if (row_bytes(a, row, n, shape_) == row_bytes(b, row, n, shape_)) {
          return PremiseFailure{.premise = Premise::rows_written,
                                .detail = "row " + std::to_string(row) + " is the same after cold runs of two " +
                                          std::to_string(n) + "-token prompts that differ in every token: prefill "
                                          "did not write it, or wrote what does not depend on the tokens"};
        }
      }
    }
    if (!first_logit_difference(a.logits, b.logits)) {
      return PremiseFailure{.premise = Premise::logits_depend_on_tokens,
                            .detail = "two " + std::to_string(n) + "-token prompts that differ in every token gave "
                                      "the same logits, bit for bit"};
    }
    return std::nullopt;
  }

  /// The tokens whose cold run the lane holds when it resumes `prompt` at `offset`: the prompt's
  /// first `offset` tokens, then 0 .. chunk tokens of another continuation.
  std::vector<token> held_for(const std::vector<token>& prompt, std::size_t offset) {
    std::vector<token> held(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(offset));
    const std::size_t tail = report_.vocab > 1 ? random_() % (report_.chunk + 1) : 0;
    for (std::size_t i = 0; i < tail; ++i) {
      token t = static_cast<token>(random_() % report_.vocab);
      if (i == 0 && t == prompt[offset]) t = static_cast<token>((static_cast<std::size_t>(t) + 1) % report_.vocab);
      held.push_back(t);
    }
    return held;
  }

  void check_prompt(const std::vector<token>& prompt) {
    const std::size_t n = prompt.size();
    const std::size_t number = report_.prompts++;
    const Run cold = cold_run(prompt);
    for (std::size_t run = 1; run < options_.budget.cold_runs; ++run) {
      const Run again = cold_run(prompt);
      if (report_.cold_disagreement) continue;
      if (const std::optional<Difference> d = compare(again, cold, n, shape_)) {
        report_.cold_disagreement = ColdDisagreement{.prompt_number = number, .prompt = prompt, .run = run,
                                                     .difference = *d};
      }
    }
    report_.cold_runs += options_.budget.cold_runs;

    Run resumed{.rows = {}, .row_ends = {}, .logits = std::vector<float>(report_.vocab)};
    for (GridResult& g : report_.grids) {
      if (g.mismatch) continue;  // one counterexample per grid is enough
      for (const std::size_t offset : resume_offsets(n, g.grid, options_.budget, random_)) {
        if (!rule_resumes_at(prompt, offset, g.grid, options_.prefill_step)) {
          ++g.skipped;  // the rule never makes this resume: nothing to judge
          continue;
        }
        const std::vector<token> held = held_for(prompt, offset);
        // As a lane does: the held run from 0, then the rows past the offset given up before the resume.
        // Not poisoned: in pfx's memory they keep what earlier runs wrote, as in a lane without
        // poisoning, so that an engine that reads rows past its chunk is seen to depend on them.
        resume_kv_->forget(0);
        driver::prefill_on_grid(engine_, *resume_kv_, held, 0, resumed.logits);
        resume_kv_->forget(offset);
        driver::prefill_on_grid(engine_, *resume_kv_, prompt, offset, resumed.logits);
        read_rows(*resume_kv_, n, resumed);
        report_.prefilled_tokens += held.size() + n - offset;
        ++g.resumes;
        const std::optional<Difference> found = compare(resumed, cold, n, shape_);
        if (found) {
          g.mismatch = Mismatch{.prompt_number = number, .prompt = prompt, .held = held, .offset = offset,
                                .difference = *found};
          break;
        }
      }
    }
  }

  /// The batching finding: each prompt's answer alone against its answer beside others; the first
  /// that differs stops it. A difference leaves the verdict, which is for a request served alone.
  Batching check_batching() {
    Batching finding;
    const auto random_length = [this] { return report_.lengths[random_() % report_.lengths.size()]; };
    for (std::size_t number = 0; number < options_.budget.prompts; ++number) {
      const std::vector<token> prompt = random_tokens(random_length());
      std::vector<std::vector<token>> beside;
      for (std::size_t k = 0; k < kBeside; ++k) beside.push_back(random_tokens(random_length()));
      const std::size_t where = random_() % (kBeside + 1);
      std::vector<std::vector<token>> batch = beside;
      batch.insert(batch.begin() + static_cast<std::ptrdiff_t>(where), prompt);
      const std::vector<float> alone = options_.serve_together({prompt}).at(0);
      const std::vector<float> together = options_.serve_together(batch).at(where);
      for (const std::vector<token>& p : batch) report_.prefilled_tokens += p.size();
      report_.prefilled_tokens += prompt.size();
      ++finding.batches;
      if (together.size() != alone.size()) {
        throw std::runtime_error("serve_together answered " + std::to_string(together.size()) + " logits in a batch and " +
                                 std::to_string(alone.size()) + " alone for the same prompt");
      }
      if (const std::optional<Difference> found = first_logit_difference(together, alone)) {
        finding.mismatch = BatchMismatch{.prompt_number = number, .prompt = prompt, .beside = beside, .difference = *found};
        break;
      }
    }
    return finding;
  }

  /// A cold run of `prompt` that keeps the logits of the prefill call ending at each of `ends` too:
  /// what a cold prefill computes for the token before each such end, for the decode logits' rescoring.
  /// (Each end is a call's end on the engine's grid only if it lies on it, so a run per end.)
  std::vector<std::vector<float>> rescoring(const std::vector<token>& tokens, const std::vector<std::size_t>& ends) {
    std::vector<std::vector<float>> out;
    for (const std::size_t end : ends) {
      const std::vector<token> head(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(end));
      out.push_back(cold_run(head).logits);
    }
    return out;
  }

  /// The decode rows finding (check()'s contract): rows decode wrote, against a cold prefill's.
  DecodeRows check_decode_rows() {
    DecodeRows finding;
    const std::size_t rule_chunk = report_.rule_chunk;
    const std::size_t steps = decode_steps(rule_chunk);
    Run decoded{.rows = {}, .row_ends = {}, .logits = std::vector<float>(report_.vocab)};
    Run resumed{.rows = {}, .row_ends = {}, .logits = std::vector<float>(report_.vocab)};
    const std::vector<std::size_t> lengths = decode_lengths(report_.lengths, rule_chunk);
    for (std::size_t number = 0; number < kDecodePrompts && !finding.mismatch; ++number) {
      // Lengths spread over the check's, so that the prompts end across its grids' thresholds; one
      // more where the prompt's last row would be a one-row step, which the prefill step's premise
      // keeps apart from rows decode wrote (INV-12).
      std::size_t n = lengths[number];
      if (pfx::prefill_canonical_end(n, options_.prefill_step) < n) ++n;
      const std::vector<token> prompt = random_tokens(n);
      // The decoded run, on the resume state: a cold prefill of the prompt, then greedy decode steps.
      resume_kv_->forget(0);
      driver::prefill_on_grid(engine_, *resume_kv_, prompt, 0, decoded.logits);
      report_.prefilled_tokens += n;
      std::vector<token> held = prompt;
      std::vector<std::vector<float>> step_logits;
      for (std::size_t k = 0; k < steps; ++k) {
        const token next = driver::argmax(decoded.logits);
        engine_.decode(*resume_kv_, next, n + k, decoded.logits);
        held.push_back(next);
        step_logits.push_back(decoded.logits);
      }
      read_rows(*resume_kv_, n + steps, decoded);
      // The prompt of the resumes: the held tokens and a tail of 1 .. chunk others. Its cold run holds
      // a cold prefill's rows of every held token.
      std::vector<token> extended = held;
      const std::vector<token> tail = random_tokens(1 + random_() % report_.chunk);
      extended.insert(extended.end(), tail.begin(), tail.end());
      const Run cold = cold_run(extended);
      for (std::size_t row = n; row < n + steps; ++row) {
        ++finding.kv_blocks;  // an engine without blocks is reused by rows: a row of every layer is its block
        if (row_bytes(decoded, row, n + steps, shape_) != row_bytes(cold, row, extended.size(), shape_)) {
          ++finding.kv_blocks_differ;
        }
      }
      // Rescoring: decode step k's logits are those a cold prefill of the prompt and generated tokens
      // 0..k computes for its last token.
      std::vector<std::size_t> ends;
      for (std::size_t j = 1; j <= kDecodeRescored; ++j) ends.push_back(n + j * steps / kDecodeRescored);
      const std::vector<std::vector<float>> rescored = rescoring(held, ends);
      for (std::size_t j = 0; j < ends.size(); ++j) {
        ++finding.rescored;
        if (first_logit_difference(step_logits[ends[j] - n - 1], rescored[j])) ++finding.rescoring_differs;
      }
      // Resumes from the decoded run, largest offset first: each resume rewrites rows from its offset
      // on, and every smaller offset's rows below it are still those decode wrote.
      for (std::size_t offset = (n + steps) / rule_chunk * rule_chunk; offset > n; offset -= rule_chunk) {
        resume_kv_->forget(offset);
        driver::prefill_on_grid(engine_, *resume_kv_, extended, offset, resumed.logits);
        read_rows(*resume_kv_, extended.size(), resumed);
        report_.prefilled_tokens += extended.size() - offset;
        ++finding.resumes;
        ++finding.alone;
        if (const std::optional<Difference> found = compare(resumed, cold, extended.size(), shape_)) {
          const std::vector<token> held_part(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(offset));
          finding.mismatch = Mismatch{.prompt_number = number, .prompt = extended, .held = held_part,
                                      .offset = offset, .difference = *found};
          finding.canonical_end = n;
          break;
        }
      }
    }
    return finding;
  }

  driver::Engine& engine_;
  const CheckOptions& options_;
  Report report_;
  std::size_t capacity_ = 0;
  std::mt19937_64 random_;
  std::unique_ptr<driver::KvState> resume_kv_;
  std::unique_ptr<driver::KvState> cold_kv_;
  std::size_t cold_end_ = 0;  ///< rows of cold_kv_ that may hold something (capacity_ once made)
  driver::KvShape shape_;
};

}  // namespace

std::vector<std::size_t> decode_lengths(const std::vector<std::size_t>& lengths, std::size_t rule_chunk) {
  // A prompt of n tokens takes n + 1 + steps rows decoded (a row more under the prefill step) and a
  // tail of up to a chunk past them; the other runs' longest takes lengths.back() and a chunk.
  const std::size_t need = 1 + decode_steps(rule_chunk);
  std::vector<std::size_t> fitting;
  for (const std::size_t n : lengths) {
    if (n + need <= lengths.back()) fitting.push_back(n);
  }
  if (fitting.empty()) fitting.push_back(lengths.front());
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < kDecodePrompts; ++i) out.push_back(fitting[i * fitting.size() / kDecodePrompts]);
  return out;
}

std::size_t check_capacity(const std::vector<std::size_t>& lengths, std::size_t chunk, std::size_t rule_chunk,
                           bool decode_rows) {
  std::size_t capacity = lengths.back() + chunk;  // the longest held: n - 1 tokens and a tail of chunk
  if (decode_rows) {
    const std::vector<std::size_t> decoded = decode_lengths(lengths, rule_chunk);
    capacity = std::max(capacity, decoded.back() + 1 + decode_steps(rule_chunk) + chunk);
  }
  return capacity;
}

Report check(driver::Engine& engine, const CheckOptions& options) { return Checker(engine, options).run(); }

}  // namespace pfx::conform
