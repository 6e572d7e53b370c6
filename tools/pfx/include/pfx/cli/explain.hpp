#pragma once

/// \file
/// `pfx explain` (docs/cli.md, "pfx explain"): the decision of the offset rule for a held record and
/// a prompt, each bound with its value and the invariant it keeps, and which bound decided. The
/// record and the prompt are each inline JSON (text that starts with `[` or `{`) or a file's name:
///
///   record  {"ids": [...], "canonical_end": n}, or a plain array of ids (canonical_end = len(ids))
///   prompt  [...], or {"prompt": [...], ...} (a request line of `pfx replay`'s trace)

#include <pfx/cli/command.hpp>
#include <pfx/core.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pfx::cli {

struct ExplainOptions {
  std::string record;  ///< inline JSON, or a file name
  std::string prompt;  ///< inline JSON, or a file name
  std::optional<std::size_t> canonical_end;  ///< replaces the record's
  std::optional<std::size_t> chunk;          ///< default_chunk when not given
  std::optional<std::size_t> keep_min;       ///< TF_GLM53_PREFIX_CACHE_MIN (default 64) when not given
  std::size_t prefill_step = 0;              ///< the engine's prefill step (INV-12); 0: no such premise
  std::size_t admission_padding = 0;         ///< rows added to an admission leaving one token (INV-12); 0: none
  bool decode_rows_exact = false;            ///< the engine writes decode rows as a cold prefill does (INV-2)
  std::optional<bool> enabled;               ///< reuse on or off; TF_GLM53_PREFIX_CACHE when not given
  bool disabled = false;                     ///< deprecated --disabled: the same as enabled = false
  bool json = false;
};

/// What the KV state holds, as the record gives it. canonical_end may exceed len(ids): the machine,
/// not the reader, refuses that (INV-9), so that the message is the core's.
struct HeldRecord {
  std::vector<token> ids;
  std::size_t canonical_end = 0;
};

/// Reads the record given to `option` ("--record") as `argument`; `canonical_end` (--canonical-end),
/// when given, replaces the record's, which may then be left out. Throws InputError naming the
/// option, the file and the field.
[[nodiscard]] HeldRecord read_record(std::string_view option, std::string_view argument,
                                     std::optional<std::size_t> canonical_end);

/// Reads the prompt given to `option` ("--prompt") as `argument`, as read_record does.
[[nodiscard]] std::vector<token> read_prompt(std::string_view option, std::string_view argument);

/// The configuration explain decides with: the options, and for what they leave out `pfx replay`'s
/// defaults (chunk 64; reuse and keep_min from the environment, as a lane reads them; no prefill
/// step, no admission padding). Throws
/// driver::ConfigError for a malformed environment variable.
[[nodiscard]] Config explain_config(const ExplainOptions& options);

/// Runs the record and the prompt through a real Machine (configure, record, query) and writes the
/// decision and its bounds to `streams.out`, as text or JSON. Throws InputError for bad input,
/// including a record or configuration the machine refuses (INV-9), in its words. Returns exit_ok.
[[nodiscard]] int run_explain(const ExplainOptions& options, const Streams& streams);

}  // namespace pfx::cli
