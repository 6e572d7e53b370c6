#pragma once

/// \file
/// The events of the protocol (docs/spec.md, "The protocol"), as values, so that a whole run can be
/// written down, replayed and compared.

#include <pfx/config.hpp>
#include <pfx/token.hpp>

#include <cstddef>
#include <span>
#include <variant>

namespace pfx::events {

/// Ask for the offset of a prompt. Idle only.
struct Query {
  std::span<const token> prompt;
};
/// Start writing a request at `offset` (0, or the granted offset). Idle -> Writing.
struct Begin {
  std::span<const token> prompt;
  std::size_t offset = 0;
};
/// Publish what the finished request wrote: ids = prompt + generated, canonical_end = len(prompt).
/// Writing -> Idle.
struct Commit {
  std::span<const token> ids;
  std::size_t canonical_end = 0;
};
/// The request failed; keep only the untouched prefix. Writing -> Idle.
struct Abort {};
/// The seed's one-shot publish, for drop-in use. Idle only.
struct Record {
  std::span<const token> ids;
  std::size_t canonical_end = 0;
};
/// Forget everything held. Any phase.
struct Clear {};
/// Change the rule's knobs. Idle only; turning reuse off also forgets what is held.
struct Configure {
  Config config;
};

}  // namespace pfx::events

namespace pfx {

using Event = std::variant<events::Query, events::Begin, events::Commit, events::Abort,
                           events::Record, events::Clear, events::Configure>;

}  // namespace pfx
