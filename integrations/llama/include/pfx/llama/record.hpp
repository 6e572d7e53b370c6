#pragma once

/// \file
/// The record that follows a llama.cpp context's KV cache, kept once for every front that serves it:
/// llama-server's slots (integrations/llama_server/pfx_server.cpp) and llama-cpp-python's `Llama`
/// (pfx.integrations.llama_cpp.rule, through the native module). The record is a pfx::Machine whose
/// held ids and canonical_end are the rows a prefill wrote (INV-2: no row decode wrote, unless decode
/// rows are exact). Each
/// front tells it what its context did; the front itself decides when (generate, eval, a slot's
/// launch, a context shift). Where decode rows are exact (Config::decode_rows_exact: a certificate),
/// the rows decode wrote are published too (finish), and the record may hold them. Header-only, pfx's core and the standard library only, no llama.cpp.

#include <pfx/core.hpp>

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace pfx::llama {

/// Before a decision: a write that never committed (a prefill that failed, or a generator dropped
/// before its prefill ended) is aborted, so that only its rows below the offset stay claimed (INV-8);
/// then the record shrinks to the rows `held`, the tokens the context says its rows hold, still
/// agrees with (someone may have moved the context's end or changed its ids by hand).
inline void settle(Machine& record, std::span<const token> held) {
  if (record.phase() == Phase::writing) (void)record.abort();  // INV-8: the rows below its offset stay
  const std::span<const token> ids = record.held().ids;
  // The rows the rule may grant: up to canonical_end, or every row held where decode rows are exact.
  const std::size_t claimed = record.config().decode_rows_exact ? ids.size() : record.held().canonical_end;
  const std::size_t end = std::min(claimed, held.size());
  const std::size_t agreed = common_prefix(held.first(end), ids.first(end));
  if (agreed < claimed) {
    const std::vector<token> kept(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(agreed));
    // a copy: the event replaces the ids it would read from
    (void)record.record(kept, std::min(agreed, record.held().canonical_end));
  }
}

/// settle, then begin writing `prompt` from the offset the rule grants against what is held; returns
/// the decision. The context then keeps its rows below the offset and evaluates the rest.
inline Decision begin(Machine& record, std::span<const token> held, std::span<const token> prompt) {
  settle(record, held);
  Decision decision = record.query(prompt).decision;
  if (!record.begin(prompt, decision.offset).accepted()) {  // never expected: the offset is the one granted
    decision.offset = 0;
    (void)record.begin(prompt, 0);
  }
  return decision;
}

/// settle, then begin a prefill from row 0 (a cold run's rows, which the record may offer later).
inline void begin_cold(Machine& record, std::span<const token> held, std::span<const token> prompt) {
  settle(record, held);
  (void)record.begin(prompt, 0);
}

/// The begun prompt's prefill was evaluated in full: its rows are published, all but a last row that a
/// one-row ubatch computed where the prefill step applies (INV-12: a longer prompt computes that row
/// in a longer ubatch). Rows decode writes next lie past canonical_end. Nothing while not writing.
inline void commit(Machine& record) {
  if (record.phase() != Phase::writing) return;
  const std::vector<token> prompt(record.begun().begin(), record.begun().end());
  (void)record.commit(prompt, prefill_canonical_end(prompt.size(), record.config().prefill_step));
}

/// The request is done and decode rows are exact (Config::decode_rows_exact): the begun prompt is
/// published with the rows decode wrote after it, `held` being the tokens the context's rows hold, its
/// canonical_end as commit's. A held that does not start with the whole prompt (its prefill never
/// ended, or the rows were moved) aborts the write instead: only the rows before its offset stay.
/// Nothing while not writing.
inline void finish(Machine& record, std::span<const token> held) {
  if (record.phase() != Phase::writing) return;
  const std::size_t prompt = record.begun().size();
  if (!record.commit(held, prefill_canonical_end(prompt, record.config().prefill_step)).accepted()) {
    (void)record.abort();  // INV-11: ids must start with the begun prompt
  }
}

/// The begun prompt's prefill failed, stopped short, or was computed otherwise than a prefill of it
/// alone (its tokens shared a batch): only the rows before its offset stay claimed. Nothing while
/// not writing.
inline void abort(Machine& record) {
  if (record.phase() == Phase::writing) (void)record.abort();
}

/// Rows from `row` on are about to be rewritten otherwise than by a prefill (a context shift, an eval
/// by hand, an embedding): a write in progress is cleared, so that its commit stores nothing; else
/// the record shrinks to the rows below `row`.
inline void forget_from(Machine& record, std::size_t row) {
  if (record.phase() == Phase::writing) {
    (void)record.clear();
  } else if (record.held().canonical_end > row) {
    const std::vector<token> kept(record.held().ids.begin(),
                                  record.held().ids.begin() + static_cast<std::ptrdiff_t>(row));
    (void)record.record(kept, row);
  }
}

}  // namespace pfx::llama
