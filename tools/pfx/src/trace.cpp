#include <pfx/cli/trace.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <istream>
#include <limits>
#include <optional>

namespace pfx::cli {
namespace {

using nlohmann::json;

/// What a JSON value is, in the words of the format's documentation.
std::string kind_of(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return fmt::format("the boolean {}", value.dump());
    case json::value_t::number_float: return fmt::format("the number {}", value.dump());
    case json::value_t::string: return fmt::format("the string {}", value.dump());
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return value.dump();
  }
}

/// A JSON integer that fits std::int64_t, or nullopt (floats, strings, ..., and integers past 2^63).
std::optional<std::int64_t> integer(const json& value) {
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<std::int64_t>();
  return std::nullopt;
}

struct Problem {
  std::string field;
  std::string message;
};

std::variant<TraceItem, Problem> parse_request(const json& object, std::size_t line, const TraceLimits& limits) {
  TraceRequest request;
  request.line = line;

  const auto prompt = object.find("prompt");
  if (prompt == object.end()) return Problem{"prompt", "missing (a request needs \"prompt\" and \"max_new_tokens\")"};
  if (!prompt->is_array()) return Problem{"prompt", fmt::format("expected an array of token ids, got {}", kind_of(*prompt))};
  if (prompt->empty()) return Problem{"prompt", "is empty (at least one token is needed)"};
  request.prompt.reserve(prompt->size());
  for (std::size_t i = 0; i < prompt->size(); ++i) {
    const json& element = (*prompt)[i];
    if (!element.is_number_integer()) {
      return Problem{"prompt", fmt::format("element {} is {}, expected an integer token id", i, kind_of(element))};
    }
    const std::optional<std::int64_t> id = integer(element);
    if (!id || *id < 0 || static_cast<std::uint64_t>(*id) >= limits.vocab) {
      return Problem{"prompt", fmt::format("element {} is {}, outside the vocabulary 0..{}", i, element.dump(),
                                           limits.vocab - 1)};
    }
    request.prompt.push_back(static_cast<token>(*id));  // < vocab <= INT32_MAX
  }

  const auto max_new = object.find("max_new_tokens");
  if (max_new == object.end()) return Problem{"max_new_tokens", "missing (a request needs \"prompt\" and \"max_new_tokens\")"};
  if (!max_new->is_number_integer()) {
    return Problem{"max_new_tokens", fmt::format("expected a non-negative integer, got {}", kind_of(*max_new))};
  }
  const std::optional<std::int64_t> n = integer(*max_new);
  if (!n) return Problem{"max_new_tokens", fmt::format("{} is larger than the capacity, {}", max_new->dump(), limits.capacity)};
  if (*n < 0) return Problem{"max_new_tokens", fmt::format("is negative ({})", *n)};
  request.max_new_tokens = static_cast<std::size_t>(*n);

  // The lane's own bound: every prompt row and every generated token fit the KV state.
  if (request.prompt.size() > limits.capacity) {
    return Problem{"prompt", fmt::format("has {} tokens, more than the capacity, {} (--capacity)", request.prompt.size(),
                                         limits.capacity)};
  }
  if (request.max_new_tokens > limits.capacity - request.prompt.size()) {
    return Problem{"max_new_tokens",
                   fmt::format("{} new tokens after a {}-token prompt do not fit the capacity, {} (--capacity)",
                               request.max_new_tokens, request.prompt.size(), limits.capacity)};
  }

  if (const auto label = object.find("label"); label != object.end()) {
    if (!label->is_string()) return Problem{"label", fmt::format("expected a string, got {}", kind_of(*label))};
    request.label = label->get<std::string>();
  }
  if (const auto id = object.find("id"); id != object.end()) request.id = id->dump();
  return TraceItem{std::move(request)};
}

std::variant<TraceItem, Problem> parse_object(const json& object, std::size_t line, const TraceLimits& limits) {
  const auto op = object.find("op");
  if (op == object.end()) return parse_request(object, line, limits);
  if (!op->is_string() || op->get<std::string>() != "clear") {
    return Problem{"op", fmt::format("expected \"clear\", got {}", op->is_string() ? op->dump() : kind_of(*op))};
  }
  for (const char* field : {"prompt", "max_new_tokens"}) {
    if (object.contains(field)) {
      return Problem{field, "a clear takes no request fields (a line is a request or {\"op\": \"clear\"})"};
    }
  }
  return TraceItem{TraceClear{line}};
}

bool blank(std::string_view text) { return text.find_first_not_of(" \t\r\n") == std::string_view::npos; }

}  // namespace

std::string TraceProblem::describe(std::string_view source) const {
  if (field.empty()) return fmt::format("{}:{}: {}", source, line, message);
  return fmt::format("{}:{}: field \"{}\": {}", source, line, field, message);
}

std::size_t count_requests(std::span<const TraceItem> items) noexcept {
  std::size_t n = 0;
  for (const TraceItem& item : items) n += std::holds_alternative<TraceRequest>(item) ? 1 : 0;
  return n;
}

std::variant<TraceItem, TraceProblem> parse_trace_line(std::string_view text, std::size_t line,
                                                       const TraceLimits& limits) {
  // The parser would stop at a NUL byte and accept the line as if it ended there.
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return TraceProblem{line, "", fmt::format("a NUL byte at column {}: a trace line is UTF-8 JSON text", nul + 1)};
  }
  json parsed;
  std::vector<std::vector<std::string>> keys;  // of each object being parsed, to refuse a repeated one
  std::string repeated;
  const json::parser_callback_t no_repeated_keys = [&](int /*depth*/, json::parse_event_t event, json& value) {
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    if (event == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == json::parse_event_t::key && !keys.empty()) {
      const auto& key = value.get_ref<const std::string&>();
      if (repeated.empty() && std::find(keys.back().begin(), keys.back().end(), key) != keys.back().end()) repeated = key;
      keys.back().push_back(key);
    }
    return true;
  };
  try {
    parsed = json::parse(text, no_repeated_keys);
  } catch (const json::exception& e) {  // its message says where and why
    // parse_error for bad syntax; out_of_range for a number past a double's range, such as 1e500.
    // The parser quotes the bytes it read: escaped, so that a control character is shown, not sent.
    return TraceProblem{line, "", fmt::format("malformed JSON: {}", escaped(e.what()))};
  }
  if (!repeated.empty()) {  // the parser keeps the last value silently: which one was meant?
    return TraceProblem{line, escaped(repeated), "appears twice in one object"};
  }
  if (!parsed.is_object()) {
    return TraceProblem{line, "", fmt::format("expected a JSON object, got {}", kind_of(parsed))};
  }
  auto result = parse_object(parsed, line, limits);
  if (auto* problem = std::get_if<Problem>(&result)) return TraceProblem{line, problem->field, problem->message};
  return std::get<TraceItem>(std::move(result));
}

Trace read_trace(std::istream& in, const TraceLimits& limits) {
  Trace trace;
  std::string text;
  for (std::size_t line = 1; std::getline(in, text); ++line) {
    if (blank(text)) continue;
    auto result = parse_trace_line(text, line, limits);
    if (auto* item = std::get_if<TraceItem>(&result)) {
      trace.items.push_back(std::move(*item));
    } else {
      trace.problems.push_back(std::get<TraceProblem>(std::move(result)));
    }
  }
  return trace;
}

std::string escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

std::string to_trace_line(const TraceItem& item) {
  using ordered = nlohmann::ordered_json;  // "prompt" first, as the format is documented
  if (std::holds_alternative<TraceClear>(item)) return ordered{{"op", "clear"}}.dump();
  const auto& request = std::get<TraceRequest>(item);
  ordered line{{"prompt", request.prompt}, {"max_new_tokens", request.max_new_tokens}};
  if (!request.label.empty()) line["label"] = request.label;
  if (!request.id.empty()) line["id"] = ordered::parse(request.id);
  return line.dump();
}

}  // namespace pfx::cli
