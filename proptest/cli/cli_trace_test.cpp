// The trace format of `pfx replay` (docs/cli.md, "Trace format"): good lines read back as what was
// written, every kind of bad line is reported with its line number and field, and no input makes
// the reader throw or crash.

#include "support/requirement.hpp"

#include <pfx/cli/trace.hpp>
#include <pfx/replay/item.hpp>

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <variant>

namespace {

using pfx::token;
using pfx::cli::parse_trace_line;
using pfx::cli::to_trace_line;
using pfx::replay::TraceClear;
using pfx::replay::TraceItem;
using pfx::cli::TraceLimits;
using pfx::cli::TraceProblem;
using pfx::replay::TraceRequest;

constexpr TraceLimits limits{.vocab = 1000, .capacity = 64};

rc::Gen<TraceItem> trace_items() {
  const auto requests = rc::gen::apply(
      [](std::vector<token> prompt, std::size_t max_new, std::string label, std::string id) -> TraceItem {
        return TraceRequest{std::move(prompt), max_new, std::move(label), 0, std::move(id)};
      },
      rc::gen::resize(32, rc::gen::nonEmpty(rc::gen::container<std::vector<token>>(rc::gen::inRange<token>(0, 1000)))),
      rc::gen::inRange<std::size_t>(0, 33), rc::gen::element<std::string>("", "turn", "edit \"early\"", "ünïcode", "bell\x07"),
      rc::gen::element<std::string>("", "\"req-1\"", "42", "18446744073709551615", "{\"k\":[1,\"x\"]}", "null"));
  return rc::gen::weightedOneOf<TraceItem>({{9, requests}, {1, rc::gen::just<TraceItem>(TraceClear{})}});
}

TraceItem at_line(TraceItem item, std::size_t line) {
  std::visit([line](auto& i) { i.line = line; }, item);
  return item;
}

PFX_PROPERTY(Trace, EveryItemReadsBackAsWritten, "CLI-1", ()) {
  const TraceItem item = *trace_items();
  const std::size_t line = *rc::gen::inRange<std::size_t>(1, 100000);
  const std::string text = to_trace_line(item);
  RC_ASSERT(text.find('\n') == std::string::npos);  // one item, one line
  const auto read = parse_trace_line(text, line, limits);
  RC_ASSERT(std::holds_alternative<TraceItem>(read));
  RC_ASSERT(std::get<TraceItem>(read) == at_line(item, line));
}

struct BadLine {
  std::string text;
  std::string field;    ///< "" when the line as a whole is bad
  std::string message;  ///< a part of the message
};

TEST(Trace, EveryKindOfBadLineNamesItsLineAndField) {
  pfx::test::verifies("CLI-2");
  std::string over_capacity = R"({"prompt": [)";  // 65 tokens: over the capacity by themselves
  for (int i = 0; i < 65; ++i) {
    if (i > 0) over_capacity += ',';
    over_capacity += std::to_string(i);
  }
  over_capacity += R"(], "max_new_tokens": 0})";
  const std::string token_id = "expected a token id (an integer in 0..2147483647), got ";  // core's words
  const BadLine cases[] = {
      {R"({"prompt": [1, 2], "max_new_tokens": 4)", "", "malformed JSON"},
      {R"({"prompt": [1, 2],, "max_new_tokens": 4})", "", "malformed JSON"},
      {"not json", "", "malformed JSON"},
      {R"([1, 2, 3])", "", "expected a JSON object, got an array"},
      {R"(17)", "", "expected a JSON object"},
      {R"({"max_new_tokens": 4})", "prompt", "missing"},
      {R"({"prompt": "1 2 3", "max_new_tokens": 4})", "prompt", "expected an array of token ids, got the string"},
      {R"({"prompt": [], "max_new_tokens": 4})", "prompt", "is empty"},
      {R"({"prompt": [1, 2.5], "max_new_tokens": 4})", "prompt", "element 1: " + token_id + "2.5"},
      {R"({"prompt": [1, "2"], "max_new_tokens": 4})", "prompt", "element 1: " + token_id + "the string \"2\""},
      {R"({"prompt": [1, null], "max_new_tokens": 4})", "prompt", "element 1: " + token_id + "null"},
      {R"({"prompt": [1, true], "max_new_tokens": 4})", "prompt", "element 1: " + token_id + "true"},
      {R"({"prompt": [1, -1], "max_new_tokens": 4})", "prompt", "element 1: " + token_id + "-1"},
      {R"({"prompt": [1000], "max_new_tokens": 4})", "prompt", "element 0 is 1000, outside the vocabulary 0..999"},
      {R"({"prompt": [1099511627776], "max_new_tokens": 4})", "prompt", "element 0: " + token_id + "1099511627776"},
      {R"({"prompt": [18446744073709551615], "max_new_tokens": 4})", "prompt", "element 0: " + token_id + "18446744073709551615"},
      {R"({"prompt": [1, 2]})", "max_new_tokens", "missing"},
      {R"({"prompt": [1, 2], "max_new_tokens": "4"})", "max_new_tokens", "expected a non-negative integer, got the string"},
      {R"({"prompt": [1, 2], "max_new_tokens": 4.0})", "max_new_tokens", "expected a non-negative integer, got 4.0"},
      {R"({"prompt": [1, 2], "max_new_tokens": -3})", "max_new_tokens", "is negative (-3)"},
      {R"({"prompt": [1, 2], "max_new_tokens": 1e30})", "max_new_tokens", "expected a non-negative integer"},
      {R"({"prompt": [1, 2], "max_new_tokens": 18446744073709551615})", "max_new_tokens", "do not fit the capacity"},
      {R"({"prompt": [1, 2], "max_new_tokens": 63})", "max_new_tokens", "do not fit the capacity, 64"},
      {R"({"prompt": [1, 2], "max_new_tokens": 9223372036854775807})", "max_new_tokens", "do not fit the capacity"},
      {over_capacity, "prompt", "has 65 tokens, more than the capacity, 64"},
      {R"({"prompt": [1], "max_new_tokens": 0, "label": 3})", "label", "expected a string"},
      {R"({"op": "clr"})", "op", "expected \"clear\", got \"clr\""},
      {R"({"op": 1})", "op", "expected \"clear\""},
      {R"({"op": "clear", "prompt": [1]})", "prompt", "a clear takes no request fields"},
  };
  for (const BadLine& bad : cases) {
    SCOPED_TRACE(bad.text);
    const auto read = parse_trace_line(bad.text, 7, limits);
    ASSERT_TRUE(std::holds_alternative<TraceProblem>(read));
    const TraceProblem& problem = std::get<TraceProblem>(read);
    EXPECT_EQ(problem.line, 7u);
    EXPECT_EQ(problem.field, bad.field);
    EXPECT_NE(problem.message.find(bad.message), std::string::npos) << problem.message;
    const std::string described = problem.describe("t.jsonl");
    EXPECT_EQ(described.rfind("t.jsonl:7: ", 0), 0u) << described;
    if (!bad.field.empty()) {
      EXPECT_NE(described.find("field \"" + bad.field + "\""), std::string::npos) << described;
    }
  }
}

TEST(Trace, FieldsTheFormatDoesNotKnowAreIgnoredAndBlankLinesSkipped) {
  pfx::test::verifies("CLI-1");
  std::istringstream in("{\"prompt\": [5, 6], \"max_new_tokens\": 2, \"id\": \"req-1\", \"meta\": {\"a\": [1]}}\n"
                        "\n   \t\n"
                        "{\"op\": \"clear\", \"why\": \"new day\"}\r\n"
                        "{\"max_new_tokens\": 0, \"prompt\": [7]}");  // no final newline
  const pfx::cli::Trace trace = pfx::cli::read_trace(in, limits);
  ASSERT_TRUE(trace.problems.empty()) << trace.problems[0].describe("t");
  ASSERT_EQ(trace.items.size(), 3u);
  EXPECT_EQ(std::get<TraceRequest>(trace.items[0]), (TraceRequest{{5, 6}, 2, "", 1, "\"req-1\""}));
  EXPECT_EQ(std::get<TraceClear>(trace.items[1]).line, 4u);
  EXPECT_EQ(std::get<TraceRequest>(trace.items[2]), (TraceRequest{{7}, 0, "", 5, ""}));
  EXPECT_EQ(pfx::replay::count_requests(trace.items), 2u);
}

TEST(Trace, ANulByteARepeatedKeyAndAControlCharacterAreReportedWithTheLineAndShownEscaped) {
  pfx::test::verifies("CLI-2");
  std::string nul_line = "{\"prompt\": [1], \"max_new_tokens\": 1}";
  nul_line += '\0';
  const std::vector<std::pair<std::string, std::string>> cases = {
      {nul_line, "a NUL byte at column 37"},
      {"{\"prompt\": [1], \"max_new_tokens\": 1, \"prompt\": [2]}", "field \"prompt\": appears twice in one object"},
      {"{\"prompt\": [1], \"max_new_tokens\": 1, \"x\": {\"a\": 1, \"a\": 2}}", "field \"a\": appears twice"},
      {"{\"prompt\": [1], \"max_new_tokens\": 1, \"label\": \"a\x1b[2Jb\"}", "control character"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::size_t line = 7 + i;
    const auto read = parse_trace_line(cases[i].first, line, limits);
    ASSERT_TRUE(std::holds_alternative<TraceProblem>(read)) << i;
    const std::string message = std::get<TraceProblem>(read).describe("t.jsonl");
    EXPECT_NE(message.find("t.jsonl:" + std::to_string(line) + ": "), std::string::npos) << message;
    EXPECT_NE(message.find(cases[i].second), std::string::npos) << message;
    for (const char c : message) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20) << "a raw control character in: " << message;
  }
  EXPECT_EQ(pfx::cli::escaped(std::string("a\x1b[31m\tb\x7f", 9)), "a\\x1b[31m\\x09b\\x7f");
}

PFX_PROPERTY(Trace, EveryBadLineOfATraceIsReportedWithItsNumber, "CLI-2", ()) {
  // A trace of good lines with some broken ones: exactly the broken ones are reported, by number.
  const auto items = *rc::gen::resize(20, rc::gen::container<std::vector<TraceItem>>(trace_items()));
  const auto broken = *rc::gen::container<std::vector<bool>>(items.size(), rc::gen::arbitrary<bool>());
  std::string text;
  std::set<std::size_t> bad_lines;
  for (std::size_t i = 0; i < items.size(); ++i) {
    std::string line = to_trace_line(items[i]);
    if (broken[i]) {
      line.pop_back();  // drop the closing brace
      bad_lines.insert(i + 1);
    }
    text += line + "\n";
  }
  std::istringstream in(text);
  const pfx::cli::Trace trace = pfx::cli::read_trace(in, limits);
  std::set<std::size_t> reported;
  for (const TraceProblem& problem : trace.problems) reported.insert(problem.line);
  RC_ASSERT(reported == bad_lines);
  RC_ASSERT(trace.items.size() + bad_lines.size() == items.size());
}

PFX_PROPERTY(Trace, NoLineMakesTheReaderThrow, "CLI-2", ()) {
  // Mangled good lines and arbitrary bytes: each is an item or a problem, never an exception.
  std::string line = to_trace_line(*trace_items());
  const auto edits = *rc::gen::resize(6, rc::gen::container<std::vector<std::pair<std::size_t, char>>>(
                                             rc::gen::pair(rc::gen::arbitrary<std::size_t>(), rc::gen::arbitrary<char>())));
  for (const auto& [at, byte] : edits) {
    if (line.empty()) break;
    line[at % line.size()] = byte;
  }
  if (*rc::gen::arbitrary<bool>()) line = line.substr(0, *rc::gen::inRange<std::size_t>(0, line.size() + 1));
  const auto read = parse_trace_line(line, 3, limits);
  if (const auto* problem = std::get_if<TraceProblem>(&read)) {
    RC_ASSERT(problem->line == 3u);
    RC_ASSERT(!problem->message.empty());
  } else {
    RC_CLASSIFY(true, "still a valid line");
  }
}

}  // namespace
