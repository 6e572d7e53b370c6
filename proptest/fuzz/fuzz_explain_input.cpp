// fuzz_explain_input: the readers of `pfx explain`'s --record and --prompt
// (tools/pfx/src/explain.cpp), fed the input as inline JSON (input that does not start with
// `[` or `{` would name a file, and is skipped). Each reader's answer is compared with an oracle
// written here from the documented format, on the same JSON parser:
//   record  an array of token ids (canonical_end = its length), or {"ids": [...], "canonical_end": n}
//   prompt  an array of token ids, or {"prompt": [...], ...}
//   token id  an integer in 0 .. 2^31 - 1
// and --canonical-end, when given, replaces the record's (which may then be left out). A finding is
// an exception other than InputError, an InputError that does not start with the option's name, a
// refusal of valid input, or an acceptance of invalid input or with other values than the oracle's.

#include "finding.hpp"

#include <pfx/cli/command.hpp>
#include <pfx/cli/explain.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using nlohmann::json;

template <class... Parts>
[[noreturn]] void finding(const Parts&... parts) {
  pfx::fuzz::report_finding("fuzz_explain_input", parts...);
}

/// The token ids of `value`, when it is an array of them.
std::optional<std::vector<pfx::token>> token_ids(const json& value) {
  if (!value.is_array()) return std::nullopt;
  std::vector<pfx::token> ids;
  for (const json& element : value) {
    if (!element.is_number_integer()) return std::nullopt;
    if (element.is_number_unsigned()) {
      if (element.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<pfx::token>::max())) {
        return std::nullopt;
      }
    } else if (element.get<std::int64_t>() < 0) {
      return std::nullopt;
    }
    ids.push_back(static_cast<pfx::token>(element.get<std::int64_t>()));
  }
  return ids;
}

/// A non-negative integer count.
std::optional<std::size_t> count(const json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer() && value.get<std::int64_t>() >= 0) return value.get<std::int64_t>();
  return std::nullopt;
}

std::optional<pfx::cli::HeldRecord> expected_record(const json& value, std::optional<std::size_t> option) {
  pfx::cli::HeldRecord record;
  if (value.is_array()) {
    const auto ids = token_ids(value);
    if (!ids) return std::nullopt;
    return pfx::cli::HeldRecord{*ids, option.value_or(ids->size())};
  }
  if (!value.is_object() || !value.contains("ids")) return std::nullopt;
  const auto ids = token_ids(value["ids"]);
  if (!ids) return std::nullopt;
  std::optional<std::size_t> canonical_end = option;
  if (value.contains("canonical_end")) {
    const auto given = count(value["canonical_end"]);
    if (!given) return std::nullopt;
    if (!option) canonical_end = given;
  }
  if (!canonical_end) return std::nullopt;
  return pfx::cli::HeldRecord{*ids, *canonical_end};
}

std::optional<std::vector<pfx::token>> expected_prompt(const json& value) {
  if (value.is_array()) return token_ids(value);
  if (!value.is_object() || !value.contains("prompt")) return std::nullopt;
  return token_ids(value["prompt"]);
}

bool operator==(const pfx::cli::HeldRecord& a, const pfx::cli::HeldRecord& b) {
  return a.ids == b.ids && a.canonical_end == b.canonical_end;
}

/// Runs `read`, which must return a value equal to `expected`, or throw InputError starting with
/// `option` when `expected` is nullopt.
template <class T, class Read>
void check(std::string_view option, std::string_view text, const std::optional<T>& expected, Read read) {
  const std::string given = std::string(option).append(" ").append(text);
  try {
    const T got = read();
    if (!expected) finding(given, ": accepted invalid input");
    if (!(got == *expected)) finding(given, ": read other values than the format says");
  } catch (const pfx::cli::InputError& e) {
    if (expected) finding(given, ": refused valid input: ", e.what());
    if (std::string_view(e.what()).rfind(option, 0) != 0) {
      finding(given, ": the message does not start with the option: ", e.what());
    }
  } catch (const std::exception& e) {
    finding(given, ": threw something other than InputError: ", e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || (text[first] != '[' && text[first] != '{')) return 0;  // names a file

  const json value = json::parse(text, nullptr, /*allow_exceptions=*/false);  // discarded when malformed
  constexpr std::size_t option_end = 5;
  for (const std::optional<std::size_t> option : {std::optional<std::size_t>(), std::optional(option_end)}) {
    check<pfx::cli::HeldRecord>("--record", text, expected_record(value, option),
                                [&] { return pfx::cli::read_record("--record", text, option); });
  }
  check<std::vector<pfx::token>>("--prompt", text, expected_prompt(value),
                                 [&] { return pfx::cli::read_prompt("--prompt", text); });
  return 0;
}
