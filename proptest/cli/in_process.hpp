#pragma once

/// \file
/// `pfx <command line>` run in-process through pfx::cli::run, the function the program's main calls,
/// so that a test sees what a shell would: the output, the errors and the exit status.

#include <pfx/cli/interrupt.hpp>
#include <pfx/cli/command.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
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

/// For a death test's child: runs `pfx <command_line>` with the interrupt handlers installed and
/// `signal` raised `after` the start (0: before the run begins), writes its output and errors to
/// stderr (where EXPECT_EXIT matches), and exits with its status, or with 99 when the output holds
/// `forbidden` (what an interrupted run must never print, such as "every check passed"), or with 98
/// when it tells the interruption more than once (an "INTERRUPTED by" line or a {"type":"interrupted"}
/// record: a run is judged stopped once), on standard output and standard error together: a command
/// tells it on one of them, and run()'s own line for a success after a signal goes to the other.
[[noreturn]] inline void run_pfx_signalled(const std::string& command_line, int signal, std::chrono::milliseconds after,
                                           const std::string& forbidden = "") {
  cli::install_interrupt_handlers();
  if (after.count() == 0) {
    (void)std::raise(signal);
  } else {
    std::thread([signal, after] {
      std::this_thread::sleep_for(after);
      (void)std::raise(signal);  // the handler only sets the flag the run reads
    }).detach();
  }
  const PfxRun ran = run_pfx(command_line);
  const std::string both = ran.out + ran.err;
  std::fputs(both.c_str(), stderr);
  std::fflush(stderr);
  std::size_t told = 0;
  for (const std::string marker : {"INTERRUPTED by", "{\"type\":\"interrupted\""}) {
    for (std::size_t at = both.find(marker); at != std::string::npos; at = both.find(marker, at + 1)) ++told;
  }
  std::_Exit(!forbidden.empty() && ran.out.find(forbidden) != std::string::npos ? 99 : told > 1 ? 98 : ran.status);
}

}  // namespace pfx::test
