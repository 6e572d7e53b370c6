#pragma once

/// \file
/// The inputs of `pfx explain` (docs/cli.md, "pfx explain"): a held record and a prompt, each given
/// as inline JSON (text that starts with `[` or `{`) or as the name of a file that holds JSON.
///
///   record  {"ids": [...], "canonical_end": n}, or a plain array of ids (canonical_end = len(ids))
///   prompt  [...], or {"prompt": [...], ...} (a request line of `pfx replay`'s trace)
///
/// A token id is an integer in 0..2^31-1 (pfx::token is int32). Bad input throws InputError with a
/// message that names the option, the file and the field.

#include <pfx/token.hpp>

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace pfx::cli {

/// What the KV state holds, as the record gives it. canonical_end may exceed len(ids): the machine,
/// not the reader, refuses that (INV-9), so that the message is the core's.
struct HeldRecord {
  std::vector<token> ids;
  std::size_t canonical_end = 0;
};

/// Reads the record given to `option` ("--record") as `argument`. `canonical_end`, when given
/// (--canonical-end), replaces the record's, and may then be left out of it.
[[nodiscard]] HeldRecord read_record(std::string_view option, std::string_view argument,
                                     std::optional<std::size_t> canonical_end);

/// Reads the prompt given to `option` ("--prompt") as `argument`.
[[nodiscard]] std::vector<token> read_prompt(std::string_view option, std::string_view argument);

}  // namespace pfx::cli
