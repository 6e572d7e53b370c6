// pfx: replay a workload through a lane with verification, audit the invariant catalogue, explain a
// decision, soak a lane in a long run (docs/cli.md). Everything but the process's streams is run().

#include <pfx/cli/command.hpp>
#include <pfx/cli/interrupt.hpp>

#include <iostream>
#include <string>
#include <unistd.h>
#include <vector>

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> arguments(argv + (argc > 0 ? 1 : 0), argv + argc);
    pfx::cli::install_interrupt_handlers();
    return pfx::cli::run(arguments, std::cout, std::cerr, isatty(STDERR_FILENO) != 0);
  } catch (...) {  // copying the arguments failed: out of memory
    std::cerr << "pfx: internal error: out of memory\n";
    return pfx::cli::exit_internal;
  }
}
