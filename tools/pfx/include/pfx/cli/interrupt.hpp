#pragma once

/// \file
/// SIGINT and SIGTERM during `pfx replay` or `pfx soak`: the signal only raises a flag, the loops stop
/// between two requests, print the summary of what ran marked interrupted, and the program exits with
/// 128 + the signal (130, 143), as a shell reports a process killed by it (docs/cli.md).

#include <cstddef>
#include <string>

namespace pfx::cli {

/// Installs the handlers (the program's main does, once; in-process callers such as the tests need
/// not). Async-signal-safe: the handler stores the signal number, nothing else.
void install_interrupt_handlers() noexcept;

/// The signal that asked the run to stop, or 0.
[[nodiscard]] int interrupted_by() noexcept;

/// The exit status of a run the signal stopped: 128 + signal.
[[nodiscard]] inline int interrupted_status(int signal) noexcept { return 128 + signal; }

/// "interrupted by SIGINT after N requests" for the summary.
[[nodiscard]] std::string describe_interruption(int signal, std::size_t requests);

}  // namespace pfx::cli
