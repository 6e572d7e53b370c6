#pragma once

/// \file
/// The prefix-reuse state machine: the record of what the KV state holds, and the protocol that keeps
/// it true (docs/spec.md). Pure: no I/O, no environment, no globals, no exceptions; a refused event is
/// an output and changes nothing (INV-10).

#include <pfx/common_prefix.hpp>
#include <pfx/config.hpp>
#include <pfx/decision.hpp>
#include <pfx/events.hpp>
#include <pfx/offset_rule.hpp>
#include <pfx/outcome.hpp>
#include <pfx/record.hpp>
#include <pfx/refusal.hpp>
#include <pfx/token.hpp>

#include <algorithm>
#include <cstddef>
#include <span>
#include <utility>
#include <variant>
#include <vector>

namespace pfx {

class Machine {
 public:
  /// Idle, nothing held, Config{} (reuse on, keep_min 64, chunk 1).
  constexpr Machine() = default;

  [[nodiscard]] constexpr const Config& config() const noexcept { return config_; }
  [[nodiscard]] constexpr const Record& held() const noexcept { return held_; }
  [[nodiscard]] constexpr Phase phase() const noexcept { return phase_; }
  /// The offset of the request being written (0 while idle).
  [[nodiscard]] constexpr std::size_t begin_offset() const noexcept { return begin_offset_; }

  /// The offset rule for `prompt` against what is held (decide, INV-1..6).
  /// Refuses: `writing` while a request is written: the record is then being rewritten and no
  /// answer about it would be true.
  /// Effect: none.
  [[nodiscard]] constexpr Outcome query(std::span<const token> prompt) const noexcept {
    if (phase_ == Phase::writing) return refuse(Refusal::writing);
    return {Refusal::none, decide(config_, held_.ids, held_.canonical_end, prompt)};
  }

  /// Start writing `prompt` into the KV state from `offset` on: the granted offset, or 0 (a cold
  /// prefill, always safe).
  /// Refuses: `writing` while another request is written; `offset_not_granted` for any other offset.
  /// Effect: the record shrinks to ids[0:offset) at once, so that while rows are rewritten, and after
  /// an abort, it claims none of them (INV-8); the prompt is kept until commit, which checks that
  /// what it publishes is what was written (INV-11); the phase is writing.
  /// Throws: std::bad_alloc past the reserved capacity (it copies the prompt), the machine then
  /// unchanged; within it, never.
  constexpr Outcome begin(std::span<const token> prompt, std::size_t offset) {
    const Outcome answer = query(prompt);
    if (!answer.accepted()) return answer;
    if (offset != 0 && offset != answer.decision.offset) {
      return {Refusal::offset_not_granted, answer.decision};
    }
    if (prompt.size() > begun_.capacity()) begun_.reserve(prompt.size());  // may throw; nothing changed yet
    begun_.assign(prompt.begin(), prompt.end());
    held_.ids.resize(offset);  // INV-8; offset <= lcp <= len(ids), so this only shrinks
    held_.canonical_end = std::min(held_.canonical_end, offset);  // INV-9
    phase_ = Phase::writing;
    begin_offset_ = offset;
    tainted_ = false;
    return answer;
  }

  /// Publish the finished request: ids = prompt + generated, canonical_end = len(prompt); a smaller
  /// canonical_end is conservative and accepted. With decode_rows_exact, generated names only tokens
  /// whose rows decode wrote, since the rule may then grant every row of ids.
  /// Refuses: `not_writing` while idle; `canonical_end_past_ids` (INV-9); `ids_not_begun_prompt`
  /// when `ids` does not start with the prompt given to begin (INV-11); `canonical_end_past_prompt`
  /// (rows from there on were written by decode, INV-2).
  /// Effect: the record becomes (ids, canonical_end), unless reuse is off or a clear happened during
  /// the write (INV-11), when it stays empty; the phase is idle.
  /// Throws: std::bad_alloc past the reserved capacity (only the tokens past the kept prefix are
  /// copied), the machine then unchanged; within it, never.
  constexpr Outcome commit(std::span<const token> ids, std::size_t canonical_end) {
    if (phase_ != Phase::writing) return refuse(Refusal::not_writing);
    if (canonical_end > ids.size()) return refuse(Refusal::canonical_end_past_ids);  // INV-9
    if (ids.size() < begun_.size() || common_prefix(begun_, ids) < begun_.size()) {
      return refuse(Refusal::ids_not_begun_prompt);  // INV-11: rows hold the begun prompt
    }
    if (canonical_end > begun_.size()) return refuse(Refusal::canonical_end_past_prompt);  // INV-2
    if (config_.enabled && !tainted_) {  // disabled: store nothing (the original's behaviour)
      const std::size_t kept = held_.ids.size();  // ids[0:kept) == prompt[0:kept) == held
      grow_to(ids.size());
      held_.ids.insert(held_.ids.end(), ids.begin() + static_cast<std::ptrdiff_t>(kept), ids.end());
      held_.canonical_end = canonical_end;
    }
    finish_write();
    return {};
  }

  /// The request failed.
  /// Refuses: `not_writing` while idle.
  /// Effect: the phase is idle; the record already holds only ids[0:offset), whose rows were not
  /// touched (INV-8).
  constexpr Outcome abort() noexcept {
    if (phase_ != Phase::writing) return refuse(Refusal::not_writing);
    finish_write();
    return {};
  }

  /// The original Python class's one-shot publish: what the KV state holds now. Unchecked: the caller
  /// vouches that rows [0, canonical_end) are a cold prefill of ids[0:canonical_end) on the current
  /// chunk grid (docs/spec.md).
  /// Refuses: `writing` while a request is written; `canonical_end_past_ids` (INV-9).
  /// Effect: the record becomes (ids, canonical_end); nothing when reuse is off.
  /// Throws: std::bad_alloc past the reserved capacity, the machine then unchanged; within it, never.
  constexpr Outcome record(std::span<const token> ids, std::size_t canonical_end) {
    if (phase_ == Phase::writing) return refuse(Refusal::writing);
    if (canonical_end > ids.size()) return refuse(Refusal::canonical_end_past_ids);  // INV-9
    if (config_.enabled) {
      grow_to(ids.size());
      held_.ids.assign(ids.begin(), ids.end());
      held_.canonical_end = canonical_end;
    }
    return {};
  }

  /// Forget everything held: the KV state no longer holds anything usable.
  /// Refuses: nothing: always safe, so accepted in any phase.
  /// Effect: the record is empty; during a write it taints the write, whose commit then stores
  /// nothing (INV-11).
  constexpr Outcome clear() noexcept {
    forget();
    if (phase_ == Phase::writing) tainted_ = true;
    return {};
  }

  /// Change the rule's knobs.
  /// Refuses: `writing` while a request is written; `chunk_zero` (INV-9).
  /// Effect: the config is `config`. Turning reuse off also forgets what is held: while off nothing
  /// is recorded but the KV state is still written, so the old record would go stale (audit 253).
  /// Changing chunk forgets it too: its rows were computed on the old prefill grid (INV-11, THM-1).
  /// Any prefill_step is valid, and changing it keeps the record: it changes which offsets the rule
  /// grants (INV-12), not the grid the held rows were computed on. So does any admission_padding,
  /// for the same reason: it only changes whether a resume at len(prompt) - 1 is granted.
  /// Changing decode_rows_exact forgets the record: turned on, the decode rows it holds were written
  /// by an engine not known to write them exactly; turned off, rows below its canonical_end may be
  /// decode rows an earlier request wrote and a resume took (INV-2, INV-11).
  constexpr Outcome configure(const Config& config) noexcept {
    if (phase_ == Phase::writing) return refuse(Refusal::writing);
    if (config.chunk == 0) return refuse(Refusal::chunk_zero);  // INV-9
    const bool regrid = config.chunk != config_.chunk;
    const bool refact = config.decode_rows_exact != config_.decode_rows_exact;
    config_ = config;
    if (!config_.enabled || regrid || refact) forget();
    return {};
  }

  /// Any event, by value: the protocol as one transition function.
  constexpr Outcome apply(const Event& event) {
    return std::visit([this](const auto& e) { return dispatch(e); }, event);
  }

  /// Keep room for `tokens` ids in the record and in the begun prompt, as the KV state is allocated
  /// once at full capacity: begins, commits and records within it never allocate (MEM-1). Past it
  /// they grow to exactly what they need, which may throw std::bad_alloc (the machine is then
  /// unchanged); so may reserve itself.
  constexpr void reserve(std::size_t tokens) {
    held_.ids.reserve(tokens);
    begun_.reserve(tokens);
  }
  /// Tokens the record has room for: max(reserved, the longest record held), never more.
  [[nodiscard]] constexpr std::size_t capacity() const noexcept { return held_.ids.capacity(); }
  /// Bytes this machine occupies: 4 per token of the record's capacity and of the begun prompt's
  /// (max(reserved, the longest prompt begun)), plus a constant.
  [[nodiscard]] constexpr std::size_t memory_bytes() const noexcept {
    return sizeof(Machine) + (capacity() + begun_.capacity()) * sizeof(token);
  }
  /// The prompt of the request being written (empty while idle).
  [[nodiscard]] constexpr std::span<const token> begun() const noexcept { return begun_; }
  /// Whether a clear happened during the request being written: its commit will store nothing.
  [[nodiscard]] constexpr bool tainted() const noexcept { return tainted_; }

  friend constexpr bool operator==(const Machine&, const Machine&) = default;

 private:
  static constexpr Outcome refuse(Refusal why) noexcept { return {why, {}}; }

  constexpr void forget() noexcept {
    held_.ids.clear();
    held_.canonical_end = 0;
  }

  constexpr void finish_write() noexcept {
    begun_.clear();  // keeps its capacity
    phase_ = Phase::idle;
    begin_offset_ = 0;
    tainted_ = false;
  }

  /// Grow to exactly `tokens` when needed (no geometric slack), keeping 4 bytes per held token.
  constexpr void grow_to(std::size_t tokens) {
    if (tokens > held_.ids.capacity()) held_.ids.reserve(tokens);
  }

  constexpr Outcome dispatch(const events::Query& e) const noexcept { return query(e.prompt); }
  constexpr Outcome dispatch(const events::Begin& e) { return begin(e.prompt, e.offset); }
  constexpr Outcome dispatch(const events::Commit& e) { return commit(e.ids, e.canonical_end); }
  constexpr Outcome dispatch(const events::Abort&) noexcept { return abort(); }
  constexpr Outcome dispatch(const events::Record& e) { return record(e.ids, e.canonical_end); }
  constexpr Outcome dispatch(const events::Clear&) noexcept { return clear(); }
  constexpr Outcome dispatch(const events::Configure& e) noexcept { return configure(e.config); }

  Config config_{};
  Record held_{};
  Phase phase_ = Phase::idle;
  std::size_t begin_offset_ = 0;
  std::vector<token> begun_{};  ///< the prompt given to begin, while writing
  bool tainted_ = false;        ///< a clear happened during this write
};

/// The pure transition function: state and event in, new state and output out.
[[nodiscard]] constexpr std::pair<Machine, Outcome> step(Machine state, const Event& event) {
  const Outcome out = state.apply(event);
  return {std::move(state), out};
}

}  // namespace pfx
