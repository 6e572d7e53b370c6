#include <pfx/cli/interrupt.hpp>

#include <pfx/cli/command.hpp>

#include <fmt/format.h>

#include <csignal>

namespace pfx::cli {
namespace {

volatile std::sig_atomic_t received = 0;  // written only by the handler

extern "C" void on_signal(int signal) { received = signal; }

}  // namespace

void install_interrupt_handlers() noexcept {
  (void)std::signal(SIGINT, on_signal);
  (void)std::signal(SIGTERM, on_signal);
}

int interrupted_by() noexcept { return static_cast<int>(received); }

std::string_view signal_name(int signal) noexcept {
  return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a signal";
}

std::string describe_interruption(int signal, std::size_t done, std::string_view unit) {
  const std::string_view name = signal_name(signal);
  return fmt::format("INTERRUPTED by {} after {}: the summary covers only what ran, and the run did not pass "
                     "(exit status {})",
                     name, counted(done, unit), interrupted_status(signal));
}

}  // namespace pfx::cli
