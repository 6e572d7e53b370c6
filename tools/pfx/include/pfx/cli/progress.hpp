#pragma once

/// \file
/// A progress bar for long runs, drawn on one terminal line and erased before anything else is
/// printed, so that it never ends up in a log or a pipe.

#include <chrono>
#include <cstddef>
#include <iosfwd>
#include <string>

namespace pfx::cli {

class ProgressBar {
 public:
  /// Draws on `terminal` when `enabled` (the caller checked that it is a terminal), once the run has
  /// lasted `delay`: short runs never show a bar. `unit` names what is counted ("requests",
  /// "prompts", "cases"); `label`, when not empty, says which part of the run is counting.
  ProgressBar(std::ostream& terminal, bool enabled, std::size_t total, std::string unit = "requests",
              std::chrono::milliseconds delay = std::chrono::milliseconds(500));
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// `done` of the total are finished; redraws at most ten times a second.
  void update(std::size_t done);
  /// Erases the bar, if drawn, so that the caller can print a line; the next update draws it again.
  void erase();
  /// Counts `total` of `unit` from now on, under `label` (a new phase of the run).
  void restart(std::size_t total, std::string unit, std::string label);

 private:
  using Clock = std::chrono::steady_clock;
  std::ostream& terminal_;
  bool enabled_;
  std::size_t total_;
  std::string unit_;
  std::string label_;
  Clock::time_point start_;
  Clock::time_point last_draw_{};
  std::chrono::milliseconds delay_;
  bool drawn_ = false;
};

}  // namespace pfx::cli
