#include <pfx/cli/lane_options.hpp>

#include <pfx/cli/command.hpp>
#include <pfx/cli/options.hpp>
#include <pfx/driver/environment.hpp>
#include <pfx/token.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cctype>
#include <limits>
#include <stdexcept>

namespace pfx::cli {

void add_model_options(CLI::App& command, const ModelFields& fields) {
  command.add_option("--chunk", fields.chunk, "Prefill chunk of the reference engine, and so the rule's chunk")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))->capture_default_str();
  // At least 2: the reference engine refuses a vocabulary of one token (and 0 holds no token id).
  command.add_option("--vocab", fields.vocab,
                     "Vocabulary of the reference engine: token ids are 0 .. vocab - 1 (at most 2^24 with the "
                     "reference engine)")
      ->check(CLI::Range(std::size_t{2}, static_cast<std::size_t>(std::numeric_limits<token>::max())))
      ->capture_default_str();
  command.add_option("--capacity", fields.capacity, "KV rows of the lane, allocated once")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 26))->capture_default_str();
}

void add_keep_min_option(CLI::App& command, std::optional<std::size_t>& keep_min) {
  command.add_option("--keep-min", keep_min, "Shortest reuse worth taking (default: TF_GLM53_PREFIX_CACHE_MIN, else 64)")
      ->check(non_negative());  // CLI11 would wrap -1 round to 2^64 - 1
}

void add_faults_option(CLI::App& command, double& faults) {
  command.add_option("--faults", faults,
                     "Probability that each engine call (one prefill chunk or decode step) fails, injected")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            // CLI11's range check lets NaN through (every comparison with it is false).
            const std::string lower = [&] {
              std::string l;
              for (const char c : value) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
              return l;
            }();
            if (lower.find("nan") != std::string::npos) return "expected a probability from 0 to 1, got " + value;
            return "";
          },
          "PROBABILITY"))
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
}

void check_embedded_workload_capacity(std::size_t capacity) {
  if (capacity < 256) {
    throw InputError(fmt::format("--capacity {} is too small for the embedded workload (at least 256)", capacity));
  }
}

driver::LaneOptions lane_options(std::size_t capacity, std::optional<std::size_t> keep_min) {
  driver::LaneOptions lane{.capacity = capacity, .config = driver::config_from_environment(), .poison = true};
  if (keep_min) lane.config.keep_min = *keep_min;
  return lane;
}

std::string describe_engine(const engines::ReferenceModelShape& shape) {
  return fmt::format("reference engine (vocab {}, width {}, {} layers, chunk {})", shape.vocab, shape.width,
                     shape.layers, shape.chunk);
}

std::string describe_lane(const std::string& engine, const driver::LaneOptions& lane) {
  return fmt::format("{}, capacity {}, reuse {}, keep_min {}{}", engine, lane.capacity, lane.config.enabled ? "on" : "off",
                     lane.config.keep_min, lane.rule_chunk != 0 ? fmt::format(", rule chunk {}", lane.rule_chunk) : "");
}

std::string percent(std::size_t part, std::size_t whole) {
  return whole == 0 ? "0%" : fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

}  // namespace pfx::cli
