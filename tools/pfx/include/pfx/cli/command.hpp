#pragma once

/// \file
/// The `pfx` program as its commands share it: run() (main calls it with the process's streams, the
/// tests in-process with string streams, so both run the same code), the exit statuses, where a
/// command writes, the error that means "bad input" (docs/cli.md, "Exit status"), and the options'
/// shared default and check.

#include <cstddef>
#include <iosfwd>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace CLI {
class App;
class Validator;
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

/// Runs `pfx <arguments>` (the program's name left out): parses them with every command, runs the
/// chosen one and returns its exit status. Help and --version go to `out`; bad input (an option, a
/// trace line, a file, a malformed environment variable) to `err` as "pfx <command>: <message>",
/// returning exit_bad_input; any other failure, "internal error: ...", returns exit_internal. Never
/// throws. `err_is_terminal` says whether a progress bar may be drawn on `err`.
[[nodiscard]] int run(std::span<const std::string> arguments, std::ostream& out, std::ostream& err,
                      bool err_is_terminal = false) noexcept;

/// The prefill chunk of the engine, and so the rule's chunk, when --chunk is not given: one default
/// for every command that takes --chunk (replay, workload, soak, conform, explain).
inline constexpr std::size_t default_chunk = 64;

/// For an option read into an unsigned integer: CLI11 would read "-1" as 2^64 - 1 and a value past
/// 2^64 - 1 as 2^64 - 1 (std::strtoull does both, silently), so either is refused with a message that
/// says what is expected. Anything else that is not a number is left to CLI11's own message.
[[nodiscard]] CLI::Validator non_negative();

/// "1 request", "2 requests", "0 requests": a count and its noun, singular for one (`plural`: the
/// plural where it is not the noun and an s, such as "mismatches").
[[nodiscard]] inline std::string counted(std::size_t n, std::string_view noun, std::string_view plural = {}) {
  if (n == 1) return "1 " + std::string(noun);
  return std::to_string(n) + " " + (plural.empty() ? std::string(noun) + "s" : std::string(plural));
}

}  // namespace pfx::cli
