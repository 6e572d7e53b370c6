#pragma once

/// \file
/// What `pfx replay` and `pfx soak` print (docs/cli.md; the JSON's schemas in docs/schemas/): the lane
/// line, each request's row or record, a run's summary as text or JSON from the same fields, and the
/// run's ending (the interruption's line and the exit status).

#include <pfx/cli/command.hpp>
#include <pfx/cli/replay_options.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/replay/replay.hpp>
#include <pfx/replay/soak.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>

namespace pfx::cli {

/// "<engine>, capacity N, reuse on|off, keep_min K": the lane line of the text output.
[[nodiscard]] std::string describe_lane(const std::string& engine, const driver::LaneOptions& lane);

/// One request of `pfx replay` as its JSON record, and as its row of the text table.
[[nodiscard]] nlohmann::ordered_json request_json(const replay::RequestReport& r);
[[nodiscard]] std::string request_text(const replay::RequestReport& r, bool verify);

/// A replay's result, rendered as text or JSON from the same fields.
struct ReplayResult {
  replay::ReplaySummary summary;
  const ReplayOptions& options;
  const driver::LaneOptions& lane;
  std::string source;
  std::string engine;
  bool interrupted = false;

  [[nodiscard]] nlohmann::ordered_json to_json() const;
  [[nodiscard]] std::string to_text() const;
};

/// A soak's result, rendered as text or JSON from the same fields.
struct SoakResult {
  replay::SoakSummary summary;
  const ReplayOptions& options;
  const driver::LaneOptions& lane;
  std::string engine;
  bool interrupted = false;

  [[nodiscard]] nlohmann::ordered_json to_json() const;
  [[nodiscard]] std::string to_text() const;
};

/// The run's ending, after its summary: the interruption's line, and the exit status.
int finish(const Streams& streams, const ReplayOptions& o, int signal, std::size_t requests, bool passed);

}  // namespace pfx::cli
