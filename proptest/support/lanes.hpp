#pragma once

/// \file
/// What the driver tests share: a reference engine of generated sizes, a cold run to compare with,
/// bit-for-bit comparison, and multi-turn traces (turns, edits, repeats, shorter prompts, new
/// sessions, clears) built against the lane's own answers.

#include <pfx/driver/cold_run.hpp>
#include <pfx/driver/engine.hpp>
#include <pfx/driver/kv_state.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/engines/faulty_engine.hpp>
#include <pfx/engines/reference_model.hpp>
#include <pfx/engines/wrapped_engine.hpp>

#include <rapidcheck.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace pfx::test {

/// Small models, so that a property runs hundreds of traces in seconds; chunk and keep_min vary so
/// that offsets land on and off every bound.
inline rc::Gen<engines::ReferenceModelShape> model_shapes() {
  return rc::gen::apply(
      [](std::size_t vocab, std::size_t width, std::size_t layers, std::size_t chunk, std::uint64_t seed) {
        return engines::ReferenceModelShape{.vocab = vocab, .width = width, .hidden = 2 * width,
                                           .layers = layers, .chunk = chunk, .seed = seed};
      },
      rc::gen::element<std::size_t>(8, 24, 64), rc::gen::element<std::size_t>(4, 8, 16),
      rc::gen::element<std::size_t>(2, 3), rc::gen::element<std::size_t>(1, 2, 3, 4, 8, 16),
      rc::gen::arbitrary<std::uint64_t>());
}

/// Prompts of min..max tokens, each id below `vocab`.
inline rc::Gen<std::vector<token>> prompts(std::size_t vocab, std::size_t min, std::size_t max) {
  return rc::gen::mapcat(rc::gen::inRange(min, max + 1), [vocab](std::size_t n) {
    return rc::gen::container<std::vector<token>>(n, rc::gen::inRange<token>(0, static_cast<token>(vocab)));
  });
}

/// `n` token ids below `vocab` from a seeded generator, for the example tests that draw their own.
inline std::vector<token> random_tokens(std::mt19937_64& random, std::size_t n, std::size_t vocab) {
  std::vector<token> out(n);
  for (token& t : out) t = static_cast<token>(random() % vocab);
  return out;
}

/// Each row of [from, to) apart, as kv.for_each_row gives them (in order: it checks that).
inline std::vector<std::vector<std::byte>> rows_apart(const driver::KvState& kv, std::size_t from, std::size_t to) {
  std::vector<std::vector<std::byte>> each;
  kv.for_each_row(from, to, [&](std::size_t, std::span<const std::byte> bytes) { each.emplace_back(bytes.begin(), bytes.end()); });
  return each;
}

/// Bitwise equality of floats (NaN equals the same NaN; -0 differs from +0).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

using driver::rows_written;

/// What a cold run of a prompt produced.
struct Cold {
  std::vector<float> logits;     ///< of the prompt's last row
  std::vector<token> generated;  ///< greedy
  std::vector<float> rows;       ///< rows_written(...) rows of the KV state
};

/// The prompt run cold on a KV state of its own (driver::run_cold: through no Machine and no Lane, so
/// a bug in the lane cannot hide in both sides of a comparison).
inline Cold cold_run(driver::Engine& engine, std::size_t capacity, const std::vector<token>& prompt,
                     std::size_t max_new_tokens) {
  const std::unique_ptr<driver::KvState> kv = engine.make_kv_state(capacity);
  driver::ColdRun run = driver::run_cold(engine, *kv, prompt, max_new_tokens);
  return {std::move(run.logits), std::move(run.generated), kv->copy_rows(0, rows_written(prompt.size(), max_new_tokens))};
}

/// Why a resumed response differs from its cold run, or nullopt when it is the same bit for bit:
/// logits of the prompt's last row, the generated tokens, and every row the request vouches for.
inline std::optional<std::string> differs_from_cold(const driver::Lane& lane, const driver::Response& resumed,
                                                    const Cold& cold, std::size_t prompt,
                                                    std::size_t max_new_tokens) {
  if (!same_bits(resumed.logits, cold.logits)) return "the prompt's logits differ";
  if (resumed.generated != cold.generated) return "the generated tokens differ";
  if (!same_bits(lane.kv().copy_rows(0, rows_written(prompt, max_new_tokens)), cold.rows)) {
    return "the KV rows differ";
  }
  return std::nullopt;
}

/// An engine with a bug: once `peek` (or `peek_in_decode`) is set, after each prefill chunk (or
/// decode step) it also reads the row just past the one it wrote, which it has not written. It adds
/// 0 x that row to a logit, which changes nothing unless the row is NaN.
class PeekingEngine final : public engines::WrappedEngine {
 public:
  using engines::WrappedEngine::WrappedEngine;
  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override {
    inner_.prefill(kv, tokens, position, logits);
    const std::size_t next = position + tokens.size();
    if (peek && next < kv.shape().capacity && (!first_chunk_only || position == 0)) {
      for (const float x : kv.copy_rows(next, next + 1)) logits[0] += 0.0f * x;
    }
  }
  void decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override {
    inner_.decode(kv, next, position, logits);
    if (peek_in_decode && position + 1 < kv.shape().capacity) {
      for (const float x : kv.copy_rows(position + 1, position + 2)) logits[0] += 0.0f * x;
    }
  }

  bool peek = false;            ///< after each prefill chunk
  /// With `peek`: after the chunk at position 0 only, whose logits the later chunks overwrite.
  bool first_chunk_only = false;
  bool peek_in_decode = false;  ///< after each decode step
};

/// Changes the decode row of position `row`, the first time a decode writes it, after the step: the
/// response's logits and tokens are untouched, only that KV row differs from a cold run's (the cold
/// side, run later, writes it unchanged).
class DecodeRowTamperer final : public engines::WrappedEngine {
 public:
  DecodeRowTamperer(driver::Engine& inner, std::size_t row) : WrappedEngine(inner), row_(row) {}
  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override {
    inner_.prefill(kv, tokens, position, logits);
  }
  void decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override {
    inner_.decode(kv, next, position, logits);
    if (position == row_ && !done_) {
      done_ = true;
      kv.fill(position, position + 1, 0.25f);
    }
  }

 private:
  std::size_t row_;
  bool done_ = false;
};

/// What PoisonAuditingEngine throws: the lane let an engine call see a row that is not poisoned.
class PoisonNotApplied : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Checks, on every call, what poisoning promises: a request writes rows in order, so when the
/// engine is asked for row `position` (prefill or decode), that row and every row after it hold
/// nothing (NaN). A row left over from an earlier request, or from a failed call, would show here.
class PoisonAuditingEngine final : public engines::WrappedEngine {
 public:
  using engines::WrappedEngine::WrappedEngine;
  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override {
    audit(kv, position);
    inner_.prefill(kv, tokens, position, logits);
  }
  void decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override {
    audit(kv, position);
    inner_.decode(kv, next, position, logits);
  }

 private:
  static void audit(const driver::KvState& kv, std::size_t position) {
    const std::vector<float> rows = kv.copy_rows(position, kv.shape().capacity);
    const auto live = std::find_if(rows.begin(), rows.end(), [](float x) { return x == x; });
    if (live != rows.end()) {
      throw PoisonNotApplied("an engine call at row " + std::to_string(position) +
                             " found a row at or after it that is not poisoned");
    }
  }
};

/// One step of a multi-turn trace. The prompt is built when the step runs, from what the lane
/// answered before, so that turns extend real answers.
struct TraceStep {
  enum class Kind { next_turn, edit_early, edit_late, repeat, shorter, new_session, clear };
  Kind kind = Kind::next_turn;
  std::vector<token> fresh;     ///< new user tokens
  std::size_t where = 0;        ///< picks the edit position or the cut (taken modulo a length)
  std::size_t system = 0;       ///< which shared system prompt a new session starts with
  std::size_t max_new_tokens = 0;
};

inline const char* name(TraceStep::Kind kind) {
  switch (kind) {
    case TraceStep::Kind::next_turn: return "next turn";
    case TraceStep::Kind::edit_early: return "edit early";
    case TraceStep::Kind::edit_late: return "edit late";
    case TraceStep::Kind::repeat: return "repeat";
    case TraceStep::Kind::shorter: return "shorter";
    case TraceStep::Kind::new_session: return "new session";
    case TraceStep::Kind::clear: return "clear";
  }
  return "?";
}

inline rc::Gen<TraceStep> trace_steps(std::size_t vocab) {
  using Kind = TraceStep::Kind;
  return rc::gen::apply(
      [](Kind kind, std::vector<token> fresh, std::size_t where, std::size_t system, std::size_t max_new) {
        return TraceStep{kind, std::move(fresh), where, system, max_new};
      },
      rc::gen::weightedElement<Kind>({{6, Kind::next_turn}, {2, Kind::edit_early}, {2, Kind::edit_late},
                                      {2, Kind::repeat}, {2, Kind::shorter}, {2, Kind::new_session},
                                      {1, Kind::clear}}),
      rc::gen::resize(24, rc::gen::nonEmpty(rc::gen::container<std::vector<token>>(
                              rc::gen::inRange<token>(0, static_cast<token>(vocab))))),
      rc::gen::arbitrary<std::size_t>(), rc::gen::inRange<std::size_t>(0, 3),
      rc::gen::inRange<std::size_t>(0, 6));
}

/// Builds each step's prompt from the last one and the lane's last answer. System prompts are shared
/// between sessions, so a new session can reuse another's rows.
class TraceBuilder {
 public:
  TraceBuilder(std::size_t vocab, std::size_t capacity, std::uint64_t seed) : vocab_(vocab), capacity_(capacity) {
    for (std::size_t s = 0; s < 3; ++s) {
      std::vector<token> system(8 + 13 * s);
      for (std::size_t i = 0; i < system.size(); ++i) {
        system[i] = static_cast<token>((seed + 7 * s + 31 * i * i) % vocab);
      }
      systems_.push_back(std::move(system));
    }
  }

  /// The prompt of `step` (empty for a clear).
  std::vector<token> prompt(const TraceStep& step) const {
    using Kind = TraceStep::Kind;
    std::vector<token> p;
    switch (step.kind) {
      case Kind::clear: return {};
      case Kind::next_turn:
        p = conversation_;
        p.insert(p.end(), step.fresh.begin(), step.fresh.end());
        break;
      case Kind::edit_early:
      case Kind::edit_late:
        p = conversation_.empty() ? systems_[step.system] : conversation_;
        {
          const std::size_t quarter = std::max<std::size_t>(1, p.size() / 4);
          const std::size_t at = step.kind == Kind::edit_early ? step.where % quarter
                                                               : p.size() - 1 - step.where % quarter;
          // the edit always changes the token, so the prompt diverges exactly there
          p[at] = step.fresh.front() == p[at] ? static_cast<token>((static_cast<std::size_t>(p[at]) + 1) % vocab_)
                                              : step.fresh.front();
        }
        p.insert(p.end(), step.fresh.begin() + 1, step.fresh.end());
        break;
      case Kind::repeat: p = last_prompt_.empty() ? systems_[step.system] : last_prompt_; break;
      case Kind::shorter:
        p = last_prompt_.empty() ? systems_[step.system] : last_prompt_;
        p.resize(1 + step.where % p.size());
        break;
      case Kind::new_session:
        p = systems_[step.system];
        p.insert(p.end(), step.fresh.begin(), step.fresh.end());
        break;
    }
    if (p.size() + step.max_new_tokens > capacity_) {  // too long for the lane: a new session instead
      p = systems_[step.system];
      p.insert(p.end(), step.fresh.begin(), step.fresh.end());
    }
    return p;
  }

  /// Records what the lane answered, for the next step.
  void answered(const std::vector<token>& prompt, const std::vector<token>& generated) {
    last_prompt_ = prompt;
    conversation_ = prompt;
    conversation_.insert(conversation_.end(), generated.begin(), generated.end());
  }

 private:
  std::size_t vocab_;
  std::size_t capacity_;
  std::vector<std::vector<token>> systems_;
  std::vector<token> last_prompt_;
  std::vector<token> conversation_;
};

/// What a replayed trace did, for RC_CLASSIFY.
struct TraceReplay {
  std::size_t reused = 0;                  ///< rows taken from the KV state, over all responses
  std::size_t failures = 0;                ///< requests an injected fault aborted
  std::size_t served_after_a_failure = 0;  ///< responses that followed a failure
};

/// Why the lane's bookkeeping after a step breaks what it promises, or nullopt: rows [0, written_end)
/// may hold data and, with poisoning on, every row past them is NaN, whatever failed (DRV-2, DRV-4).
inline std::optional<std::string> unpoisoned_row(const driver::Lane& lane) {
  if (!lane.options().poison) return std::nullopt;
  const std::size_t capacity = lane.kv().shape().capacity;
  if (lane.written_end() > capacity) return "written_end is past the KV state";
  for (const float x : lane.kv().copy_rows(lane.written_end(), capacity)) {
    if (x == x) return "a row at or past written_end " + std::to_string(lane.written_end()) + " is not poisoned";
  }
  return std::nullopt;
}

/// Replays `steps` through `lane`: every response must equal a cold run on `engine` (the engine
/// without any fault wrapper) bit for bit (THM-1); after it the record must hold exactly prompt +
/// generated with canonical_end = len(prompt) (AUDIT-260) and written_end must be the rows the
/// response wrote; every request an InjectedFault aborted must leave the record holding exactly the
/// prompt's first `offset` tokens (INV-8); after every step no row past written_end may hold data;
/// after a clear nothing is held. Fails the property with the step, its kind and its offset
/// otherwise. The lane must have reuse on.
inline TraceReplay replay_against_cold(driver::Lane& lane, driver::Engine& engine, std::size_t capacity,
                                       const std::vector<TraceStep>& steps, TraceBuilder& trace) {
  TraceReplay replay;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const TraceStep& step = steps[i];
    if (step.kind == TraceStep::Kind::clear) {
      lane.clear();
      if (!lane.machine().held().ids.empty() || lane.machine().held().canonical_end != 0) {
        RC_FAIL("the record still holds something after a clear at step " + std::to_string(i));
      }
      continue;
    }
    const std::vector<token> prompt = trace.prompt(step);
    const std::size_t offset = lane.machine().query(prompt).decision.offset;
    const std::string where = " at step " + std::to_string(i) + " (" + name(step.kind) + ", offset " +
                              std::to_string(offset) + " of " + std::to_string(prompt.size()) + ", after " +
                              std::to_string(replay.failures) + " failures)";
    try {
      const driver::Response response = lane.serve(prompt, step.max_new_tokens);
      RC_ASSERT(response.decision.offset == offset);
      RC_ASSERT(response.prefilled == prompt.size() - offset);
      const Cold cold = cold_run(engine, capacity, prompt, step.max_new_tokens);
      if (const auto why = differs_from_cold(lane, response, cold, prompt.size(), step.max_new_tokens)) {
        RC_FAIL(*why + where);
      }
      std::vector<token> published = prompt;
      published.insert(published.end(), response.generated.begin(), response.generated.end());
      if (lane.machine().held().ids != published || lane.machine().held().canonical_end != prompt.size()) {
        RC_FAIL("the record is not prompt + generated with canonical_end = len(prompt)" + where);
      }
      if (lane.written_end() != rows_written(prompt.size(), step.max_new_tokens)) {
        RC_FAIL("written_end " + std::to_string(lane.written_end()) + " is not the rows the response wrote" +
                where);
      }
      replay.reused += offset;
      replay.served_after_a_failure += replay.failures > 0 ? 1 : 0;
      trace.answered(prompt, response.generated);
    } catch (const engines::InjectedFault&) {
      ++replay.failures;
      if (lane.machine().phase() != Phase::idle) RC_FAIL("the lane is still writing after a failure" + where);
      const std::vector<token> untouched(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(offset));
      if (lane.machine().held().ids != untouched || lane.machine().held().canonical_end > offset) {
        RC_FAIL("the record holds more than the untouched prefix after a failure" + where);
      }
    }
    if (const auto why = unpoisoned_row(lane)) RC_FAIL(*why + where);
  }
  return replay;
}

}  // namespace pfx::test
