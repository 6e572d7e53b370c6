#include <pfx/cli/json_kind.hpp>
#include <pfx/cli/trace.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <istream>
#include <set>

namespace pfx::cli {

using replay::TraceClear;
using replay::TraceItem;
using replay::TraceRequest;
namespace {

using nlohmann::json;

using Read = std::variant<TraceItem, TraceProblem>;

/// The item a line's object is, or the problem with one of its fields.
Read parse_object(const json& object, std::size_t line, const TraceLimits& limits) {
  const auto bad = [line](std::string_view field, std::string message) {
    return Read{TraceProblem{line, std::string(field), std::move(message)}};
  };
  if (const auto op = object.find("op"); op != object.end()) {
    if (!op->is_string() || *op != "clear") {
      return bad("op", fmt::format("expected \"clear\", got {}", op->is_string() ? op->dump() : kind_of(*op)));
    }
    for (const char* field : {"prompt", "max_new_tokens"}) {
      if (object.contains(field)) {
        return bad(field, "a clear takes no request fields (a line is a request or {\"op\": \"clear\"})");
      }
    }
    return TraceClear{line};
  }
  const auto prompt = object.find("prompt");
  const auto max_new = object.find("max_new_tokens");
  const char* const missing = "missing (a request needs \"prompt\" and \"max_new_tokens\")";
  if (prompt == object.end()) return bad("prompt", missing);
  TraceRequest request;
  request.line = line;
  if (std::string problem = read_token_ids(*prompt, request.prompt); !problem.empty()) return bad("prompt", problem);
  if (request.prompt.empty()) return bad("prompt", "is empty (at least one token is needed)");
  for (std::size_t i = 0; i < request.prompt.size(); ++i) {  // the lane's vocabulary, inside core's range
    if (static_cast<std::size_t>(request.prompt[i]) >= limits.vocab) {
      return bad("prompt", fmt::format("element {} is {}, outside the vocabulary 0..{}", i, request.prompt[i],
                                       limits.vocab - 1));
    }
  }
  if (max_new == object.end()) return bad("max_new_tokens", missing);
  if (!max_new->is_number_integer()) {
    return bad("max_new_tokens", fmt::format("expected a non-negative integer, got {}", kind_of(*max_new)));
  }
  const std::optional<std::uint64_t> n = as_count(*max_new);
  if (!n) return bad("max_new_tokens", fmt::format("is negative ({})", max_new->dump()));
  request.max_new_tokens = *n;
  // The lane's own bound: every prompt row and every generated token fit the KV state.
  if (request.prompt.size() > limits.capacity) {
    return bad("prompt", fmt::format("has {} tokens, more than the capacity, {} ({})", request.prompt.size(),
                                     limits.capacity, limits.capacity_source));
  }
  if (request.max_new_tokens > limits.capacity - request.prompt.size()) {
    return bad("max_new_tokens",
               fmt::format("{} new tokens after a {}-token prompt do not fit the capacity, {} ({})",
                           request.max_new_tokens, request.prompt.size(), limits.capacity, limits.capacity_source));
  }
  if (const auto label = object.find("label"); label != object.end()) {
    if (!label->is_string()) return bad("label", fmt::format("expected a string, got {}", kind_of(*label)));
    request.label = label->get<std::string>();
  }
  if (const auto id = object.find("id"); id != object.end()) request.id = id->dump();
  return request;
}

}  // namespace

std::string TraceProblem::describe(std::string_view source) const {
  if (field.empty()) return fmt::format("{}:{}: {}", source, line, message);
  return fmt::format("{}:{}: field \"{}\": {}", source, line, field, message);
}

std::variant<TraceItem, TraceProblem> parse_trace_line(std::string_view text, std::size_t line,
                                                       const TraceLimits& limits) {
  // The parser would stop at a NUL byte and accept the line as if it ended there.
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return TraceProblem{line, "", fmt::format("a NUL byte at column {}: a trace line is UTF-8 JSON text", nul + 1)};
  }
  std::vector<std::set<std::string>> keys;  // of each object being parsed, to refuse a repeated one
  std::string repeated;
  const json::parser_callback_t no_repeated_keys = [&](int /*depth*/, json::parse_event_t event, json& value) {
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    if (event == json::parse_event_t::object_end) keys.pop_back();
    if (event == json::parse_event_t::key && !keys.back().insert(value.get<std::string>()).second && repeated.empty()) {
      repeated = value.get<std::string>();
    }
    return true;
  };
  json parsed;
  try {
    parsed = json::parse(text, no_repeated_keys);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number such as 1e500
    // The parser quotes the bytes it read: escaped, so that a control character is shown, not sent.
    return TraceProblem{line, "", escaped(malformed(e))};
  }
  if (!repeated.empty()) {  // the parser keeps the last value silently: which one was meant?
    return TraceProblem{line, escaped(repeated), "appears twice in one object"};
  }
  if (!parsed.is_object()) {
    return TraceProblem{line, "", fmt::format("expected a JSON object, got {}", kind_of(parsed))};
  }
  return parse_object(parsed, line, limits);
}

Trace read_trace(std::istream& in, const TraceLimits& limits) {
  Trace trace;
  std::string text;
  for (std::size_t line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) continue;  // blank
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
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    out += byte < 0x20 || byte == 0x7f ? fmt::format("\\x{:02x}", byte) : std::string(1, c);
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
