// `pfx soak` (docs/cli.md) in-process: the JSON summary counts every check, the warm-up and the fault
// seed, the counters replay and soak share; bad options exit 2. The workload and the soak it runs are
// pfx::replay's, tested in proptest/replay/.

#include "support/requirement.hpp"
#include "cli/in_process.hpp"

#include <pfx/cli/command.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

using pfx::test::PfxRun;
using pfx::test::run_pfx;

TEST(SoakCommand, TheJsonSummaryCountsEveryCheckAndBadOptionsRunNothing) {
  pfx::test::verifies("SOAK-1 CLI-2");
  const PfxRun run = run_pfx(
      "soak --json --requests 300 --warmup 100 --verify-every 10 --faults 0.003 --vocab 64 --chunk 8 --capacity 600 "
      "--keep-min 16 --rss-tolerance 1000%");
  ASSERT_EQ(run.status, pfx::cli::exit_ok) << run.err << run.out;
  const nlohmann::json summary = nlohmann::json::parse(run.out);
  EXPECT_EQ(summary["type"], "soak");
  EXPECT_EQ(summary["requests"], 300);
  EXPECT_EQ(summary["mismatches"], 0);
  EXPECT_EQ(summary["stale_reads"], 0);
  EXPECT_GE(summary["verified"].get<std::size_t>() + summary["failures"].get<std::size_t>(), 300u / 10u);
  EXPECT_EQ(summary["failures"], summary["injected"]);
  EXPECT_EQ(summary["ok"], true);
  EXPECT_EQ(summary["memory"]["samples"].size(), 1u + 1u);  // the baseline and the end
  EXPECT_EQ(summary["memory"]["samples"][0]["requests"], 100);
  EXPECT_EQ(summary["settings"]["verify_every"], 10);

  const PfxRun bad_tolerance = run_pfx("soak --rss-tolerance lots");
  EXPECT_EQ(bad_tolerance.status, pfx::cli::exit_bad_input);
  EXPECT_NE(bad_tolerance.err.find("--rss-tolerance: expected KiB"), std::string::npos)
      << bad_tolerance.err;
  const PfxRun no_time_to_watch = run_pfx("soak --requests 100 --warmup 100");
  EXPECT_EQ(no_time_to_watch.status, pfx::cli::exit_bad_input);
  EXPECT_NE(no_time_to_watch.err.find("--warmup 100 leaves no request"), std::string::npos)
      << no_time_to_watch.err;
  EXPECT_EQ(bad_tolerance.out + no_time_to_watch.out, "") << "nothing was run";
}

TEST(SoakCommand, AnyNumberOfRequestsRunsTheDefaultWarmUpShrinksToFit) {
  pfx::test::verifies("SOAK-1 CLI-2");
  for (const std::size_t requests : {1, 2, 3, 9}) {
    const PfxRun run = run_pfx("soak --json --vocab 64 --chunk 8 --capacity 600 --rss-tolerance 1000% --requests " +
                               std::to_string(requests));
    ASSERT_EQ(run.status, pfx::cli::exit_ok) << requests << ": " << run.err;
    const nlohmann::json summary = nlohmann::json::parse(run.out);
    EXPECT_EQ(summary["requests"], requests);
    EXPECT_EQ(summary["settings"]["warmup"], requests / 2);  // the default 2000, shrunk
  }
}

TEST(SoakCommand, TheFaultSeedChangesTheFaultsAloneAndDefaultsToTheSeed) {
  pfx::test::verifies("DRV-4 CLI-1");
  const std::string base = "replay --json --requests 16 --vocab 512 --capacity 1024 --chunk 8 --faults 0.05 --seed 3 ";
  const auto failed = [](const std::string& out) {
    std::vector<std::size_t> numbers;
    std::size_t prompt_tokens = 0;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j["type"] == "request") prompt_tokens += j["prompt_tokens"].get<std::size_t>();
      if (j["type"] == "request" && j.contains("failed")) numbers.push_back(j["request"].get<std::size_t>());
    }
    return std::make_pair(numbers, prompt_tokens);
  };
  const auto by_seed = failed(run_pfx(base).out);
  EXPECT_EQ(failed(run_pfx(base + "--fault-seed 3").out), by_seed);  // the default is --seed
  bool differs = false;
  for (const char* other : {"1", "2", "4", "18446744073709551615"}) {
    const auto with_other = failed(run_pfx(base + "--fault-seed " + other).out);
    EXPECT_EQ(with_other.second, by_seed.second) << "the workload must not change with --fault-seed " << other;
    differs = differs || with_other.first != by_seed.first;
  }
  EXPECT_TRUE(differs) << "no other --fault-seed changed which requests failed";
  EXPECT_EQ(run_pfx(base + "--fault-seed 18446744073709551616").status, pfx::cli::exit_bad_input);
  EXPECT_EQ(run_pfx("soak --requests 2 --fault-seed -1").status, pfx::cli::exit_bad_input);
}

std::vector<std::string> keys(const nlohmann::ordered_json& object) {
  std::vector<std::string> out;
  for (const auto& [key, value] : object.items()) out.push_back(key);
  return out;
}

TEST(SoakCommand, ReplayAndSoakSummariesWriteTheSameCountersAndKeepTheirFields) {
  pfx::test::verifies("SOAK-1 CLI-1");
  const PfxRun soak = run_pfx("soak --json --requests 150 --warmup 100 --verify-every 10 --vocab 64 --chunk 8 "
                              "--capacity 600 --keep-min 16 --rss-tolerance 1000%");
  const PfxRun replay = run_pfx("replay --json --requests 12 --seed 5 --vocab 512 --chunk 16 --capacity 2048");
  ASSERT_EQ(soak.status, pfx::cli::exit_ok) << soak.err << soak.out;
  ASSERT_EQ(replay.status, pfx::cli::exit_ok) << replay.err;
  const auto s = nlohmann::ordered_json::parse(soak.out);
  const auto r = nlohmann::ordered_json::parse(replay.out.substr(replay.out.rfind("\n{") + 1));
  const std::vector<std::string> counters = {"requests",      "served",         "failures",       "stale_reads",
                                             "clears",        "prompt_tokens",  "reused_tokens",  "prefill_tokens",
                                             "reuse_fraction", "mismatches"};
  const auto then = [&](std::vector<std::string> head, const std::vector<std::string>& tail) {
    head.insert(head.end(), counters.begin(), counters.end());
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  // "interrupted" before "ok": the verdict is read last; "unchecked" only appears when nothing was checked.
  // The KV bytes each rank holds follow the counters in both.
  EXPECT_EQ(keys(s), then({"type"}, {"injected", "kv_bytes_per_rank", "kv_bytes_by_rank", "kv_bytes_total", "verified",
                                     "memory", "elapsed_s", "interrupted", "ok", "settings"}));
  EXPECT_EQ(keys(r), then({"type"}, {"divergences", "kv_bytes_per_rank", "kv_bytes_by_rank", "kv_bytes_total", "elapsed_s",
                                     "interrupted", "ok", "settings"}));  // divergences: sharded ranks
  EXPECT_EQ(keys(s["settings"]), (std::vector<std::string>{"engine", "chunk", "vocab", "capacity", "reuse", "keep_min",
                                                            "faults", "seed", "fault_seed", "verify_every", "warmup",
                                                            "rss_tolerance", "dcp", "interleave"}));
  EXPECT_EQ(keys(r["settings"]), (std::vector<std::string>{"trace", "engine", "chunk", "vocab", "capacity", "reuse",
                                                            "keep_min", "rule_chunk", "verify", "faults", "seed",
                                                            "fault_seed", "dcp", "interleave"}));
  for (const nlohmann::ordered_json* j : {&s, &r}) {
    EXPECT_EQ((*j)["served"].get<std::size_t>() + (*j)["failures"].get<std::size_t>(), (*j)["requests"]) << *j;
    EXPECT_EQ((*j)["reused_tokens"].get<std::size_t>() + (*j)["prefill_tokens"].get<std::size_t>(),
              (*j)["prompt_tokens"]) << *j;
    EXPECT_DOUBLE_EQ((*j)["reuse_fraction"].get<double>(),
                     (*j)["reused_tokens"].get<double>() / (*j)["prompt_tokens"].get<double>());
    EXPECT_EQ((*j)["settings"]["reuse"], true);
  }
  EXPECT_EQ(s["settings"]["engine"], "host reference engine (vocab 64, width 16, 2 layers, chunk 8)");
  EXPECT_EQ(s["settings"]["keep_min"], 16);
  EXPECT_EQ(s["requests"], 150);
  EXPECT_EQ(r["requests"], 12);
}

}  // namespace
