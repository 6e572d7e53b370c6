#pragma once

/// \file
/// `pfx conform` (docs/cli.md, docs/conform.md): runs the conformance check on one of the shipped
/// engines and prints its report, as text or JSON. Its exit status is the verdict's: 0 the rule chunk
/// is on an exact grid, 1 it is not (the safe one is printed), 3 no grid is exact, 2 bad input.

#include <pfx/cli/command.hpp>
#include <pfx/cli/conform_json.hpp>  // conform_json, comparisons
#include <pfx/conform/report.hpp>

#include <string>
#include <vector>

namespace pfx::cli {

/// The engines `pfx conform --engine` names: reference, cuda, blocked-attention, nondeterministic.
[[nodiscard]] std::vector<std::string> conform_engine_names();

void add_conform_command(CLI::App& app, const Streams& streams, int& status);

}  // namespace pfx::cli
