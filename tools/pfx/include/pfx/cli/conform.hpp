#pragma once

/// \file
/// `pfx conform` (docs/cli.md, docs/conform.md): runs the conformance check on one of the shipped
/// engines and prints its report, as text or JSON. Its exit status is the verdict's: 0 the rule chunk
/// is on an exact grid, 1 it is not (the safe one is printed), 3 no grid is exact, 2 bad input.

#include <pfx/cli/command.hpp>
#include <pfx/conform/report.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace pfx::cli {

/// The engines `pfx conform --engine` names: reference, cuda, blocked-attention, nondeterministic.
[[nodiscard]] std::vector<std::string> conform_engine_names();

/// The report as one JSON object (docs/conform.md, "JSON"; docs/schemas/conform.schema.json).
[[nodiscard]] nlohmann::ordered_json conform_json(const conform::Report& report);

/// How many runs the check compared with a cold run bit for bit: every resume, and every repeated
/// cold run. The summary states it; a safe verdict with none would vouch for nothing.
[[nodiscard]] std::size_t comparisons(const conform::Report& report);

void add_conform_command(CLI::App& app, const Streams& streams, int& status);

}  // namespace pfx::cli
