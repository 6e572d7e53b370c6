// pfx: replay a workload through a lane with verification, audit the invariant catalogue, explain a
// decision, soak a lane in a long run (docs/cli.md).

#include <pfx/cli/command.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/version.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <exception>
#include <iostream>
#include <string>
#include <unistd.h>

namespace {

int run(int argc, char** argv) {
  CLI::App app{"pfx: how much of a prompt a serving lane may take from the KV state it holds", "pfx"};
  app.set_version_flag("--version", std::string(PFX_VERSION_STRING));
  app.require_subcommand(1);
  const pfx::cli::Streams streams{std::cout, std::cerr, isatty(STDERR_FILENO) != 0};
  int status = pfx::cli::exit_ok;
  pfx::cli::add_replay_command(app, streams, status);
  pfx::cli::add_workload_command(app, streams, status);
  pfx::cli::add_audit_command(app, streams, status);
  pfx::cli::add_explain_command(app, streams, status);
  pfx::cli::add_soak_command(app, streams, status);

  const auto command = [&] {
    for (const CLI::App* sub : app.get_subcommands()) return "pfx " + sub->get_name();
    return std::string("pfx");
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11's own statuses differ per kind of error; every bad option is exit_bad_input here.
    std::cerr << fmt::format("{}: {}\nRun with --help for the options.\n", command(), e.what());
    return pfx::cli::exit_bad_input;
  } catch (const pfx::cli::InputError& e) {
    std::cerr << fmt::format("{}: {}\n", command(), e.what());
    return pfx::cli::exit_bad_input;
  } catch (const pfx::driver::ConfigError& e) {
    std::cerr << fmt::format("{}: {}\n", command(), e.what());
    return pfx::cli::exit_bad_input;
  } catch (const std::exception& e) {
    std::cerr << fmt::format("{}: internal error: {}\n", command(), e.what());
    return pfx::cli::exit_internal;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // setting up the commands failed (out of memory, say)
    std::cerr << "pfx: internal error: " << e.what() << "\n";
    return pfx::cli::exit_internal;
  } catch (...) {
    std::cerr << "pfx: internal error: an exception of unknown type\n";
    return pfx::cli::exit_internal;
  }
}
