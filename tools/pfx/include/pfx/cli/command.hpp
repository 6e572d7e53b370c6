#pragma once

/// \file
/// What every subcommand of the `pfx` program shares: its exit statuses, where it writes, and the
/// error that means "bad input" (docs/cli.md, "Exit status").

#include <iosfwd>
#include <stdexcept>

namespace CLI {
class App;
}

namespace pfx::cli {

/// The exit statuses of every command (docs/cli.md, "Exit status"). `pfx conform`'s verdicts other
/// than safe and unsafe add 4, 5 and 6 (pfx::conform::exit_status); 128 + N is a signal's.
enum ExitStatus : int {
  exit_ok = 0,           ///< all good
  exit_mismatch = 1,     ///< a check failed: a bit-exactness mismatch, an invariant violated
  exit_bad_input = 2,    ///< bad input: an option, a trace line, a file; nothing was run
  exit_internal = 3,     ///< an internal error, and only that (a device error in the middle of a run, ...)
  exit_output_lost = 74, ///< the output could not be written: EX_IOERR of sysexits.h
};

/// Bad input. The message names the problem (the option, the line and the field); main prints it
/// after "pfx <command>: " and exits with exit_bad_input.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Where a command writes. Tests pass string streams; `pfx` passes std::cout and std::cerr.
struct Streams {
  std::ostream& out;
  std::ostream& err;
  /// Whether `err` is a terminal (a progress bar may be drawn there).
  bool err_is_terminal = false;
};

/// Each command adds its subcommand, with its options, to `app`. When the subcommand is chosen, its
/// callback runs it and stores its exit status in `status`; it throws InputError for bad input.
void add_replay_command(CLI::App& app, const Streams& streams, int& status);
void add_workload_command(CLI::App& app, const Streams& streams, int& status);
void add_audit_command(CLI::App& app, const Streams& streams, int& status);
void add_explain_command(CLI::App& app, const Streams& streams, int& status);
void add_soak_command(CLI::App& app, const Streams& streams, int& status);
/// `pfx conform` (docs/conform.md): its status is the verdict's (conform::exit_status).
void add_conform_command(CLI::App& app, const Streams& streams, int& status);

}  // namespace pfx::cli
