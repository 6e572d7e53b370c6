#pragma once

/// \file
/// What the commands' options share.

#include <CLI/CLI.hpp>

#include <string>

namespace pfx::cli {

/// For an option read into an unsigned integer: CLI11 would read "-1" as 2^64 - 1 (std::strtoull
/// does), silently, so a negative value is refused here with a message that says what is expected.
inline CLI::Validator non_negative() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const auto first = value.find_first_not_of(" \t");
        if (first != std::string::npos && value[first] == '-') return "expected a non-negative integer, got " + value;
        return "";
      },
      "NONNEGATIVE");
}

}  // namespace pfx::cli
