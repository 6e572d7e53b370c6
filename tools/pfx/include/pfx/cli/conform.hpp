#pragma once

/// \file
/// `pfx conform` (docs/cli.md, docs/conform.md): runs the conformance check on an engine of --engine
/// (engine_option.hpp) and prints its report, as text or JSON. Its exit status is the verdict's: 0
/// the rule chunk is on an exact grid, 1 it is not (the safe one is printed), 4 the engine is not
/// deterministic, 5 no grid is exact, 6 it is degenerate; 2 bad input.

#include <pfx/cli/command.hpp>
#include <pfx/cli/conform_json.hpp>  // conform_json, comparisons
#include <pfx/conform/report.hpp>

namespace pfx::cli {

void add_conform_command(CLI::App& app, const Streams& streams, int& status);

}  // namespace pfx::cli
