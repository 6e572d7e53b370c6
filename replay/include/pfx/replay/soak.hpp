#pragma once

/// \file
/// `pfx soak` without its options and output: a long stream of the embedded workload's mixed
/// traffic, served through one lane with engine failures injected, where a sample of the responses
/// is compared with a cold run bit for bit and resident memory must stay flat after a warm-up
/// (SOAK-1, docs/cli.md "pfx soak"). Leaks are LeakSanitizer's to find, in the sanitize build.

#include <pfx/replay/replay.hpp>
#include <pfx/replay/workload.hpp>
#include <pfx/driver/engine.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace pfx::replay {

/// How much resident memory may grow past the baseline: a number of KiB, or a percentage of the
/// baseline.
struct RssTolerance {
  std::size_t kib = 4096;
  bool percent = false;  ///< `kib` is a percentage of the baseline instead

  /// "4096" (KiB) or "5%"; throws driver::ConfigError naming `option` for anything else.
  [[nodiscard]] static RssTolerance parse(const std::string& text, const std::string& option);
  /// The growth allowed past `baseline_kib`.
  [[nodiscard]] std::size_t allowed_kib(std::size_t baseline_kib) const noexcept;
  /// "4096 KiB", or "5% of the baseline".
  [[nodiscard]] std::string describe() const;
};

struct SoakSettings {
  /// The traffic; `sessions` should be bounded, or the generator's memory grows with the run.
  WorkloadOptions workload{.seed = 253, .vocab = 4096, .requests = 100000, .capacity = 2048, .sessions = 64};
  /// The lane, the injected failures (fault_rate, seed) and the sample compared with a cold run
  /// (verify_every; the last request is compared whatever it says, so a short run compares one).
  ReplaySettings replay{.lane = {.capacity = 2048, .poison = true}, .verify = true, .verify_every = 100,
                        .fault_rate = 0.002, .seed = 253};
  std::size_t warmup = 2000;        ///< requests before the memory baseline is taken
  std::size_t memory_every = 1000;  ///< requests between two samples of resident memory after it
  RssTolerance tolerance;
  /// Whether memory growth fails the run. Under AddressSanitizer, freed memory is held in quarantine
  /// and resident memory grows by design, so a sanitizer build reports it without judging it.
#if defined(__SANITIZE_ADDRESS__)
  bool check_memory = false;
#else
  bool check_memory = true;
#endif
};

/// Resident memory at one point of the run.
struct MemorySample {
  std::size_t requests = 0;  ///< served so far
  std::size_t kib = 0;
};

struct SoakSummary {
  ReplaySummary replay;          ///< requests, failures, stale reads, verified, mismatches, reuse
  std::size_t injected = 0;      ///< failures that were injected
  std::optional<MemorySample> baseline;  ///< absent when the run ended within the warm-up
  std::size_t peak_kib = 0;      ///< the largest sample at or after the baseline
  std::size_t final_kib = 0;     ///< at the end
  std::size_t allowed_kib = 0;   ///< growth past the baseline the tolerance allows
  bool memory_checked = false;   ///< SoakSettings::check_memory
  std::vector<MemorySample> samples;  ///< the baseline, every memory_every requests after it, the end

  /// Growth of the largest sample past the baseline.
  [[nodiscard]] std::size_t growth_kib() const noexcept {
    return baseline && peak_kib > baseline->kib ? peak_kib - baseline->kib : 0;
  }
  [[nodiscard]] bool memory_flat() const noexcept { return !memory_checked || growth_kib() <= allowed_kib; }
  /// Every check passed: no mismatch, no stale-row read, memory flat, and at least one response was
  /// compared with a cold run (ReplaySummary::unchecked).
  [[nodiscard]] bool ok() const { return replay.passed(true) && memory_flat(); }
};

/// Resident memory of this process in KiB (VmRSS of /proc/self/status); std::runtime_error where it
/// cannot be read.
[[nodiscard]] std::size_t resident_memory_kib();

/// Serves settings.workload.requests requests of the workload stream through run() on `engine`,
/// sampling resident memory after each request that the warm-up and memory_every name.
/// Throws what run() and resident_memory_kib() throw.
SoakSummary soak(driver::Engine& engine, const SoakSettings& settings, const OnRequest& on_request = {});

}  // namespace pfx::replay
