#pragma once

/// \file
/// What a JSON value is, in the words the program's messages use ("got an array", "got the string
/// "x"", "got 3.5"): one spelling for every reader of a JSON input (explain's record and prompt,
/// the audit's traceability table).

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>

namespace pfx::cli {

[[nodiscard]] inline std::string kind_of(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::string: return fmt::format("the string {}", value.dump());
    default: return value.dump();
  }
}

}  // namespace pfx::cli
