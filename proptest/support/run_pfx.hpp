#pragma once

/// \file
/// Runs the pfx program's commands in-process, as tools/pfx/src/main.cpp registers them, so that a
/// test sees what a shell would: the output, the exit status, and the bad-input error.

#include <pfx/cli/command.hpp>

#include <CLI/CLI.hpp>

#include <sstream>
#include <string>

namespace pfx::test {

/// What `pfx <arguments>` printed, its status, and the bad-input error if any.
struct PfxRun {
  int status = -1;
  std::string out;
  std::string input_error;
};

/// Runs `pfx <arguments>` (replay, workload or soak) in-process.
inline PfxRun run_pfx(const std::string& arguments) {
  std::ostringstream out;
  std::ostringstream err;
  const cli::Streams streams{out, err, false};
  CLI::App app;
  PfxRun run;
  cli::add_replay_command(app, streams, run.status);
  cli::add_workload_command(app, streams, run.status);
  cli::add_soak_command(app, streams, run.status);
  try {
    app.parse(arguments, /*program_name_included=*/false);
  } catch (const cli::InputError& e) {
    run.input_error = e.what();
    run.status = cli::exit_bad_input;
  }
  run.out = out.str();
  return run;
}

}  // namespace pfx::test
