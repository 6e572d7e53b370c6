#pragma once

/// \file
/// The trace format of `pfx replay` (docs/cli.md, "Trace format"): JSON Lines, one request
/// `{"prompt": [ids...], "max_new_tokens": n}` or one `{"op": "clear"}` per line. Every line is
/// checked against the lane it will be replayed on before anything runs, so that a bad line is
/// reported with its number and field, and nothing is replayed.

#include <pfx/replay/item.hpp>

#include <cstddef>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace pfx::cli {

/// `text` with every control character (and DEL) written as \xHH: text from a trace is printed this
/// way, never raw, so that it cannot move the cursor, ring or clear a terminal.
[[nodiscard]] std::string escaped(std::string_view text);

/// What a request must fit: token ids are 0 .. vocab - 1, and len(prompt) + max_new_tokens <=
/// capacity (the lane's own check, made here so that it is reported with the line).
struct TraceLimits {
  std::size_t vocab = 0;
  std::size_t capacity = 0;
  /// What set the capacity, as messages name it: a string literal (a view, so that the limits stay a
  /// literal type and tables of them can be constexpr).
  std::string_view capacity_source = "--capacity";
};

/// One bad line: where, which field ("" when the line as a whole is bad), and what is wrong.
struct TraceProblem {
  std::size_t line = 0;
  std::string field;
  std::string message;

  /// "<source>:<line>: field \"<field>\": <message>", or without the field part.
  [[nodiscard]] std::string describe(std::string_view source) const;
};

/// A trace as read: the items of its good lines and the problems of its bad ones.
struct Trace {
  std::vector<replay::TraceItem> items;
  std::vector<TraceProblem> problems;
};

/// Parses one line: the item, or the problem with it; never throws. A blank line is no item: the
/// caller skips it (read_trace does).
[[nodiscard]] std::variant<replay::TraceItem, TraceProblem> parse_trace_line(std::string_view text, std::size_t line,
                                                                     const TraceLimits& limits);

/// Reads every line of `in`; blank lines are skipped.
[[nodiscard]] Trace read_trace(std::istream& in, const TraceLimits& limits);

/// The item as one line of the format, without the newline (the inverse of parse_trace_line).
[[nodiscard]] std::string to_trace_line(const replay::TraceItem& item);

}  // namespace pfx::cli
