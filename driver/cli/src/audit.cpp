#include <pfx/cli/command.hpp>
namespace pfx::cli {
void add_audit_command(CLI::App&, const Streams&, int&) {}
}  // namespace pfx::cli
