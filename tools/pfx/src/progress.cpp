#include <pfx/cli/progress.hpp>

#include <fmt/format.h>

#include <ostream>
#include <string>

namespace pfx::cli {

ProgressBar::ProgressBar(std::ostream& terminal, bool enabled, std::size_t total, std::chrono::milliseconds delay)
    : terminal_(terminal), enabled_(enabled && total > 0), total_(total), start_(Clock::now()), delay_(delay) {}

ProgressBar::~ProgressBar() { erase(); }

void ProgressBar::update(std::size_t done) {
  if (!enabled_) return;
  const Clock::time_point now = Clock::now();
  if (now - start_ < delay_ || (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && done < total_)) return;
  constexpr std::size_t width = 30;
  const std::size_t filled = done >= total_ ? width : done * width / total_;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  terminal_ << fmt::format("\r\033[K[{}{}] {}/{} requests, {:.0f} s", std::string(filled, '#'),
                           std::string(width - filled, ' '), done, total_, seconds)
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
