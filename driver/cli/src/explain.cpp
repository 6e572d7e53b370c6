#include <pfx/cli/command.hpp>
namespace pfx::cli {
void add_explain_command(CLI::App&, const Streams&, int&) {}
}  // namespace pfx::cli
