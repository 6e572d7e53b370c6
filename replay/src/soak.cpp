#include <pfx/replay/soak.hpp>

#include <pfx/driver/errors.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <stdexcept>
#include <string>

namespace pfx::replay {

RssTolerance RssTolerance::parse(const std::string& text, const std::string& option) {
  RssTolerance tolerance;
  tolerance.percent = !text.empty() && text.back() == '%';
  const std::string digits = tolerance.percent ? text.substr(0, text.size() - 1) : text;
  const char* end = digits.data() + digits.size();
  const auto [stop, error] = std::from_chars(digits.data(), end, tolerance.kib);
  if (digits.empty() || error != std::errc() || stop != end) {
    throw driver::ConfigError(fmt::format("{}: expected KiB (an integer, such as 4096) or a percentage of the "
                                          "baseline (such as 5%), got \"{}\"",
                                          option, text));
  }
  return tolerance;
}

std::size_t RssTolerance::allowed_kib(std::size_t baseline_kib) const noexcept {
  return percent ? baseline_kib * kib / 100 : kib;
}

std::string RssTolerance::describe() const {
  return percent ? fmt::format("{}% of the baseline", kib) : fmt::format("{} KiB", kib);
}

std::size_t resident_memory_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    const std::size_t digits = line.find_first_of("0123456789");
    std::size_t kib = 0;
    if (line.rfind("VmRSS:", 0) == 0 && digits != std::string::npos &&
        std::from_chars(line.data() + digits, line.data() + line.size(), kib).ec == std::errc()) {
      return kib;
    }
  }
  throw std::runtime_error("cannot read resident memory (VmRSS of /proc/self/status)");
}

SoakSummary soak(driver::Engine& engine, const SoakSettings& settings, const OnRequest& on_request) {
  if (settings.memory_every == 0) throw driver::ConfigError("soak: memory_every must be at least 1");
  SoakSummary summary;
  summary.memory_checked = settings.check_memory;
  const auto take_sample = [&](std::size_t served) {
    const MemorySample sample{served, resident_memory_kib()};
    if (!summary.baseline) {
      summary.baseline = sample;
      summary.allowed_kib = settings.tolerance.allowed_kib(sample.kib);
    }
    summary.peak_kib = std::max(summary.peak_kib, sample.kib);
    summary.samples.push_back(sample);
  };
  if (settings.warmup == 0) take_sample(0);
  const OnRequest sampling = [&](const RequestReport& report) {
    if (on_request) on_request(report);
    const std::size_t served = report.number;  // requests, failed or not
    if (served == settings.warmup || (summary.baseline && (served - settings.warmup) % settings.memory_every == 0)) {
      take_sample(served);
    }
  };
  ReplaySettings replay_settings = settings.replay;
  replay_settings.verify = true;  // the cold side is built once, and used for the sample
  summary.replay = run(workload_stream(settings.workload), engine, replay_settings, sampling);
  const std::size_t served = summary.replay.requests;
  if (summary.baseline && summary.samples.back().requests != served) take_sample(served);
  summary.final_kib = summary.baseline ? summary.samples.back().kib : resident_memory_kib();
  summary.injected = summary.replay.failures - summary.replay.stale_reads;
  return summary;
}

}  // namespace pfx::replay
