#pragma once

/// \file
/// What the commands' options share.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace pfx::cli {

/// The prefill chunk of the engine, and so the rule's chunk, when --chunk is not given: one default
/// for every command that takes --chunk (replay, workload, soak, conform, explain).
inline constexpr std::size_t default_chunk = 64;

/// For an option read into an unsigned integer: CLI11 would read "-1" as 2^64 - 1 and a value past
/// 2^64 - 1 as 2^64 - 1 (std::strtoull does both, silently), so either is refused here with a message
/// that says what is expected. Anything else that is not a number is left to CLI11's own message.
inline CLI::Validator non_negative() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const auto first = value.find_first_not_of(" \t");
        if (first == std::string::npos) return "";
        if (value[first] == '-') return "expected a non-negative integer, got " + value;
        std::string digits = value.substr(value[first] == '+' ? first + 1 : first);
        digits.erase(digits.find_last_not_of(" \t") + 1);
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return "";
        digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));  // leading zeros
        constexpr std::string_view largest = "18446744073709551615";  // 2^64 - 1
        if (digits.size() > largest.size() || (digits.size() == largest.size() && digits > largest)) {
          return value + " does not fit 64 bits (the largest is " + std::string(largest) + ")";
        }
        return "";
      },
      "NONNEGATIVE");
}

}  // namespace pfx::cli
