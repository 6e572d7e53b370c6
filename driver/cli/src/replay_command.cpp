#include <pfx/cli/command.hpp>
namespace pfx::cli {
void add_replay_command(CLI::App&, const Streams&, int&) {}
void add_workload_command(CLI::App&, const Streams&, int&) {}
}  // namespace pfx::cli
