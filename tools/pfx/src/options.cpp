// The check every command's unsigned options share (command.hpp). A source of its own, so that what
// compiles one command's code without run() (the fuzzers' parsers) links it too.

#include <pfx/cli/command.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <string_view>

namespace pfx::cli {

CLI::Validator non_negative() {
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
