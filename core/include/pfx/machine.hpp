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

  /// The offset rule for `prompt` against what is held. Refused while writing: the record is then
  /// being rewritten and no answer about it would be true.
  [[nodiscard]] constexpr Outcome query(std::span<const token> prompt) const noexcept {
    if (phase_ == Phase::writing) return refuse(Refusal::writing);
    return {Refusal::none, decide(config_, held_.ids, held_.canonical_end, prompt)};
  }

  /// Start writing `prompt` into the KV state from `offset` on. Accepts the granted offset, or 0 (a
  /// cold prefill, always safe). The record shrinks to ids[0:offset) at once, so that while rows are
  /// rewritten, and after an abort, it claims none of them (INV-8).
  constexpr Outcome begin(std::span<const token> prompt, std::size_t offset) {
    const Outcome answer = query(prompt);
    if (!answer.accepted()) return answer;
    if (offset != 0 && offset != answer.decision.offset) {
      return {Refusal::offset_not_granted, answer.decision};
    }
    held_.ids.resize(offset);  // INV-8; offset <= lcp <= len(ids), so this only shrinks
    held_.canonical_end = std::min(held_.canonical_end, offset);  // INV-9
    phase_ = Phase::writing;
    begin_offset_ = offset;
    return answer;
  }

  /// Publish the finished request: ids = prompt + generated, canonical_end = len(prompt). Only the
  /// tokens past the kept prefix are copied.
  constexpr Outcome commit(std::span<const token> ids, std::size_t canonical_end) {
    if (phase_ != Phase::writing) return refuse(Refusal::not_writing);
    if (canonical_end > ids.size()) return refuse(Refusal::canonical_end_past_ids);  // INV-9
    if (canonical_end < begin_offset_) return refuse(Refusal::canonical_end_before_offset);
    const std::size_t kept = held_.ids.size();
    if (ids.size() < kept || common_prefix(held_.ids, ids) < kept) {
      return refuse(Refusal::ids_drop_kept_prefix);
    }
    if (config_.enabled) {  // disabled: store nothing (the seed's behaviour)
      grow_to(ids.size());
      held_.ids.insert(held_.ids.end(), ids.begin() + static_cast<std::ptrdiff_t>(kept), ids.end());
      held_.canonical_end = canonical_end;
    }
    phase_ = Phase::idle;
    begin_offset_ = 0;
    return {};
  }

  /// The request failed. The record already holds only ids[0:offset), whose rows were not touched.
  constexpr Outcome abort() noexcept {
    if (phase_ != Phase::writing) return refuse(Refusal::not_writing);
    phase_ = Phase::idle;
    begin_offset_ = 0;
    return {};
  }

  /// The seed's one-shot publish: what the KV state holds now. Stores nothing when disabled.
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

  /// Forget everything held. Always safe, so accepted in any phase.
  constexpr Outcome clear() noexcept {
    held_.ids.clear();
    held_.canonical_end = 0;
    return {};
  }

  /// Change the rule's knobs. Turning reuse off also forgets what is held: while off nothing is
  /// recorded but the KV state is still written, so the old record would go stale (audit 253).
  constexpr Outcome configure(const Config& config) noexcept {
    if (phase_ == Phase::writing) return refuse(Refusal::writing);
    if (config.chunk == 0) return refuse(Refusal::chunk_zero);  // INV-9
    config_ = config;
    if (!config_.enabled) clear();
    return {};
  }

  /// Any event, by value: the protocol as one transition function.
  constexpr Outcome apply(const Event& event) {
    return std::visit([this](const auto& e) { return dispatch(e); }, event);
  }

  /// Keep room for `tokens` ids, as the KV state is allocated once at full capacity: commits and
  /// records within it never allocate.
  constexpr void reserve(std::size_t tokens) { held_.ids.reserve(tokens); }
  /// Tokens the record has room for: max(reserved, the longest record held), never more.
  [[nodiscard]] constexpr std::size_t capacity() const noexcept { return held_.ids.capacity(); }
  /// Bytes this machine occupies: 4 per token of capacity, plus a constant.
  [[nodiscard]] constexpr std::size_t memory_bytes() const noexcept {
    return sizeof(Machine) + capacity() * sizeof(token);
  }

  friend constexpr bool operator==(const Machine&, const Machine&) = default;

 private:
  static constexpr Outcome refuse(Refusal why) noexcept { return {why, {}}; }

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
};

/// The pure transition function: state and event in, new state and output out.
[[nodiscard]] constexpr std::pair<Machine, Outcome> step(Machine state, const Event& event) {
  const Outcome out = state.apply(event);
  return {std::move(state), out};
}

}  // namespace pfx
