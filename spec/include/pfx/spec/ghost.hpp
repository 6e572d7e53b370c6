#pragma once

/// \file
/// The ghost state: what every KV row holds, as the engine computed it, driven by the protocol's
/// events and the writes each request implies. It knows nothing of the record: it is the ground truth
/// the record is checked against. SAFE is the top-level safety property (docs/spec.md):
///
///   whenever the machine offers offset o for prompt P, every row below o holds exactly what a cold
///   prefill of P on the current chunk grid writes there.
///
/// Each row carries its writer's tag (prefill or decode) and whether the engine that wrote it wrote
/// decode rows exactly (Config::decode_rows_exact): such an engine's row depends on the tokens up to
/// it and the rows below, not on the step that computed it, so a decode row, or a prefill row of a
/// chunk that ended early, is then the same computation as a cold prefill's row.
///
/// Written from these definitions alone (docs/spec.md, THM-1's premises), not from core/.

#include <pfx/spec/model.hpp>

#include <cstddef>
#include <utility>
#include <variant>
#include <vector>

namespace pfx::spec {

/// How a row's contents came to be.
enum class Origin {
  unwritten,  ///< never written since the start
  unusable,   ///< being rewritten, left half-written by a failed request, or forgotten by clear
  prefill,    ///< written by a prefill chunk [start, end)
  decode,     ///< written by decode, one row at a time, at position start
};

/// One KV row as the ghost knows it. Under THM-1's premise a prefill chunk's rows depend only on its
/// tokens, its start and the rows before it; so two rows are the same computation when they come
/// from the same chunk [start, end) over the same tokens [0, end), on top of rows that were the
/// same computations (cold_basis, on `grid`; for start 0 there are none, and the grid does not matter).
struct Row {
  Origin origin = Origin::unwritten;
  Tokens from{};           ///< the tokens the computation saw: [0, end) for prefill, [0, i] for decode
  std::size_t start = 0;   ///< prefill: the chunk [start, end) that wrote the row
  std::size_t end = 0;
  std::size_t grid = 0;    ///< the chunk grid it was computed on (decode: the grid of the rows below)
  bool cold_basis = false; ///< every row below start (decode: below the row) was, when this one was
                           ///< computed, what a cold prefill of `from` on `grid` writes there
  bool exact = false;      ///< written by an engine whose decode rows are exact (decode_rows_exact)
  friend constexpr bool operator==(const Row&, const Row&) = default;
};

/// Row i of a cold prefill of `prompt` from 0 on chunk grid `grid` (i < len(prompt)).
constexpr Row cold_row(const Tokens& prompt, std::size_t grid, std::size_t i) {
  Row r;
  r.origin = Origin::prefill;
  r.start = i - i % grid;
  r.end = r.start + grid < prompt.size() ? r.start + grid : prompt.size();
  r.from = Tokens(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(r.end));
  r.grid = grid;
  r.cold_basis = true;
  return r;
}

/// Whether `held` is the same computation as `cold` (a cold_row), so holds the same bits.
constexpr bool same_computation(const Row& held, const Row& cold) {
  return held.origin == Origin::prefill && held.cold_basis && held.start == cold.start &&
         held.end == cold.end && held.from == cold.from && (held.start == 0 || held.grid == cold.grid);
}

/// The KV state as the ghost knows it, and the request in flight.
struct Ghost {
  std::vector<Row> rows{};   ///< rows past the end are unwritten
  std::size_t grid = Config{}.chunk;  ///< the engine's prefill grid: the configured chunk
  /// Whether the engine writes decode rows exactly: the configured decode_rows_exact.
  bool exact = Config{}.decode_rows_exact;
  bool writing = false;
  Tokens request{};          ///< the prompt of the request in flight
  std::size_t from_row = 0;  ///< where its prefill starts
  bool forgotten = false;    ///< a clear happened during it: nothing it writes is usable
  friend constexpr bool operator==(const Ghost&, const Ghost&) = default;

  [[nodiscard]] constexpr Row row(std::size_t i) const { return i < rows.size() ? rows[i] : Row{}; }

  /// Row i is what a cold prefill of `prompt` on the current grid writes there: same_computation
  /// with cold_row(prompt, grid, i), without building that row; or, on an engine that writes decode
  /// rows exactly, a row that engine wrote from the same tokens [0, i] on a cold basis (exact_row).
  [[nodiscard]] constexpr bool holds_cold(const Tokens& prompt, std::size_t i) const {
    if (i >= prompt.size() || i >= rows.size()) return false;
    const Row& held = rows[i];
    if (exact_row(prompt, i)) return true;
    const std::size_t start = i - i % grid;
    const std::size_t end = start + grid < prompt.size() ? start + grid : prompt.size();
    if (held.origin != Origin::prefill || !held.cold_basis || held.start != start || held.end != end ||
        (start != 0 && held.grid != grid) || held.from.size() != end) {
      return false;
    }
    for (std::size_t t = 0; t < end; ++t) {
      if (held.from[t] != prompt[t]) return false;
    }
    return true;
  }

  /// The premise decode_rows_exact, on an engine that has it now: row i, written by it (decode, or
  /// a prefill chunk started on the grid) from the tokens prompt[0, i] on top of rows that were then
  /// a cold prefill's, is what a cold prefill of `prompt` writes there, whatever follows row i in
  /// its chunk or step. Precondition: i < len(prompt), i < len(rows).
  [[nodiscard]] constexpr bool exact_row(const Tokens& prompt, std::size_t i) const {
    const Row& held = rows[i];
    if (!exact || !held.exact || !held.cold_basis || held.grid != grid || held.from.size() <= i) return false;
    const bool written = held.origin == Origin::decode ||
                         (held.origin == Origin::prefill && held.start == i - i % grid);
    if (!written) return false;
    for (std::size_t t = 0; t <= i; ++t) {
      if (held.from[t] != prompt[t]) return false;
    }
    return true;
  }

  /// SAFE for one offer: every row below `offset` is what a cold prefill of `prompt` writes there.
  [[nodiscard]] constexpr bool safe(const Tokens& prompt, std::size_t offset) const {
    for (std::size_t i = 0; i < offset; ++i) {
      if (!holds_cold(prompt, i)) return false;
    }
    return true;
  }

  /// The most SAFE allows: the largest n <= len(prompt) - 1 with every row below n cold for the
  /// prompt (the one-left bound is THM-1's: the engine needs a row to produce the first logit).
  [[nodiscard]] constexpr std::size_t most_reusable(const Tokens& prompt) const {
    std::size_t n = 0;
    while (n + 1 < prompt.size() && holds_cold(prompt, n)) ++n;
    return n;
  }

  constexpr void set(std::size_t i, Row r) {
    if (rows.size() <= i) rows.resize(i + 1);
    rows[i] = std::move(r);
  }
  constexpr void make_unusable_from(std::size_t first) {
    for (std::size_t i = first; i < rows.size(); ++i) rows[i] = Row{Origin::unusable};
  }

  /// The engine prefills request[from_row:] in chunks [a, a + grid) from the offset, each on top of the
  /// rows below it, then decodes rows len(prompt) .. len(ids) - 1.
  constexpr void write_request(const Tokens& ids) {
    for (std::size_t a = from_row; a < request.size(); a += grid) {
      const std::size_t b = a + grid < request.size() ? a + grid : request.size();
      bool basis = true;
      for (std::size_t j = 0; j < a; ++j) basis = basis && holds_cold(request, j);
      for (std::size_t i = a; i < b; ++i) {
        set(i, Row{Origin::prefill, Tokens(request.begin(), request.begin() + static_cast<std::ptrdiff_t>(b)),
                   a, b, grid, basis, exact});
      }
    }
    write_decode(request, ids);  // decode feeds the prompt and then the generated tokens reported
  }

  /// Decode writes rows len(prompt) .. len(ids) - 1, row i from ids[0, i], each on top of the rows
  /// below it (its basis is cold when every one of them is a cold prefill's for those tokens).
  constexpr void write_decode(const Tokens& prompt, const Tokens& ids) {
    Tokens context = prompt;
    for (std::size_t i = prompt.size(); i < ids.size(); ++i) {
      context.push_back(ids[i]);
      bool basis = true;
      for (std::size_t j = 0; j < i; ++j) basis = basis && holds_cold(context, j);
      set(i, Row{Origin::decode, context, i, i + 1, grid, basis, exact});
    }
  }
};

/// The ghost's transition for one event, given whether the machine accepted it (a refused event is
/// not served, so the engine writes nothing).
struct GhostStep {
  Ghost& g;
  bool accepted;

  constexpr void operator()(const Query&) const {}
  constexpr void operator()(const Begin& e) const {
    if (!accepted) return;
    g.make_unusable_from(e.offset);  // rewritten from here on; half-written if the request fails
    g.writing = true;
    g.request = e.prompt;
    g.from_row = e.offset;
    g.forgotten = false;
  }
  constexpr void operator()(const Commit& e) const {
    if (!accepted) return;
    if (!g.forgotten) g.write_request(e.ids);
    end_request();
  }
  constexpr void operator()(const Abort&) const {
    if (accepted) end_request();  // what it wrote stays unusable
  }
  constexpr void operator()(const Record& e) const {
    // The original's one-shot publish is the caller's word: the state holds a cold prefill of
    // ids[0:canonical_end) on the current grid, and decode rows after it.
    if (!accepted) return;
    const Tokens prompt(e.ids.begin(), e.ids.begin() + static_cast<std::ptrdiff_t>(e.canonical_end));
    g.rows.clear();
    for (std::size_t i = 0; i < prompt.size(); ++i) {
      Row r = cold_row(prompt, g.grid, i);
      r.exact = g.exact;
      g.set(i, r);
    }
    g.write_decode(prompt, e.ids);
  }
  constexpr void operator()(const Clear&) const {
    g.make_unusable_from(0);  // nothing the state holds is usable any more
    if (g.writing) g.forgotten = true;
  }
  constexpr void operator()(const Configure& e) const {
    if (!accepted) return;
    g.grid = e.config.chunk;  // the engine's grid is the configured chunk
    g.exact = e.config.decode_rows_exact;  // and so is whether it writes decode rows exactly
  }

  constexpr void end_request() const {
    g.writing = false;
    g.request = Tokens{};
    g.from_row = 0;
    g.forgotten = false;
  }
};

/// Advances the ghost by one event the machine answered.
constexpr void follow(Ghost& g, const Event& e, bool accepted) { std::visit(GhostStep{g, accepted}, e); }

}  // namespace pfx::spec
