#pragma once

/// \file
/// `pfx <command line>` run in-process through pfx::cli::run, the function the program's main calls,
/// so that a test sees what a shell would: the output, the errors and the exit status.

#include <pfx/cli/run.hpp>

#include <sstream>
#include <string>
#include <vector>

namespace pfx::test {

/// What `pfx <arguments>` wrote and returned.
struct PfxRun {
  int status = -1;
  std::string out;
  std::string err;
};

/// Runs `pfx <command_line>`; the command line is split at blanks (no quoting).
inline PfxRun run_pfx(const std::string& command_line) {
  std::vector<std::string> arguments;
  std::istringstream words(command_line);
  for (std::string word; words >> word;) arguments.push_back(word);
  std::ostringstream out;
  std::ostringstream err;
  PfxRun ran;
  ran.status = cli::run(arguments, out, err);
  ran.out = out.str();
  ran.err = err.str();
  return ran;
}

}  // namespace pfx::test
