#include <pfx/driver/cold_run.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/driver/verify.hpp>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>

namespace pfx::driver {
namespace {

/// FNV-1a of a row's bytes: the lane's rows are kept as one digest per row, so that a long trace
/// holds 8 bytes per row, not the rows, until its cold runs.
std::uint64_t digest(std::span<const std::byte> bytes) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const std::byte b : bytes) {
    h ^= std::to_integer<std::uint64_t>(b);
    h *= 0x100000001b3ULL;
  }
  return h;
}

/// The digest and position of each of rows [0, rows) that the state holds: one read of the state
/// where it can (for_each_row).
void row_digests(const KvState& kv, std::size_t rows, Vouched& vouched) {
  if (!kv.readable()) return;
  kv.for_each_row(0, rows, [&vouched](std::size_t position, std::span<const std::byte> row) {
    vouched.rows.push_back(digest(row));
    vouched.positions.push_back(position);
  });
}

struct Served {
  bool refused = false;
  std::string failure;  ///< non-empty: the lane failed this request
  Vouched vouched;
};

/// A float with all its digits and its bits: two values that print alike still show how they differ.
std::string hex(float x) {
  char text[64];
  std::snprintf(text, sizeof text, "%.9g (0x%08x)", static_cast<double>(x),
                static_cast<unsigned>(std::bit_cast<std::uint32_t>(x)));
  return text;
}

}  // namespace

Vouched Vouched::of(std::vector<token> generated, std::vector<float> logits, const KvState& kv, std::size_t rows) {
  Vouched vouched{std::move(generated), std::move(logits), {}, {}};
  row_digests(kv, rows, vouched);
  return vouched;
}

std::string difference(const Vouched& resumed, const Vouched& cold) {
  for (std::size_t i = 0; i < resumed.generated.size() && i < cold.generated.size(); ++i) {
    if (resumed.generated[i] != cold.generated[i]) {
      return "generated token " + std::to_string(i) + ": " + std::to_string(resumed.generated[i]) + " vs " +
             std::to_string(cold.generated[i]) + " cold";
    }
  }
  if (resumed.generated.size() != cold.generated.size()) return "a different number of generated tokens";
  for (std::size_t i = 0; i < resumed.logits.size() && i < cold.logits.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(resumed.logits[i]) != std::bit_cast<std::uint32_t>(cold.logits[i])) {
      return "logit " + std::to_string(i) + ": " + hex(resumed.logits[i]) + " vs " + hex(cold.logits[i]) + " cold";
    }
  }
  if (resumed.logits.size() != cold.logits.size()) return "a different number of logits";
  for (std::size_t row = 0; row < resumed.rows.size() && row < cold.rows.size(); ++row) {
    // A row is named by its position where the digests carry one (one rank's rows are not 0, 1, ...).
    const std::size_t position = row < resumed.positions.size() ? resumed.positions[row] : row;
    const bool same_position = row >= resumed.positions.size() || row >= cold.positions.size() ||
                               resumed.positions[row] == cold.positions[row];
    if (resumed.rows[row] != cold.rows[row] || !same_position) {
      return "KV row " + std::to_string(position) + " differs from the cold run's";
    }
  }
  return "";
}

std::string describe_mismatches(std::size_t mismatches, const VerifyMismatch& first) {
  std::string where;
  if (first.line != 0) where = "line " + std::to_string(first.line);
  if (!first.label.empty()) where += (where.empty() ? "" : ", ") + first.label;
  return std::to_string(mismatches) + (mismatches == 1 ? " response differs from its" : " responses differ from their") +
         " cold run; the first is request " + std::to_string(first.request) + (where.empty() ? "" : " (" + where + ")") +
         ": " + first.what;
}

VerifyReport verify(Engine& engine, std::span<const TraceRequest> trace, const LaneOptions& options,
                    Engine* cold_engine, const VerifyProgress& progress) {
  VerifyReport report;
  report.requests = trace.size();
  std::size_t runs = 0;
  const auto ran = [&runs, &progress, total = 2 * trace.size()] {
    if (progress) progress(++runs, total);
  };
  std::vector<Served> served(trace.size());
  {
    Lane lane(engine, options);
    for (std::size_t i = 0; i < trace.size(); ++i) {
      Served& s = served[i];
      if (trace[i].clear_first) lane.clear();
      try {
        Response r = lane.serve(trace[i].prompt, trace[i].max_new_tokens);
        report.reused_tokens += r.decision.offset;
        s.vouched = Vouched::of(std::move(r.generated), std::move(r.logits), lane.kv(),
                                rows_written(trace[i].prompt.size(), trace[i].max_new_tokens));
      } catch (const RequestError&) {
        s.refused = true;
      } catch (const std::exception& e) {
        s.failure = e.what();
      }
      ran();
    }
  }

  Engine& cold_side = cold_engine != nullptr ? *cold_engine : engine;
  std::unique_ptr<KvState> cold_kv;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const Served& s = served[i];
    if (s.refused) {
      ran();
      continue;
    }
    std::string what = s.failure.empty() ? std::string() : "failed: " + s.failure;
    if (what.empty()) {
      if (cold_kv == nullptr) cold_kv = cold_side.make_kv_state(options.capacity);  // once, reused by every cold run
      ColdRun cold = run_cold(cold_side, *cold_kv, trace[i].prompt, trace[i].max_new_tokens);
      // The rows the lane's side read, none where its state cannot be read.
      const std::size_t rows = s.vouched.rows.empty() ? 0 : rows_written(trace[i].prompt.size(), trace[i].max_new_tokens);
      const Vouched cold_vouched = Vouched::of(std::move(cold.generated), std::move(cold.logits), *cold_kv, rows);
      ++report.compared;
      report.rows_compared += std::min(s.vouched.rows.size(), cold_vouched.rows.size());
      what = difference(s.vouched, cold_vouched);
    }
    if (!what.empty()) {
      ++report.mismatches;
      if (!report.first_mismatch) {
        report.first_mismatch = VerifyMismatch{.request = i + 1, .line = trace[i].line, .label = trace[i].label, .what = what};
      }
    }
    ran();
  }
  return report;
}

}  // namespace pfx::driver
