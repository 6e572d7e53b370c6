#pragma once

/// \file
/// The whole `pfx` program as one function: main calls it with its arguments and the process's
/// streams, and the tests call it in-process with string streams, so that both run the same code.

#include <iosfwd>
#include <span>
#include <string>

namespace pfx::cli {

/// Runs `pfx <arguments>` (the program's name left out): builds the command line with every command,
/// parses `arguments`, runs the chosen command and returns its exit status (command.hpp). Help and
/// --version are written to `out`; bad input (an option, a trace line, a file, a malformed
/// environment variable) is written to `err` as "pfx <command>: <message>" and returns
/// exit_bad_input; any other failure, "internal error: ...", returns exit_internal. Never throws.
/// `err_is_terminal` says whether a progress bar may be drawn on `err`.
[[nodiscard]] int run(std::span<const std::string> arguments, std::ostream& out, std::ostream& err,
                      bool err_is_terminal = false) noexcept;

}  // namespace pfx::cli
