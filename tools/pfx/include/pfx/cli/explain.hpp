#pragma once

/// \file
/// `pfx explain` (docs/cli.md, "pfx explain"): the decision of the offset rule for a held record and
/// a prompt, each bound with its value and the invariant it keeps, and which bound decided.

#include <pfx/cli/command.hpp>
#include <pfx/cli/options.hpp>  // default_chunk: the chunk replay runs on, so that both decide alike
#include <pfx/core.hpp>

#include <cstddef>
#include <optional>
#include <string>

namespace pfx::cli {

struct ExplainOptions {
  std::string record;  ///< inline JSON, or a file name (explain_input.hpp)
  std::string prompt;  ///< inline JSON, or a file name
  std::optional<std::size_t> canonical_end;  ///< replaces the record's
  std::optional<std::size_t> chunk;          ///< default_chunk when not given
  std::optional<std::size_t> keep_min;       ///< TF_GLM53_PREFIX_CACHE_MIN (default 64) when not given
  std::optional<bool> enabled;               ///< reuse on or off; TF_GLM53_PREFIX_CACHE when not given
  bool disabled = false;                     ///< deprecated --disabled: the same as enabled = false
  bool json = false;
};

/// The configuration explain decides with: the options, and for what they leave out `pfx replay`'s
/// defaults (chunk 64; reuse and keep_min from the environment, as a lane reads them). Throws
/// driver::ConfigError for a malformed environment variable.
[[nodiscard]] Config explain_config(const ExplainOptions& options);

/// Reads the record and the prompt, runs them through a real Machine (configure, record, query) and
/// writes the decision and its bounds to `streams.out` (text, or JSON with options.json). Throws
/// InputError for bad input, including a record or configuration the machine refuses (INV-9), with
/// the machine's own words. Returns exit_ok.
[[nodiscard]] int run_explain(const ExplainOptions& options, const Streams& streams);

}  // namespace pfx::cli
