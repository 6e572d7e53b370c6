#pragma once

/// \file
/// The reference model's vocabulary: plain structs of fields, written straight from docs/spec.md.
/// Shares no code with core/ (the point of a reference is to be written independently).

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>
#include <vector>

namespace pfx::spec {

using Token = std::int32_t;
using Tokens = std::vector<Token>;

struct Config {
  bool enabled = true;
  std::size_t keep_min = 64;
  std::size_t chunk = 1;
  std::size_t prefill_step = 0;  ///< 0: no one-token-step premise (INV-12)
  /// Rows the engine adds to an admission that leaves one token to compute; 0: none (INV-12).
  std::size_t admission_padding = 0;
  /// The engine writes a decode row as a cold prefill of the same tokens writes that row; false:
  /// no such premise (INV-2 bounds every offer by canonical_end).
  bool decode_rows_exact = false;
  friend constexpr bool operator==(const Config&, const Config&) = default;
};

/// The whole protocol state: the rule's knobs, the record, the phase, and, while writing, the prompt
/// being written and whether a clear has made its rows unusable.
struct State {
  Config config{};
  Tokens ids{};
  std::size_t canonical_end = 0;
  bool writing = false;
  std::size_t begin_offset = 0;
  Tokens begun{};
  bool tainted = false;
  friend constexpr bool operator==(const State&, const State&) = default;
};

struct Query {
  Tokens prompt;
};
struct Begin {
  Tokens prompt;
  std::size_t offset = 0;
};
struct Commit {
  Tokens ids;
  std::size_t canonical_end = 0;
};
struct Abort {};
struct Record {
  Tokens ids;
  std::size_t canonical_end = 0;
};
struct Clear {};
struct Configure {
  Config config;
};
using Event = std::variant<Query, Begin, Commit, Abort, Record, Clear, Configure>;

/// What an event answers. Names are the ones docs/spec.md uses, so that the model and the machine
/// are compared by meaning, not by sharing an enum.
struct Output {
  std::string_view refusal = "none";
  bool has_decision = false;  ///< query and begin answer a decision (unless refused for the phase)
  std::size_t offset = 0;
  std::size_t common_prefix = 0;
  std::string_view reason = "";
  std::string_view bound = "";
  [[nodiscard]] constexpr bool accepted() const { return refusal == "none"; }
  friend constexpr bool operator==(const Output&, const Output&) = default;
};

}  // namespace pfx::spec
