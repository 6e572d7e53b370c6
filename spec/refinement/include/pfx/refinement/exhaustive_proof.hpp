#pragma once

/// \file
/// The bounded exhaustive proofs: over every sequence of a two-letter alphabet (or of one letter, for
/// longer prompts) up to a length, every canonical_end and every configuration in a range (prefill
/// steps included), the machine equals the reference model and every invariant of the catalogue
/// holds. The same constexpr bodies run in static_assert
/// (compile_time_proof.cpp: a violation fails the build) and at run time (exhaustive_test.cpp:
/// coverage sees them, and a failure prints the counterexample).

#include <pfx/refinement/bridge.hpp>

#include <pfx/core.hpp>
#include <pfx/spec/catalogue.hpp>
#include <pfx/spec/model.hpp>
#include <pfx/spec/reference.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pfx::refinement {

/// Every sequence over {0, 1} (or over {0}, with one letter) of length 0..max_length, shortest first.
constexpr std::vector<spec::Tokens> all_sequences(std::size_t max_length, std::size_t letters = 2) {
  std::vector<spec::Tokens> all;
  for (std::size_t length = 0; length <= max_length; ++length) {
    const std::size_t count = letters == 1 ? 1 : std::size_t{1} << length;
    for (std::size_t bits = 0; bits < count; ++bits) {
      spec::Tokens s;
      for (std::size_t i = 0; i < length; ++i) s.push_back(static_cast<spec::Token>((bits >> i) & 1U));
      all.push_back(s);
    }
  }
  return all;
}

/// What a proof checked, and the first counterexample it met.
struct Tally {
  std::size_t checked = 0;
  std::size_t failed = 0;
  std::size_t granted = 0;  ///< decisions that offered a non-zero offset: a proof with none is vacuous
  /// Decisions whose offset the prefill step lowered (bound "prefill step", INV-12), and those of
  /// them that it lowered below keep_min (reason "below keep_min": keep_min judged after it).
  std::size_t lowered = 0;
  std::size_t lowered_below_keep_min = 0;
  /// Decisions of a configuration with an admission padding that the reference answers otherwise
  /// without it (INV-12: a padded resume at len(prompt) - 1 kept, or lowered).
  std::size_t padding_mattered = 0;
  /// Decisions of a configuration whose decode rows are exact that the reference answers otherwise
  /// without the premise (INV-2: rows decode wrote granted).
  std::size_t decode_rows_mattered = 0;
  spec::Config config{};
  spec::Tokens ids{};
  std::size_t canonical_end = 0;
  spec::Tokens prompt{};
  std::size_t event = 0;  ///< which event of the case failed (proof-specific, see below)

  constexpr void count(bool ok, const spec::Config& c, const spec::Tokens& held, std::size_t end,
                       const spec::Tokens& asked, std::size_t which) {
    ++checked;
    if (ok) return;
    if (failed++ == 0) {
      config = c;
      ids = held;
      canonical_end = end;
      prompt = asked;
      event = which;
    }
  }
};

/// The rule: for one configuration, every record (ids, canonical_end) and every prompt up to
/// max_length over `letters` letters; the query answer equals the reference and INV-1..12 hold on
/// the record and the query.
constexpr Tally prove_rule(const spec::Config& config, std::size_t max_length, std::size_t letters = 2) {
  Tally tally;
  Machine machine;
  spec::State model;
  const spec::Event configure = spec::Configure{config};
  tally.count(refinement::step_both(machine, model, configure).ok(), config, {}, 0, {}, 0);

  const std::vector<spec::Tokens> sequences = all_sequences(max_length, letters);
  std::vector<spec::Event> queries;  // built once: the constant evaluator is slow to allocate
  queries.reserve(sequences.size());
  for (const spec::Tokens& prompt : sequences) queries.push_back(spec::Query{prompt});
  for (const spec::Tokens& ids : sequences) {
    for (std::size_t end = 0; end <= ids.size(); ++end) {
      const spec::Event record = spec::Record{ids, end};
      tally.count(refinement::step_both(machine, model, record).ok(), config, ids, end, {}, 1);
      const spec::State held = refinement::to_spec(machine);
      for (const spec::Event& query : queries) {
        // A query changes nothing (prove_protocol checks that), so the state before is the state
        // after, and the reference answers from the model's state.
        const spec::Tokens& prompt = std::get<spec::Query>(query).prompt;
        const spec::Output machine_says = refinement::to_spec(machine.query(prompt), query);
        const spec::Output reference_says = spec::reference_decision(model, prompt);
        const spec::Step step{held.config, held, query, machine_says, held};
        tally.count(machine_says == reference_says && spec::all_hold(step), config, ids, end,
                    prompt, 2);
        if (machine_says.offset != 0) ++tally.granted;
        if (reference_says.bound == "prefill step") {
          ++tally.lowered;
          if (reference_says.reason == "below keep_min") ++tally.lowered_below_keep_min;
        }
        if (config.admission_padding != 0) {
          spec::State unpadded = model;
          unpadded.config.admission_padding = 0;
          if (spec::reference_decision(unpadded, prompt) != reference_says) ++tally.padding_mattered;
        }
        if (config.decode_rows_exact) {
          spec::State inexact = model;
          inexact.config.decode_rows_exact = false;
          if (spec::reference_decision(inexact, prompt) != reference_says) ++tally.decode_rows_mattered;
        }
      }
    }
  }
  return tally;
}

/// The protocol: from every record, every prompt, begin with offsets granted and not; from Writing,
/// abort, commits good and bad, and every event the phase refuses; after an abort, a good commit and
/// a clear, the commit of the write the clear tainted or a second request; from Idle, commit and abort, and a record past its
/// ids.
/// Each step is compared with the reference and checked against INV-1..12.
constexpr Tally prove_protocol(const spec::Config& config, std::size_t max_length, std::size_t letters = 2) {
  Tally tally;
  Machine idle;
  spec::State idle_model;
  const spec::Event configure = spec::Configure{config};
  tally.count(refinement::step_both(idle, idle_model, configure).ok(), config, {}, 0, {}, 0);

  const std::vector<spec::Tokens> sequences = all_sequences(max_length, letters);
  for (const spec::Tokens& ids : sequences) {
    for (std::size_t end = 0; end <= ids.size(); ++end) {
      const spec::Event record = spec::Record{ids, end};
      tally.count(refinement::step_both(idle, idle_model, record).ok(), config, ids, end, {}, 1);

      // Idle refuses commit and abort; record refuses a canonical_end past its ids.
      const spec::Event idle_refused[] = {spec::Commit{ids, end}, spec::Abort{},
                                          spec::Record{ids, ids.size() + 1}};
      for (const spec::Event& e : idle_refused) {
        Machine m = idle;
        spec::State s = idle_model;
        tally.count(refinement::step_both(m, s, e).ok(), config, ids, end, {}, 2);
      }

      for (const spec::Tokens& prompt : sequences) {
        const std::size_t granted = spec::reference_offset(idle_model, prompt);
        if (config.decode_rows_exact) {
          spec::State inexact = idle_model;
          inexact.config.decode_rows_exact = false;
          if (spec::reference_offset(inexact, prompt) != granted) ++tally.decode_rows_mattered;
        }
        const std::size_t offsets[] = {0, granted, granted + 1, 1};
        for (const std::size_t offset : offsets) {
          Machine writing = idle;
          spec::State writing_model = idle_model;
          const spec::Event begin = spec::Begin{prompt, offset};
          const refinement::Comparison began = refinement::step_both(writing, writing_model, begin);
          tally.count(began.ok(), config, ids, end, prompt, 3);
          if (writing.phase() != Phase::writing) continue;
          if (began.machine.offset != 0) ++tally.granted;

          // ids = prompt + one generated token; one whose kept prefix is broken; and the prompt.
          spec::Tokens answered = prompt;
          answered.push_back(1);
          spec::Tokens broken = answered;
          broken[0] = 1 - broken[0];
          const spec::Event in_writing[] = {
              spec::Abort{},
              spec::Commit{answered, prompt.size()},
              spec::Commit{answered, answered.size()},
              spec::Commit{answered, answered.size() + 1},
              spec::Commit{answered, offset == 0 ? 0 : offset - 1},
              spec::Commit{broken, prompt.size()},
              spec::Commit{prompt, prompt.size()},
              spec::Query{prompt},
              spec::Begin{prompt, 0},
              spec::Record{prompt, 0},
              spec::Configure{config},
              spec::Clear{},
          };
          std::size_t which = 4;
          for (const spec::Event& e : in_writing) {
            Machine m = writing;
            spec::State s = writing_model;
            tally.count(refinement::step_both(m, s, e).ok(), config, ids, end, prompt, which);
            // After an abort, the lane's commit and a clear: the lane's next move, that is the
            // commit of the write the clear tainted, or a second request for the same prompt at
            // the offset granted then.
            const bool follow = std::holds_alternative<spec::Abort>(e) || std::holds_alternative<spec::Clear>(e) ||
                                which == 5;
            if (!follow) {
              ++which;
              continue;
            }
            std::vector<spec::Event> next;
            if (m.phase() == Phase::writing) {
              next.push_back(spec::Commit{answered, prompt.size()});
            } else {
              next.push_back(spec::Begin{prompt, spec::reference_offset(s, prompt)});
              next.push_back(spec::Commit{answered, prompt.size()});
            }
            for (const spec::Event& n : next) {
              tally.count(refinement::step_both(m, s, n).ok(), config, ids, end, prompt, which + 100);
            }
            ++which;
          }
        }
      }
    }
  }
  return tally;
}

/// The prefill steps of a domain: 0..max_prefill_step, and SIZE_MAX (one step whatever the length)
/// when that is above 0.
constexpr std::vector<std::size_t> prefill_steps(std::size_t max_prefill_step) {
  std::vector<std::size_t> steps;
  for (std::size_t step = 0; step <= max_prefill_step; ++step) steps.push_back(step);
  if (max_prefill_step > 0) steps.push_back(SIZE_MAX);
  return steps;
}

/// The admission paddings of a domain: 0 alone, or with max_admission_padding above 0 also 1 and
/// it (only whether it is 0 changes the rule; the top of the range shows a padding that wrapped).
constexpr std::vector<std::size_t> admission_paddings(std::size_t max_admission_padding) {
  std::vector<std::size_t> paddings = {0};
  if (max_admission_padding > 0) paddings.push_back(1);
  if (max_admission_padding > 1) paddings.push_back(max_admission_padding);
  return paddings;
}

/// Configuration changes, chunk 0 included, from Idle with something held, held under decode rows
/// exact or not; with prefill steps 0..max_prefill_step and SIZE_MAX and admission paddings 0, 1
/// and SIZE_MAX, each valid and each keeping the record; decode rows exact or not, a change of which
/// forgets it.
constexpr Tally prove_configure(std::size_t max_chunk, std::size_t max_prefill_step = 2) {
  Tally tally;
  const spec::Tokens ids = {0, 1, 0, 1};
  for (std::size_t keep_min = 0; keep_min <= 2; ++keep_min) {
    for (std::size_t chunk = 0; chunk <= max_chunk; ++chunk) {
      for (const std::size_t step : prefill_steps(max_prefill_step)) {
        for (const std::size_t padding : admission_paddings(SIZE_MAX)) {
          for (const bool held_exact : {false, true}) {
            for (const bool exact : {false, true}) {
              for (const bool enabled : {true, false}) {
                Machine m;
                spec::State s;
                spec::Config held_under;
                held_under.decode_rows_exact = held_exact;
                tally.count(refinement::step_both(m, s, spec::Configure{held_under}).ok(), held_under, {}, 0, {}, 0);
                const spec::Event record = spec::Record{ids, 3};
                tally.count(refinement::step_both(m, s, record).ok(), held_under, ids, 3, {}, 0);
                const spec::Config c{enabled, keep_min, chunk, step, padding, exact};
                const spec::Event configure = spec::Configure{c};
                tally.count(refinement::step_both(m, s, configure).ok(), c, ids, 3, {}, 1);
              }
            }
          }
        }
      }
    }
  }
  return tally;
}

/// The bounded domain of a proof: sequences up to max_length over `letters` letters; keep_min
/// 0..max_keep_min; chunk 1..max_chunk; prefill_step as prefill_steps(max_prefill_step) says;
/// admission_padding as admission_paddings(max_admission_padding) says; decode rows exact or not
/// (or not only); enabled and not.
struct Domain {
  std::size_t max_length;
  std::size_t max_keep_min;
  std::size_t max_chunk;
  std::size_t max_prefill_step = 0;  ///< 0: no prefill step premise only
  /// 2 letters realise every first difference (docs/spec.md); 1 (every token 0) reaches longer
  /// prompts for the same cost, which the prefill step's arithmetic needs.
  std::size_t letters = 2;
  /// 0: no admission padding only; else also 1 and this (INV-12: a padded resume at len - 1).
  std::size_t max_admission_padding = 0;
  /// false: decode rows not exact only (INV-2 as ever); true: also exact (INV-2 bounds by len(ids)).
  bool decode_facts = false;
};

/// Which configurations of a domain one run of a proof covers: all of them, or one (chunk,
/// keep_min) pair, enabled and not, with decode rows exact, not, or both (so that the compile-time
/// proofs split over several files, each small enough for a compiler's memory).
struct Slice {
  bool whole = true;
  std::size_t chunk = 0;
  std::size_t keep_min = 0;
  int decode_rows_exact = -1;  ///< -1: both values the domain has; 0: not exact only; 1: exact only
};
inline constexpr Slice whole_domain{};
constexpr Slice only(std::size_t chunk, std::size_t keep_min, int decode_rows_exact = -1) {
  return {false, chunk, keep_min, decode_rows_exact};
}

/// Runs `prove` on every configuration of the domain in the slice and adds up the tallies (the first
/// counterexample is kept).
template <class Prove>
constexpr Tally over_domain(const Domain& domain, Prove prove, const Slice& slice) {
  Tally total;
  const std::vector<std::size_t> steps = prefill_steps(domain.max_prefill_step);
  const std::vector<std::size_t> paddings = admission_paddings(domain.max_admission_padding);
  for (std::size_t chunk = 1; chunk <= domain.max_chunk; ++chunk) {
    for (std::size_t keep_min = 0; keep_min <= domain.max_keep_min; ++keep_min) {
      if (!slice.whole && (chunk != slice.chunk || keep_min != slice.keep_min)) continue;
      for (const std::size_t step : steps) {
        for (const std::size_t padding : paddings) {
          for (const bool exact : {false, true}) {
            if (exact && !domain.decode_facts) continue;
            if (!slice.whole && slice.decode_rows_exact >= 0 && exact != (slice.decode_rows_exact == 1)) continue;
            for (const bool enabled : {true, false}) {
              Tally t = prove(spec::Config{enabled, keep_min, chunk, step, padding, exact}, domain.max_length,
                              domain.letters);
              const Tally sum{total.checked + t.checked,
                              total.failed + t.failed,
                              total.granted + t.granted,
                              total.lowered + t.lowered,
                              total.lowered_below_keep_min + t.lowered_below_keep_min,
                              total.padding_mattered + t.padding_mattered,
                              total.decode_rows_mattered + t.decode_rows_mattered};
              if (total.failed == 0 && t.failed != 0) total = t;  // keep the first counterexample
              total.checked = sum.checked;
              total.failed = sum.failed;
              total.granted = sum.granted;
              total.lowered = sum.lowered;
              total.lowered_below_keep_min = sum.lowered_below_keep_min;
              total.padding_mattered = sum.padding_mattered;
              total.decode_rows_mattered = sum.decode_rows_mattered;
            }
          }
        }
      }
    }
  }
  return total;
}

constexpr Tally prove_rule_over(const Domain& domain, const Slice& slice = whole_domain) {
  return over_domain(
      domain, [](const spec::Config& c, std::size_t n, std::size_t letters) { return prove_rule(c, n, letters); },
      slice);
}

constexpr Tally prove_protocol_over(const Domain& domain, const Slice& slice = whole_domain) {
  return over_domain(
      domain,
      [](const spec::Config& c, std::size_t n, std::size_t letters) { return prove_protocol(c, n, letters); },
      slice);
}

/// The domains checked at compile time: compile_time_proof.cpp is compiled once per (chunk,
/// keep_min) slice, each in well under a minute here. The run-time test checks these domains, and
/// larger ones, with the same bodies.
/// Both domains of the rule and the protocol take decode rows exact and not (INV-2 either way).
inline constexpr Domain compile_time_rule_domain{5, 3, 3, 0, 2, 0, true};
/// The protocol's compile-time domain has chunk 1 only: with prompts of 2 tokens a chunk of 2 can
/// grant no offset but 0, and a slice that grants nothing proves nothing. The model checker
/// (model_checker.hpp) covers chunks 1..5 at run time.
inline constexpr Domain compile_time_protocol_domain{2, 1, 1, 0, 2, 0, true};
/// The rule under the prefill step (INV-12): its arithmetic depends on the prompt's length, the
/// reusable length, chunk and prefill_step, not on which tokens differ, so one letter reaches
/// prompts of 10 tokens, long enough for every case of the bound (a cold run that ends alone in
/// steps up to 4, an lcm(chunk, step) that leaves 0 and one that does not, one chunk down, an offset
/// lowered below keep_min), each slice for about a third of the cost of a slice of the rule's; with
/// admission padding 0 and 1, so that a padded resume at len - 1 is judged where the cold run ends
/// alone (lowered) and where it does not (kept).
inline constexpr Domain compile_time_step_domain{10, 2, 3, 4, 1, 1};
inline constexpr Domain run_time_rule_domain{5, 3, 3, 3, 2, 0, true};
inline constexpr Domain run_time_protocol_domain{3, 3, 3, 2, 2, 0, true};
inline constexpr Domain run_time_step_domain{12, 3, 4, 6, 1, SIZE_MAX};

}  // namespace pfx::refinement
