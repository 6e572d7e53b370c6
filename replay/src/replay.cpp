#include <pfx/replay/replay.hpp>

#include <pfx/driver/cold_run.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/driver/sharded_kv_state.hpp>
#include <pfx/driver/sharded_lane.hpp>
#include <pfx/driver/verify.hpp>
#include <pfx/engines/faulty_engine.hpp>

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <vector>

namespace pfx::replay {
namespace {

double milliseconds(std::chrono::nanoseconds t) { return std::chrono::duration<double, std::milli>(t).count(); }

/// Serves `request` cold on `cold_kv` (driver::run_cold poisons it whole first: as fresh as a new
/// state, allocated once) and writes into `report` whether `response` equals it bit for bit: its
/// generated tokens, its prompt's logits and every KV row it vouches for (the prompt's, and the decode
/// rows below the last generated token), compared as driver::verify compares them.
void compare_cold(driver::Engine& engine, driver::KvState& cold_kv, const driver::KvState& resumed,
                  const TraceRequest& request, const driver::Response& response, RequestReport& report) {
  driver::ColdRun reference;
  try {
    reference = driver::run_cold(engine, cold_kv, request.prompt, request.max_new_tokens);
    const std::size_t rows = driver::rows_written(request.prompt.size(), response.generated.size());
    report.mismatch = driver::difference(driver::Vouched::of(response.generated, response.logits, resumed, rows),
                                         driver::Vouched::of(reference.generated, reference.logits, cold_kv, rows));
  } catch (const driver::StaleRowRead& e) {  // the engine itself is broken: nothing to compare with
    report.mismatch = std::string("the cold run failed: ") + e.what();
  }
  report.bitexact = report.mismatch.empty();
  report.cold_ttft_ms = milliseconds(reference.first_token);
  report.cold_prefill_ms = milliseconds(reference.prefill);
}

/// The KV bytes of the lane's state, this rank's and every rank's (ReplaySummary): gathered from the
/// ranks of a group, read from each shard of a single controller's state.
void count_kv_bytes(const driver::KvState& kv, const driver::ShardedLane* sharded, driver::Collective* ranks,
                    ReplaySummary& summary) {
  summary.kv_bytes_per_rank = sharded != nullptr ? sharded->kv_bytes_per_rank() : kv.memory_bytes();
  if (ranks != nullptr) {
    const std::vector<std::uint64_t> mine{summary.kv_bytes_per_rank};
    std::vector<std::uint64_t> all(ranks->size());
    ranks->all_gather(mine, all);
    summary.kv_bytes_by_rank.assign(all.begin(), all.end());
  } else if (const auto* shards = dynamic_cast<const driver::ShardedKvState*>(&kv)) {
    for (std::size_t r = 0; r < shards->layout().ranks; ++r) {
      summary.kv_bytes_by_rank.push_back(shards->shard(r).memory_bytes());
    }
  } else {
    summary.kv_bytes_by_rank.push_back(kv.memory_bytes());
  }
  summary.kv_bytes_total = 0;
  for (const std::size_t bytes : summary.kv_bytes_by_rank) summary.kv_bytes_total += bytes;
}

}  // namespace

std::string ReplaySummary::unchecked(bool verify) const {
  if (requests > 0 && failures == requests) {
    return fmt::format("every request failed ({} of {}): nothing was served, so nothing was checked", failures, requests);
  }
  if (verify && verified == 0) return "no response was compared with a cold run: the check compared nothing";
  return "";
}

ReplaySummary run(const ItemSource& next, driver::Engine& engine, const ReplaySettings& settings,
                  const OnRequest& on_request) {
  if (settings.verify_every == 0) throw driver::ConfigError("replay: verify_every must be at least 1");
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<engines::FaultyEngine> faulty;
  if (settings.fault_rate > 0) faulty = std::make_unique<engines::FaultyEngine>(engine, settings.fault_rate, settings.seed);
  driver::Engine& served = faulty ? *faulty : engine;
  std::unique_ptr<driver::Lane> lane;
  driver::SoloCollective solo;
  std::unique_ptr<driver::ShardedLane> sharded;  // instead of lane when sharded
  driver::Collective* ranks = settings.collective;
  if (settings.dcp > 1 || ranks != nullptr) {
    if (ranks == nullptr) ranks = &solo;  // this process drives every shard
    if (settings.dcp == 0 || settings.interleave == 0) throw driver::ConfigError("replay: dcp and interleave must be at least 1");
    sharded = std::make_unique<driver::ShardedLane>(served, settings.lane, driver::ShardLayout{settings.dcp, settings.interleave},
                                                    *ranks);
  } else {
    lane = std::make_unique<driver::Lane>(served, settings.lane);
  }
  ReplaySummary summary;
  count_kv_bytes(lane ? lane->kv() : sharded->kv(), sharded.get(), settings.collective, summary);
  // The cold side: the engine itself (never the fault injector) on a KV state of its own.
  const std::unique_ptr<driver::KvState> cold_kv = settings.verify ? engine.make_kv_state(settings.lane.capacity) : nullptr;

  bool last_failed = false;
  std::optional<TraceItem> following;
  // Stops between two requests when asked (a signal): every report so far is whole.
  for (std::optional<TraceItem> item = next(); item && !(settings.stop && settings.stop()); item = std::move(following)) {
    following = next();  // none: this item is the last
    if (std::holds_alternative<TraceClear>(*item)) {
      if (sharded) {
        sharded->clear();  // this rank's record: the ranks then disagree, and the next request is served cold
      } else {
        lane->clear();
      }
      ++summary.clears;
      continue;
    }
    const auto& request = std::get<TraceRequest>(*item);
    RequestReport report{.number = ++summary.requests, .line = request.line, .label = request.label, .id = request.id,
                         .prompt_tokens = request.prompt.size(), .max_new_tokens = request.max_new_tokens};
    if (faulty && ranks != nullptr && ranks->size() > 1) {  // one rank fails, chosen per request
      const std::uint64_t chosen = (settings.seed ^ (report.number * 0x9e3779b97f4a7c15ULL)) % ranks->size();
      faulty->set_rate(chosen == ranks->rank() ? settings.fault_rate : 0.0);
    }
    driver::Response response;
    try {
      if (sharded) {
        driver::ShardedResponse answer = sharded->serve(request.prompt, request.max_new_tokens);
        summary.divergences += answer.diverged ? 1 : 0;
        response = std::move(answer);
      } else {
        response = lane->serve(request.prompt, request.max_new_tokens);
      }
    } catch (const engines::InjectedFault& e) {  // the lane aborted: the record keeps rows [0, offset)
      report.error = e.what();
      report.injected = true;
    } catch (const driver::PeerFault& e) {  // another rank's injected failure aborted it everywhere
      report.error = e.what();
      report.injected = true;
    } catch (const driver::StaleRowRead& e) {
      report.error = e.what();
    }
    const bool verify = cold_kv && (last_failed || !following || report.number % settings.verify_every == 0);
    last_failed = !report.error.empty();
    if (last_failed) {
      report.decision = sharded ? sharded->last_decision() : lane->last_decision();  // the offset it was given
      ++summary.failures;
      summary.stale_reads += report.injected ? 0 : 1;
    } else {
      report.decision = response.decision;
      report.prefill_tokens = response.prefilled;
      report.generated_tokens = response.generated.size();
      report.ttft_ms = milliseconds(response.timings.first_token);
      report.prefill_ms = milliseconds(response.timings.prefill);
      summary.prompt_tokens += report.prompt_tokens;
      summary.reused_tokens += response.decision.offset;
      summary.prefill_tokens += response.prefilled;
    }
    if (!last_failed && verify) {
      compare_cold(engine, *cold_kv, sharded ? sharded->kv() : lane->kv(), request, response, report);
      ++summary.verified;
      summary.mismatches += *report.bitexact ? 0 : 1;
      if (!*report.bitexact && summary.first_mismatch.request == 0) {
        summary.first_mismatch = {report.number, report.line, report.label, report.mismatch};
      }
      summary.prefill_ms += report.prefill_ms;
      summary.cold_prefill_ms += report.cold_prefill_ms;
      summary.ttft_ms += report.ttft_ms;
      summary.cold_ttft_ms += report.cold_ttft_ms;
    }
    if (on_request) on_request(report);
  }
  summary.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

ReplaySummary run(std::span<const TraceItem> items, driver::Engine& engine, const ReplaySettings& settings,
                  const OnRequest& on_request) {
  std::size_t given = 0;
  return run([&]() -> std::optional<TraceItem> { return given < items.size() ? std::optional(items[given++]) : std::nullopt; },
             engine, settings, on_request);
}

}  // namespace pfx::replay
