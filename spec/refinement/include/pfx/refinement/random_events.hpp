#pragma once

/// \file
/// The one generator of random protocol events, shared by `pfx audit`'s random runs (a seeded
/// mt19937_64), the fuzzers (a libFuzzer input) and the property tests (RapidCheck): each supplies
/// the draws, and EventRanges what it needs beyond the audit's ranges. Tokens come from a small
/// alphabet and prompts mostly extend a prefix of what is held, so that reuse, every bound and
/// every refusal are all common.

#include <pfx/spec/model.hpp>
#include <pfx/spec/reference.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <variant>

namespace pfx::refinement {

/// A source of draws: below(n) is a value in [0, n), n > 0. The same draws give the same events.
template <class D>
concept Draws = requires(D& d, std::size_t n) {
  { d.below(n) } -> std::convertible_to<std::size_t>;
};

/// A seeded mt19937_64 as draws (the audit's).
struct SeededDraws {
  std::mt19937_64& random;
  std::size_t below(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(random); }
};

/// How often each phase draws the events a lane sends in it, out of their sum with `any`, the weight
/// of any event at all (refused ones included).
struct PhaseWeights {
  std::size_t commit = 5, abort = 1, clear = 0;                 ///< while writing
  std::size_t query = 3, begin = 3, record = 0, configure = 0;  ///< while idle
  std::size_t any = 4;
};

/// The ranges drawn from. The defaults are the audit's (random_ranges()); with them no other draw is
/// taken, so that a seed of `pfx audit` draws the events it always drew.
struct EventRanges {
  std::size_t alphabet = 3;  ///< tokens 0..alphabet-1
  std::size_t tail = 4;      ///< a prompt near what is held: a prefix of it plus 0..tail tokens
  /// Non-zero: a tail of `tail` tokens is 0..long_tail tokens instead (long enough to cross the
  /// blocks of the run-time prefix compare).
  std::size_t long_tail = 0;
  /// The top keep_min and chunk may also be 64, 1024, 2^32, SIZE_MAX - 1 or SIZE_MAX.
  bool huge = false;
  /// Configurations also draw a prefill_step (INV-12): 0 in 2, else 1..4, the chunk, twice it, 5,
  /// 8, or with `huge` 2^32 or SIZE_MAX; and an admission_padding: 0 in 2, else 1..4 or SIZE_MAX.
  /// Off, configure takes the draws it always took.
  bool prefill_steps = false;
  /// Configurations also draw whether decode rows are exact (INV-2): on in 2. Off, configure takes
  /// the draws it always took.
  bool decode_facts = false;
  /// The weight of a prompt that keeps all that is held, beside the len + 1 cuts of weight 1 each.
  std::size_t whole = 0;
  /// The weight of a commit whose canonical_end claims its generated tokens (refused when there are
  /// any), beside the 6 of the other commits.
  std::size_t past_prompt = 0;
  PhaseWeights weights{};
};

/// The prompt being written after `event`, `after` the state it left, `before` the one written
/// before it: a begin the state is writing after. A begin refused while writing counts too: the
/// audit's seeds have always drawn so.
inline spec::Tokens prompt_written_after(const spec::Event& event, const spec::State& after, spec::Tokens before) {
  if (const auto* b = std::get_if<spec::Begin>(&event); b != nullptr && after.writing) return b->prompt;
  return before;
}

/// Draws the events of one run, each from the state of the reference model it will be applied to.
template <Draws D>
class RandomEvents {
 public:
  /// `writing_prompt`: the prompt being written, for a generator made in the middle of a run (a
  /// stateful test draws each event with a new one, from its model).
  explicit RandomEvents(D& draws, EventRanges ranges = {}, spec::Tokens writing_prompt = {})
      : draws_(draws), ranges_(ranges), writing_prompt_(std::move(writing_prompt)) {}

  /// Mostly what the phase accepts (a lane's own sequence), else any event, so refusals come too.
  spec::Event next(const spec::State& model) {
    const PhaseWeights& w = ranges_.weights;
    if (model.writing) {
      std::size_t pick = below(w.commit + w.abort + w.clear + w.any);
      if (pick < w.commit) return commit(model);
      if ((pick -= w.commit) < w.abort) return spec::Abort{};
      if ((pick -= w.abort) < w.clear) return spec::Clear{};  // the write in flight becomes unusable
    } else {
      std::size_t pick = below(w.query + w.begin + w.record + w.configure + w.any);
      if (pick < w.query) return spec::Query{prompt_near(model.ids)};
      if ((pick -= w.query) < w.begin) return begin(model);
      if ((pick -= w.begin) < w.record) return record(model);
      if ((pick -= w.record) < w.configure) return configure();  // mostly a new grid
    }
    return any(model);
  }

  spec::Configure configure() {
    // chunk 0 now and then, which the machine must refuse (INV-9).
    const bool enabled = below(8) != 0;
    const std::size_t keep_min = maybe_huge(below(5), 4);
    const std::size_t chunk = below(12) == 0 ? 0 : maybe_huge(1 + below(4), 4);
    spec::Config config{enabled, keep_min, chunk};
    if (ranges_.prefill_steps) {
      config.prefill_step = prefill_step(chunk);
      config.admission_padding = admission_padding();
    }
    if (ranges_.decode_facts) config.decode_rows_exact = below(2) == 0;
    return spec::Configure{config};
  }

  /// Called with each event once applied, `model` the state after it: the commits that follow are
  /// mostly built from the prompt being written (prompt_written_after), as a lane commits its prompt
  /// plus what it generated.
  void applied(const spec::Event& event, const spec::State& model) {
    writing_prompt_ = prompt_written_after(event, model, std::move(writing_prompt_));
  }

 private:
  spec::Event any(const spec::State& model) {
    switch (below(10)) {
      case 0:
      case 1: return spec::Query{prompt_near(model.ids)};
      case 2:
      case 3: return begin(model);
      case 4:
      case 5: return commit(model);
      case 6: return spec::Abort{};
      case 7: return record(model);
      case 8: return below(2) == 0 ? spec::Event{spec::Clear{}} : spec::Event{configure()};
      default: return below(2) == 0 ? spec::Event{spec::Query{tokens(below(8))}} : begin(model);
    }
  }

  std::size_t below(std::size_t n) { return static_cast<std::size_t>(draws_.below(n)); }

  /// `value`, or with ranges.huge, when it is `top`, one of the values a size_t setting must
  /// survive: beyond any prompt, around 2^32 (a 32-bit truncation) and at the top (an overflow).
  std::size_t maybe_huge(std::size_t value, std::size_t top) {
    if (!ranges_.huge || value != top) return value;
    const std::size_t values[] = {top, 64, 1024, std::size_t{1} << 32, SIZE_MAX - 1, SIZE_MAX};
    return values[below(6)];
  }

  /// A prefill step around the chunk's: equal to it, a multiple, or neither.
  std::size_t prefill_step(std::size_t chunk) {
    if (below(2) == 0) return 0;
    const std::size_t huge = ranges_.huge ? 2 : 0;
    const std::size_t pick = below(8 + huge);
    if (pick < 4) return 1 + pick;
    switch (pick) {
      case 4: return std::max<std::size_t>(chunk, 1);
      case 5: return chunk > SIZE_MAX / 2 ? SIZE_MAX : std::max<std::size_t>(2 * chunk, 1);
      case 6: return 5;
      case 7: return 8;
      case 8: return std::size_t{1} << 32;
      default: return SIZE_MAX;
    }
  }

  /// Rows a padded admission adds: none in 2, else a few, or the top of the range (only whether
  /// it is 0 changes the rule, so a padding that wrapped round to 0 would show).
  std::size_t admission_padding() {
    if (below(2) == 0) return 0;
    const std::size_t pick = below(5);
    return pick < 4 ? 1 + pick : SIZE_MAX;
  }

  spec::Tokens tokens(std::size_t n) {
    spec::Tokens t;
    for (std::size_t i = 0; i < n; ++i) t.push_back(static_cast<spec::Token>(below(ranges_.alphabet)));
    return t;
  }

  /// A prefix of `held` (any length) followed by a few random tokens.
  spec::Tokens prompt_near(const spec::Tokens& held) {
    const std::size_t cut = std::min(below(held.size() + 1 + ranges_.whole), held.size());
    spec::Tokens prompt(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(cut));
    std::size_t n = below(ranges_.tail + 1);
    if (ranges_.long_tail != 0 && n == ranges_.tail) n = below(ranges_.long_tail + 1);
    for (const spec::Token t : tokens(n)) prompt.push_back(t);
    return prompt;
  }

  spec::Event record(const spec::State& model) {
    spec::Tokens ids = prompt_near(model.ids);
    return spec::Record{ids, below(ids.size() + 2)};  // one past the end is refused (INV-9)
  }

  /// Begin at the granted offset, at 0, or at an offset the rule does not grant.
  spec::Event begin(const spec::State& model) {
    spec::Tokens prompt = prompt_near(model.ids);
    const std::size_t granted = spec::reference_offset(model, prompt);
    const std::size_t offsets[] = {granted, granted, 0, granted + 1, below(prompt.size() + 1)};
    return spec::Begin{prompt, offsets[below(5)]};
  }

  /// What a lane commits (the prompt being written plus generated tokens), or a bad commit.
  spec::Event commit(const spec::State& model) {
    spec::Tokens ids = writing_prompt_;
    for (const spec::Token t : tokens(below(4))) ids.push_back(t);
    switch (below(6 + ranges_.past_prompt)) {
      case 0: return spec::Commit{ids, below(ids.size() + 2)};  // any canonical_end
      case 1: {                                                  // breaks the kept prefix
        // Another first token (of two, where the alphabet has one letter).
        if (!ids.empty()) ids[0] = (ids[0] + 1) % static_cast<spec::Token>(std::max<std::size_t>(ranges_.alphabet, 2));
        return spec::Commit{ids, writing_prompt_.size()};
      }
      case 2: return spec::Commit{tokens(below(6)), model.begin_offset};  // unrelated ids
      case 3:
      case 4:
      case 5: return spec::Commit{ids, writing_prompt_.size()};
      default: return spec::Commit{ids, ids.size()};  // decode rows claimed as prefill ones
    }
  }

  D& draws_;
  EventRanges ranges_;
  spec::Tokens writing_prompt_;  // the prompt of the last begin, for its commit
};

/// The default ranges (the audit's), in words.
[[nodiscard]] inline std::string random_ranges() {
  return "tokens 0..2; prompts a prefix of the record plus 0..4 tokens, or 0..7 tokens; begin at the "
         "granted offset, 0, granted + 1 or 0..len; commits the begun prompt plus 0..3 tokens with "
         "canonical_end len(prompt) or 0..len(ids)+1, its first token changed, or 0..5 unrelated "
         "tokens; records canonical_end 0..len+1; configure enabled 7 in 8, keep_min 0..4, chunk 1..4 "
         "or 0 (1 in 12); while writing commit 5 in 10 and abort 1 in 10, while idle query 3 in 10 and begin 3 "
         "in 10, else any event";
}

}  // namespace pfx::refinement
