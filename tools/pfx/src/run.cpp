// The pfx program: every command registered on one CLI11 app, and each exception mapped to its exit
// status (docs/cli.md, "Exit status").

#include <pfx/cli/command.hpp>
#include <pfx/cli/interrupt.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/version.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <ostream>
#include <string>
#include <vector>

namespace pfx::cli {
namespace {

int parse_and_run(std::span<const std::string> arguments, const Streams& streams) {
  CLI::App app{"pfx: how much of a prompt a serving lane may take from the KV state it holds", "pfx"};
  app.set_version_flag("--version", std::string(PFX_VERSION_STRING));
  app.require_subcommand(1);
  int status = exit_ok;
  add_replay_command(app, streams, status);
  add_workload_command(app, streams, status);
  add_audit_command(app, streams, status);
  add_explain_command(app, streams, status);
  add_soak_command(app, streams, status);
  add_conform_command(app, streams, status);

  const auto command = [&] {
    for (const CLI::App* sub : app.get_subcommands()) return "pfx " + sub->get_name();
    return std::string("pfx");
  };
  try {
    std::vector<std::string> reversed(arguments.rbegin(), arguments.rend());  // CLI11 takes them last first
    app.parse(reversed);
  } catch (const CLI::Success& e) {  // --help, --help-all, --version: printed to `out`, status 0
    return app.exit(e, streams.out, streams.err);
  } catch (const CLI::ParseError& e) {
    // CLI11's own statuses differ per kind of error; every bad option is exit_bad_input here.
    if (app.get_subcommands().empty() && !arguments.empty() && !arguments.front().starts_with('-')) {
      // CLI11 would say "A subcommand is required": name the word it did not know instead.
      std::vector<std::string> names;
      const CLI::App& all = app;
      for (const CLI::App* sub : all.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
      streams.err << fmt::format("pfx: unknown command '{}'; the commands are {}\nRun pfx --help for what each does.\n",
                                 arguments.front(), fmt::join(names, ", "));
      return exit_bad_input;
    }
    streams.err << fmt::format("{}: {}\nRun with --help for the options.\n", command(), e.what());
    return exit_bad_input;
  } catch (const InputError& e) {
    streams.err << fmt::format("{}: {}\n", command(), e.what());
    return exit_bad_input;
  } catch (const driver::ConfigError& e) {
    streams.err << fmt::format("{}: {}\n", command(), e.what());
    return exit_bad_input;
  } catch (const std::exception& e) {
    streams.err << fmt::format("{}: internal error: {}\n", command(), e.what());
    return exit_internal;
  }
  // A command with no loop of its own (explain), or one whose last unit of work ended as the signal
  // came: a success is not reported after a signal asked the run to stop. Failures keep their status.
  if (const int signal = interrupted_by(); signal != 0 && status == exit_ok) {
    streams.err << fmt::format("{}: INTERRUPTED by {}: what was printed is whole, but the run did not pass (exit "
                               "status {})\n",
                               command(), signal_name(signal), interrupted_status(signal));
    return interrupted_status(signal);
  }
  return status;
}

}  // namespace

int run(std::span<const std::string> arguments, std::ostream& out, std::ostream& err, bool err_is_terminal) noexcept {
  try {
    int status = parse_and_run(arguments, {out, err, err_is_terminal});
    // A report that did not reach its reader is no report: a full disk or a closed output must not
    // end in the status of a run that printed its results.
    errno = 0;
    out.flush();
    if (out.fail()) {
      const int error = errno;
      err << "pfx: cannot write the output" << (error != 0 ? std::string(": ") + std::strerror(error) : std::string())
          << "; what was printed is incomplete\n";
      status = exit_output_lost;
    }
    err.flush();
    if (err.fail()) status = exit_output_lost;  // the messages were lost: nothing else can say so
    return status;
  } catch (const std::exception& e) {  // setting up the commands failed (out of memory, say)
    err << "pfx: internal error: " << e.what() << "\n";
    return exit_internal;
  } catch (...) {
    err << "pfx: internal error: an exception of unknown type\n";
    return exit_internal;
  }
}

}  // namespace pfx::cli
