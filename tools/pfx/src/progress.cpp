#include <pfx/cli/progress.hpp>

#include <fmt/format.h>

#include <ostream>
#include <string>
#include <utility>

namespace pfx::cli {

ProgressBar::ProgressBar(std::ostream& terminal, bool enabled, std::size_t total, std::string unit,
                         std::chrono::milliseconds delay)
    : terminal_(terminal), enabled_(enabled), total_(total), unit_(std::move(unit)), start_(Clock::now()), delay_(delay) {}

ProgressBar::~ProgressBar() { erase(); }

void ProgressBar::restart(std::size_t total, std::string unit, std::string label) {
  total_ = total;
  unit_ = std::move(unit);
  label_ = std::move(label);
  last_draw_ = {};  // the new phase shows at once (once the run has lasted the delay)
}

void ProgressBar::update(std::size_t done) {
  if (!enabled_ || total_ == 0) return;
  const Clock::time_point now = Clock::now();
  if (now - start_ < delay_ || (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && done < total_)) return;
  constexpr std::size_t width = 30;
  const std::size_t filled = done >= total_ ? width : done * width / total_;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  terminal_ << fmt::format("\r\033[K{}[{}{}] {}/{} {}, {:.0f} s", label_.empty() ? "" : label_ + " ",
                           std::string(filled, '#'), std::string(width - filled, ' '), done, total_, unit_, seconds)
            << std::flush;
  drawn_ = true;
  last_draw_ = now;
}

void ProgressBar::erase() {
  if (!drawn_) return;
  terminal_ << "\r\033[K" << std::flush;
  drawn_ = false;
}

}  // namespace pfx::cli
