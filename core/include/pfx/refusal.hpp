#pragma once

/// \file
/// Why the machine refused an event. A refused event changes nothing (INV-10).

#include <string_view>

namespace pfx {

enum class Refusal {
  none,                       ///< the event was accepted
  writing,                    ///< a request is being written; commit or abort it first
  not_writing,                ///< no request is being written; begin one first
  offset_not_granted,         ///< begin's offset is neither 0 nor the offset the rule grants
  canonical_end_past_ids,     ///< canonical_end > len(ids) (INV-9)
  ids_not_begun_prompt,       ///< commit's ids do not start with the prompt given to begin
  canonical_end_past_prompt,  ///< commit's canonical_end is past the prompt given to begin
  chunk_zero,                 ///< a configuration with chunk 0 (INV-9)
};

/// What went wrong, in words an operator can act on.
[[nodiscard]] constexpr std::string_view describe(Refusal refusal) noexcept {
  switch (refusal) {
    case Refusal::none: return "accepted";
    case Refusal::writing: return "a request is being written: commit or abort it first";
    case Refusal::not_writing: return "no request is being written: begin one first";
    case Refusal::offset_not_granted:
      return "offset is neither 0 nor the offset the rule grants for this prompt";
    case Refusal::canonical_end_past_ids: return "canonical_end is past the end of ids";
    case Refusal::ids_not_begun_prompt: return "ids do not start with the prompt given to begin";
    case Refusal::canonical_end_past_prompt:
      return "canonical_end is past the prompt given to begin: rows from there on were written by "
             "decode";
    case Refusal::chunk_zero: return "chunk must be at least 1";
  }
  return "?";
}

/// The refusal's short name as docs/spec.md writes it.
[[nodiscard]] constexpr std::string_view name(Refusal refusal) noexcept {
  switch (refusal) {
    case Refusal::none: return "none";
    case Refusal::writing: return "writing";
    case Refusal::not_writing: return "not writing";
    case Refusal::offset_not_granted: return "offset not granted";
    case Refusal::canonical_end_past_ids: return "canonical_end past ids";
    case Refusal::ids_not_begun_prompt: return "ids not begun prompt";
    case Refusal::canonical_end_past_prompt: return "canonical_end past prompt";
    case Refusal::chunk_zero: return "chunk zero";
  }
  return "?";
}

}  // namespace pfx
