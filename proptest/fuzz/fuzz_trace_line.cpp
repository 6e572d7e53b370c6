// fuzz_trace_line: the trace parser behind `pfx replay` (tools/pfx/src/trace.cpp), fed the input as
// one line and as a whole trace, against several lane limits. A finding is:
//   - an exception from parse_trace_line or read_trace (both promise never to throw);
//   - a problem without a message, or whose describe() is empty or has the wrong line;
//   - an accepted request that breaks the limits it was read against (an empty prompt, a token
//     outside 0 .. vocab - 1, len(prompt) + max_new_tokens past the capacity) or has the wrong line;
//   - an accepted item that does not survive to_trace_line and back unchanged (the round trip);
//   - a trace whose items and problems do not account for its non-blank lines, in order.

#include "finding.hpp"

#include <pfx/cli/trace.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>

namespace {

using pfx::replay::TraceClear;
using pfx::replay::TraceItem;
using pfx::cli::TraceLimits;
using pfx::cli::TraceProblem;
using pfx::replay::TraceRequest;

template <class... Parts>
[[noreturn]] void finding(const Parts&... parts) {
  pfx::fuzz::report_finding("fuzz_trace_line", parts...);
}

/// A tiny lane, a small one, and the largest a token id allows (vocab up to 2^31 - 1, capacity up
/// to SIZE_MAX, so that the capacity arithmetic meets its extremes).
constexpr TraceLimits limits_to_try[] = {
    {1, 1},
    {16, 64},
    {std::numeric_limits<std::int32_t>::max(), std::numeric_limits<std::size_t>::max()},
};

constexpr std::size_t line_number = 7;

/// "(vocab 16, capacity 64)".
std::string shown(const TraceLimits& limits) {
  std::ostringstream out;
  out << "(vocab " << limits.vocab << ", capacity " << limits.capacity << ")";
  return out.str();
}

void check_request(const TraceRequest& request, const TraceLimits& limits) {
  if (request.line != line_number) finding("request has line ", request.line);
  if (request.prompt.empty()) finding("accepted an empty prompt ", shown(limits));
  for (const pfx::token id : request.prompt) {
    if (id < 0 || static_cast<std::size_t>(id) >= limits.vocab) {
      finding("accepted token ", id, " outside the vocabulary ", shown(limits));
    }
  }
  if (request.prompt.size() > limits.capacity ||
      request.max_new_tokens > limits.capacity - request.prompt.size()) {
    finding("accepted ", request.prompt.size(), " prompt tokens and ", request.max_new_tokens,
            " new tokens past the capacity ", shown(limits));
  }
}

void check_problem(const TraceProblem& problem) {
  if (problem.line != line_number) finding("problem has line ", problem.line);
  if (problem.message.empty()) finding("problem without a message");
  const std::string described = problem.describe("trace.jsonl");
  std::ostringstream source_and_line;
  source_and_line << "trace.jsonl:" << line_number << ": ";
  if (described.rfind(source_and_line.str(), 0) != 0) {
    finding("describe() does not start with the source and line: ", described);
  }
}

void check_round_trip(const TraceItem& item, const TraceLimits& limits) {
  const std::string line = pfx::cli::to_trace_line(item);
  auto again = pfx::cli::parse_trace_line(line, line_number, limits);
  if (auto* problem = std::get_if<TraceProblem>(&again)) {
    finding("to_trace_line wrote ", line, ", which parses to a problem: ", problem->describe("again"));
  }
  if (std::get<TraceItem>(again) != item) finding("to_trace_line wrote ", line, ", which parses to another item");
}

void check_line(std::string_view text, const TraceLimits& limits) {
  const auto parsed = pfx::cli::parse_trace_line(text, line_number, limits);
  if (const auto* problem = std::get_if<TraceProblem>(&parsed)) return check_problem(*problem);
  const TraceItem& item = std::get<TraceItem>(parsed);
  if (const auto* request = std::get_if<TraceRequest>(&item)) check_request(*request, limits);
  if (const auto* clear = std::get_if<TraceClear>(&item); clear != nullptr && clear->line != line_number) {
    finding("clear has line ", clear->line);
  }
  check_round_trip(item, limits);
}

bool blank(std::string_view line) { return line.find_first_not_of(" \t\r\n") == std::string_view::npos; }

void check_trace(std::string_view text, const TraceLimits& limits) {
  std::istringstream in{std::string(text)};
  const pfx::cli::Trace trace = pfx::cli::read_trace(in, limits);

  // An independent count of the non-blank lines, split the way std::getline splits.
  std::size_t lines = 0;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    lines += blank(text.substr(start, end - start)) ? 0 : 1;
    start = end + 1;
  }
  if (trace.items.size() + trace.problems.size() != lines) {
    finding(lines, " non-blank lines read as ", trace.items.size(), " items and ", trace.problems.size(), " problems");
  }
  std::size_t last = 0;
  for (const TraceItem& item : trace.items) {
    const std::size_t line = std::visit([](const auto& i) { return i.line; }, item);
    if (line <= last) finding("items out of line order");
    last = line;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    for (const TraceLimits& limits : limits_to_try) {
      check_line(text, limits);
      check_trace(text, limits);
    }
  } catch (const std::exception& e) {
    finding("the parser threw: ", e.what());
  }
  return 0;
}
