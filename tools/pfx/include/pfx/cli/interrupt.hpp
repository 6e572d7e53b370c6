#pragma once

/// \file
/// SIGINT and SIGTERM during any `pfx` command: the signal only raises a flag, the loops stop between
/// two units of work (a request of replay or soak, a prompt of conform, a case or a check of audit),
/// print the summary of what ran marked interrupted (never "ok" or "passed": the run did not finish),
/// and the program exits with 128 + the signal (130, 143), as a shell reports a process killed by it
/// (docs/cli.md, "Interrupting a run").

#include <cstddef>
#include <exception>
#include <string>
#include <string_view>

namespace pfx::cli {

/// Installs the handlers (the program's main does, once; in-process callers such as the tests need
/// not). Async-signal-safe: the handler stores the signal number, nothing else.
void install_interrupt_handlers() noexcept;

/// The signal that asked the run to stop, or 0.
[[nodiscard]] int interrupted_by() noexcept;

/// The exit status of a run the signal stopped: 128 + signal.
[[nodiscard]] inline int interrupted_status(int signal) noexcept { return 128 + signal; }

/// "SIGINT", "SIGTERM", or "a signal".
[[nodiscard]] std::string_view signal_name(int signal) noexcept;

/// "INTERRUPTED by SIGINT after N requests: ..." for the summary; `unit` names what was counted, in
/// the singular ("1 request", "2 requests").
[[nodiscard]] std::string describe_interruption(int signal, std::size_t done, std::string_view unit = "request");

/// Thrown from inside a loop the program does not own (conform's progress callback) to stop it
/// between two units of work once a signal has arrived; the command catches it.
class Interrupted : public std::exception {
 public:
  [[nodiscard]] const char* what() const noexcept override { return "interrupted by a signal"; }
};

/// Throws Interrupted when a signal has arrived.
inline void stop_if_interrupted() {
  if (interrupted_by() != 0) throw Interrupted();
}

}  // namespace pfx::cli
