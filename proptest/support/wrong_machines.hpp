#pragma once

/// \file
/// Machines known to be wrong: each is core's Machine with one deliberate mistake, the kind a
/// protocol implementation could plausibly make. They exist to show that the verifier can fail:
/// the model checker (spec/refinement/include/pfx/refinement/model_checker.hpp) and the property
/// tests (proptest/support/judged_run.hpp) must catch every one, each by the judgments named in
/// `caught_by`, and `NeverReuses` shows that SAFE alone is not the whole verdict (it is safe, and
/// wrong). Each has core's surface (refinement::MachineLike), so it plugs into the checker and the
/// properties without touching core.

#include <pfx/refinement/bridge.hpp>

#include <pfx/core.hpp>

#include <cstddef>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

namespace pfx::test::wrong {

/// Which judgments must catch a wrong machine.
struct CaughtBy {
  bool safe = false;       ///< SAFE against the ghost state
  bool reference = false;  ///< the answer and state of the reference protocol
  bool invariant = false;  ///< some invariant of the catalogue (INV-1..12)
};

/// core's Machine, forwarded; each wrong machine changes what it gets wrong in apply or query.
class Forwarding {
 public:
  [[nodiscard]] const Config& config() const noexcept { return m_.config(); }
  [[nodiscard]] const Record& held() const noexcept { return m_.held(); }
  [[nodiscard]] Phase phase() const noexcept { return m_.phase(); }
  [[nodiscard]] std::size_t begin_offset() const noexcept { return m_.begin_offset(); }
  [[nodiscard]] std::span<const token> begun() const noexcept { return m_.begun(); }
  [[nodiscard]] bool tainted() const noexcept { return m_.tainted(); }
  [[nodiscard]] Outcome query(std::span<const token> prompt) const { return m_.query(prompt); }
  Outcome apply(const Event& e) { return m_.apply(e); }
  friend bool operator==(const Forwarding&, const Forwarding&) = default;

 protected:
  Machine m_;
};

/// Ignores a clear that comes during a write begun at row 0, reasoning that such a write rewrites
/// every row anyway. It does not: rows written before the clear are gone (ghost: a clear during a
/// write makes what it writes unusable; INV-11, AUDIT-253).
class KeepsItsRecordAcrossAClearDuringAWriteFromRow0 : public Forwarding {
 public:
  static constexpr std::string_view name = "keeps its record across a clear during a write from row 0";
  static constexpr CaughtBy caught_by{true, true, false};
  Outcome apply(const Event& e) {
    if (std::holds_alternative<events::Clear>(e) && m_.phase() == Phase::writing && m_.begin_offset() == 0) {
      return {};
    }
    return m_.apply(e);
  }
  friend bool operator==(const KeepsItsRecordAcrossAClearDuringAWriteFromRow0&,
                         const KeepsItsRecordAcrossAClearDuringAWriteFromRow0&) = default;
};

/// Keeps its record when the chunk changes: the rows were computed on the old grid (ghost: configure
/// moves the grid; THM-1).
class KeepsItsRecordAcrossANewGrid : public Forwarding {
 public:
  static constexpr std::string_view name = "keeps its record across a change of grid (chunk)";
  static constexpr CaughtBy caught_by{true, true, true};
  Outcome apply(const Event& e) {
    const Record kept = m_.held();
    const Config before = m_.config();
    const Outcome out = m_.apply(e);
    if (const auto* c = std::get_if<events::Configure>(&e);
        c != nullptr && out.accepted() && c->config.enabled && before.enabled && c->config.chunk != before.chunk) {
      (void)m_.record(kept.ids, kept.canonical_end);
    }
    return out;
  }
  friend bool operator==(const KeepsItsRecordAcrossANewGrid&, const KeepsItsRecordAcrossANewGrid&) = default;
};

/// Keeps its record when whether decode rows are exact changes, reasoning that the rows are the same
/// whatever is said of the engine. Turned on, the decode rows it holds were written by an engine not
/// known to write them exactly; turned off, rows below canonical_end may be decode rows a resume
/// took (ghost: each row's writer tag; INV-2, INV-11).
class KeepsItsRecordAcrossAChangeOfDecodeRowsExact : public Forwarding {
 public:
  static constexpr std::string_view name = "keeps its record across a change of decode_rows_exact";
  static constexpr CaughtBy caught_by{true, true, true};
  Outcome apply(const Event& e) {
    const Record kept = m_.held();
    const Config before = m_.config();
    const Outcome out = m_.apply(e);
    if (const auto* c = std::get_if<events::Configure>(&e);
        c != nullptr && out.accepted() && c->config.enabled && before.enabled && c->config.chunk == before.chunk &&
        c->config.decode_rows_exact != before.decode_rows_exact) {
      (void)m_.record(kept.ids, kept.canonical_end);
    }
    return out;
  }
  friend bool operator==(const KeepsItsRecordAcrossAChangeOfDecodeRowsExact&,
                         const KeepsItsRecordAcrossAChangeOfDecodeRowsExact&) = default;
};

/// Answers a query with one row more than the rule grants (SAFE's range: every row below the offer).
class OffersOneRowTooMany : public Forwarding {
 public:
  static constexpr std::string_view name = "offers one row too many";
  static constexpr CaughtBy caught_by{true, true, true};
  [[nodiscard]] Outcome query(std::span<const token> prompt) const {
    Outcome out = m_.query(prompt);
    if (out.accepted() && out.decision.offset > 0) ++out.decision.offset;
    return out;
  }
  Outcome apply(const Event& e) {
    if (const auto* q = std::get_if<events::Query>(&e)) return query(q->prompt);
    return m_.apply(e);
  }
  friend bool operator==(const OffersOneRowTooMany&, const OffersOneRowTooMany&) = default;
};

/// Puts back the record it held before a request when the request aborts (unless a clear came),
/// as if a failed write had touched nothing (ghost: begin makes the rows from its offset unusable,
/// and they stay so after an abort; INV-8).
class RepublishesAfterAnAbort : public Forwarding {
 public:
  static constexpr std::string_view name = "republishes its old record after an abort";
  static constexpr CaughtBy caught_by{true, true, true};
  Outcome apply(const Event& e) {
    const Record before = m_.held();
    const bool cleared = m_.tainted();
    const Outcome out = m_.apply(e);
    if (!out.accepted()) return out;
    if (std::holds_alternative<events::Begin>(e)) saved_ = before;
    if (std::holds_alternative<events::Abort>(e) && !cleared) (void)m_.record(saved_.ids, saved_.canonical_end);
    if (m_.phase() == Phase::idle) saved_ = {};
    return out;
  }
  /// The record it means to put back: state the bridge does not read (the model checker keys on it).
  [[nodiscard]] const Record& hidden() const noexcept { return saved_; }
  friend bool operator==(const RepublishesAfterAnAbort&, const RepublishesAfterAnAbort&) = default;

 private:
  Record saved_{};
};

/// Accepts a commit whose canonical_end passes the begun prompt: it claims decode rows as prefill
/// rows (ghost: commit writes decode rows past the prompt; INV-2, AUDIT-260).
class PublishesPastTheBegunPrompt : public Forwarding {
 public:
  static constexpr std::string_view name = "publishes a canonical_end past the begun prompt";
  static constexpr CaughtBy caught_by{true, true, true};
  Outcome apply(const Event& e) {
    const auto* c = std::get_if<events::Commit>(&e);
    const std::size_t prompt = m_.begun().size();
    if (c == nullptr || m_.phase() != Phase::writing || c->canonical_end <= prompt || c->canonical_end > c->ids.size()) {
      return m_.apply(e);
    }
    const Outcome out = m_.commit(c->ids, prompt);
    if (out.accepted() && m_.held().ids.size() == c->ids.size()) (void)m_.record(c->ids, c->canonical_end);
    return out;
  }
  friend bool operator==(const PublishesPastTheBegunPrompt&, const PublishesPastTheBegunPrompt&) = default;
};

/// Accepts a commit whose ids differ from the begun prompt past the kept prefix, and records them
/// (the false record of issue 13): the rows hold the begun prompt (ghost: commit writes the begun
/// prompt's rows; INV-11). Ids that break the kept prefix go to core's commit, so that only rows
/// the write itself wrote are misnamed.
class PublishesIdsOtherThanTheBegunPrompt : public Forwarding {
 public:
  static constexpr std::string_view name = "publishes ids other than the begun prompt";
  static constexpr CaughtBy caught_by{true, true, true};
  Outcome apply(const Event& e) {
    const auto* c = std::get_if<events::Commit>(&e);
    if (c == nullptr || m_.phase() != Phase::writing || c->ids.size() < m_.begun().size() ||
        c->canonical_end > m_.begun().size() || common_prefix(c->ids, m_.held().ids) < m_.held().ids.size()) {
      return m_.apply(e);
    }
    // Commits what was begun followed by the caller's tail, then records the caller's ids.
    std::vector<token> written(m_.begun().begin(), m_.begun().end());
    written.insert(written.end(), c->ids.begin() + static_cast<std::ptrdiff_t>(written.size()), c->ids.end());
    const Outcome out = m_.commit(written, c->canonical_end);
    if (out.accepted() && m_.held().ids == written) (void)m_.record(c->ids, c->canonical_end);
    return out;
  }
  friend bool operator==(const PublishesIdsOtherThanTheBegunPrompt&,
                         const PublishesIdsOtherThanTheBegunPrompt&) = default;
};

/// Records every row of a one-shot publish as prefill, ignoring the canonical_end the caller gives
/// (ghost: record writes decode rows from canonical_end on; INV-2).
class RecordsDecodeRowsAsPrefill : public Forwarding {
 public:
  static constexpr std::string_view name = "records decode rows as prefill rows";
  static constexpr CaughtBy caught_by{true, true, false};
  Outcome apply(const Event& e) {
    if (const auto* r = std::get_if<events::Record>(&e); r != nullptr && r->canonical_end <= r->ids.size()) {
      return m_.record(r->ids, r->ids.size());
    }
    return m_.apply(e);
  }
  friend bool operator==(const RecordsDecodeRowsAsPrefill&, const RecordsDecodeRowsAsPrefill&) = default;
};

/// Never reuses anything: every answer offers 0 and only a cold begin is accepted. SAFE holds (it
/// offers no row); the reference protocol and INV-7 (the largest offset) must catch it.
class NeverReuses : public Forwarding {
 public:
  static constexpr std::string_view name = "never reuses (safe, and wrong)";
  static constexpr CaughtBy caught_by{false, true, true};
  [[nodiscard]] Outcome query(std::span<const token> prompt) const {
    Outcome out = m_.query(prompt);
    out.decision.offset = 0;
    return out;
  }
  Outcome apply(const Event& e) {
    if (const auto* q = std::get_if<events::Query>(&e)) return query(q->prompt);
    if (const auto* b = std::get_if<events::Begin>(&e); b != nullptr && b->offset != 0) {
      const Outcome asked = query(b->prompt);
      return asked.accepted() ? Outcome{Refusal::offset_not_granted, asked.decision} : asked;
    }
    if (std::holds_alternative<events::Begin>(e)) {
      Outcome out = m_.apply(e);
      out.decision.offset = 0;
      return out;
    }
    return m_.apply(e);
  }
  friend bool operator==(const NeverReuses&, const NeverReuses&) = default;
};

static_assert(refinement::MachineLike<KeepsItsRecordAcrossAClearDuringAWriteFromRow0>);
static_assert(refinement::MachineLike<KeepsItsRecordAcrossANewGrid>);
static_assert(refinement::MachineLike<OffersOneRowTooMany>);
static_assert(refinement::MachineLike<RepublishesAfterAnAbort>);
static_assert(refinement::MachineLike<PublishesPastTheBegunPrompt>);
static_assert(refinement::MachineLike<PublishesIdsOtherThanTheBegunPrompt>);
static_assert(refinement::MachineLike<RecordsDecodeRowsAsPrefill>);
static_assert(refinement::MachineLike<NeverReuses>);

}  // namespace pfx::test::wrong
