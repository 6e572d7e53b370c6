// `pfx conform` in-process (docs/cli.md, "pfx conform"): the verdict's exit status (0 safe, 1 the
// rule chunk is unsafe, 3 no grid is exact, 2 bad input), the text and the JSON report.

#include "cli/in_process.hpp"
#include "support/requirement.hpp"

#include <pfx/conform/report.hpp>
#include <pfx/driver/cuda.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

namespace {

using pfx::test::run_pfx;

TEST(ConformCli, TheReferenceEngineOnItsOwnChunkIsSafe) {
  pfx::test::verifies("CONF-2");
  const pfx::test::PfxRun ran = run_pfx("conform --budget quick");
  EXPECT_EQ(ran.status, 0) << ran.out << ran.err;
  EXPECT_NE(ran.out.find("grid 64 (prefill chunk, rule chunk): exact"), std::string::npos) << ran.out;  // the one --chunk default
  EXPECT_NE(ran.out.find("verdict: safe"), std::string::npos) << ran.out;
}

// `pfx conform` checks the rule chunk `pfx replay` serves with, given or not: both report the chunk
// the lane resolves (pfx::driver::resolved_rule_chunk), the engine's when none is given.
TEST(ConformCli, TheRuleChunkItChecksIsTheOneReplayServesWith) {
  pfx::test::verifies("CONF-2 CLI-1");
  for (const std::string rule : {"", " --rule-chunk 12"}) {
    const std::string expected = rule.empty() ? "6" : "12";
    const pfx::test::PfxRun conform = run_pfx("conform --json --budget quick --chunk 6" + rule);
    ASSERT_EQ(conform.status, 0) << rule << ": " << conform.out << conform.err;
    EXPECT_EQ(nlohmann::json::parse(conform.out)["rule_chunk"], std::stoull(expected)) << rule;
    const pfx::test::PfxRun replay = run_pfx("replay --json --requests 3 --vocab 64 --capacity 512 --chunk 6" + rule);
    ASSERT_EQ(replay.status, 0) << rule << ": " << replay.out << replay.err;
    const std::string summary = replay.out.substr(replay.out.rfind('\n', replay.out.size() - 2) + 1);
    EXPECT_EQ(nlohmann::json::parse(summary)["settings"]["rule_chunk"], std::stoull(expected)) << rule;
  }
}

TEST(ConformCli, ARuleChunkOffTheGridExits1AndPrintsTheSafeOne) {
  pfx::test::verifies("CONF-2");
  const pfx::test::PfxRun ran = run_pfx("conform --budget quick --chunk 6 --rule-chunk 4");
  EXPECT_EQ(ran.status, 1) << ran.out << ran.err;
  EXPECT_NE(ran.out.find("recommended rule chunk: 6"), std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find("Configure the rule's chunk to 6"), std::string::npos) << ran.out;
  // A multiple of the grid is safe too.
  EXPECT_EQ(run_pfx("conform --budget quick --chunk 6 --rule-chunk 12").status, 0);
}

TEST(ConformCli, TheDcpEngineFindsItsChunkGrid) {
  pfx::test::verifies("CONF-2 SHARD-5");
  const pfx::test::PfxRun ran = run_pfx("conform --budget quick --chunk 8 --dcp 4 --interleave 4");
  EXPECT_EQ(ran.status, 0) << ran.out << ran.err;
  EXPECT_NE(ran.out.find("decode context parallel over 4 ranks, interleave 4"), std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find("grid 8 (prefill chunk, rule chunk): exact"), std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find("recommended rule chunk: 8"), std::string::npos) << ran.out;
  EXPECT_EQ(run_pfx("conform --budget quick --engine blocked-attention --dcp 2").status, 2);
}

TEST(ConformCli, TheDcpEngineOnTheDeviceFindsItsChunkGridOrSaysWhyItCannotRun) {
  pfx::test::verifies("CONF-2 SHARD-5 DRV-6");
  const pfx::test::PfxRun ran = run_pfx("conform --budget quick --engine cuda --chunk 8 --dcp 4 --interleave 4");
  const std::string why_not = pfx::driver::cuda::unavailable_reason();
  if (!why_not.empty()) {  // refused for want of a device, not for want of a DCP form
    EXPECT_EQ(ran.status, 2) << ran.out << ran.err;
    EXPECT_NE(ran.err.find("--engine cuda: " + why_not), std::string::npos) << ran.err;
    return;
  }
  EXPECT_EQ(ran.status, 0) << ran.out << ran.err;
  EXPECT_NE(ran.out.find("CUDA reference engine"), std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find("decode context parallel over 4 ranks, interleave 4"), std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find("grid 8 (prefill chunk, rule chunk): exact"), std::string::npos) << ran.out;
}

TEST(ConformCli, TheNondeterministicEngineHasNoExactGrid) {
  pfx::test::verifies("CONF-2");
  const pfx::test::PfxRun ran = run_pfx("conform --budget quick --engine nondeterministic");
  EXPECT_EQ(ran.status, 4) << ran.out << ran.err;
  EXPECT_NE(ran.out.find("cold runs: DIFFER"), std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find("verdict: nondeterministic"), std::string::npos) << ran.out;
}

TEST(ConformCli, TheJsonReportOfTheBlockedAttentionEngineNamesItsGrid) {
  pfx::test::verifies("CONF-2");
  const pfx::test::PfxRun ran = run_pfx("conform --budget quick --engine blocked-attention --chunk 6 --json");
  ASSERT_EQ(ran.status, 0) << ran.out << ran.err;
  const nlohmann::json j = nlohmann::json::parse(ran.out);
  EXPECT_EQ(j["type"], "conform");
  EXPECT_EQ(j["verdict"], "safe");
  EXPECT_EQ(j["recommended"], 6);
  EXPECT_EQ(j["exit_status"], 0);
  EXPECT_EQ(j["deterministic"], true);
  for (const auto& grid : j["grids"]) {
    const std::size_t g = grid["grid"];
    EXPECT_EQ(grid["exact"], g % 6 == 0) << "grid " << g;
    if (!grid["exact"].get<bool>()) {
      const auto& m = grid["mismatch"];
      const std::size_t offset = m["offset"];
      EXPECT_EQ(offset % g, 0U);
      EXPECT_LT(offset, m["prompt"].size());
    }
  }
}

// --prefill-step S: the offsets the rule never resumes at under it are counted per grid, not resumed,
// and said with their reason, in the text and in the JSON; 0 is no premise, the run without it.
TEST(ConformCli, ThePrefillStepSkipsTheOffsetsTheRuleNeverResumesAtAndSaysWhy) {
  pfx::test::verifies("CONF-2");
  const pfx::test::PfxRun ran = run_pfx("conform --budget quick --chunk 4 --prefill-step 4 --json");
  ASSERT_EQ(ran.status, 0) << ran.out << ran.err;
  const nlohmann::json j = nlohmann::json::parse(ran.out);
  EXPECT_EQ(j["skip_reason"], pfx::conform::prefill_step_skip_reason(4));
  for (const auto& grid : j["grids"]) {
    const std::size_t g = grid["grid"];
    // On a multiple of the step a resume leaves n - k = n (mod 4): the premise never skips there. The
    // first prompts have 2 and 3 tokens: grid 1's offset 1 of 2 and grid 2's offset 2 of 3 are skipped.
    if (g % 4 == 0) {
      EXPECT_EQ(grid["skipped"], 0) << "grid " << g;
    }
    if (g <= 2) {
      EXPECT_GT(grid["skipped"], 0) << "grid " << g;
    }
  }
  const pfx::test::PfxRun text = run_pfx("conform --budget quick --chunk 4 --prefill-step 4");
  EXPECT_EQ(text.status, 0) << text.out << text.err;
  EXPECT_NE(text.out.find(" offsets the rule never resumes at: " + pfx::conform::prefill_step_skip_reason(4)),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("grid 4 (prefill chunk, rule chunk): exact"), std::string::npos) << text.out;
  const std::string plain = run_pfx("conform --budget quick --chunk 4").out;
  EXPECT_EQ(plain.find("skipped"), std::string::npos) << plain;
  nlohmann::json none = nlohmann::json::parse(run_pfx("conform --budget quick --chunk 4 --prefill-step 0 --json").out);
  nlohmann::json without = nlohmann::json::parse(run_pfx("conform --budget quick --chunk 4 --json").out);
  none.erase("elapsed_s");
  without.erase("elapsed_s");
  EXPECT_EQ(none, without);
}

TEST(ConformCli, BadInputExits2AndSaysWhy) {
  pfx::test::verifies("CONF-2 CLI-2");
  for (const char* line : {"conform --engine nope", "conform --budget huge", "conform --chunk 0",
                           "conform --rule-chunk 0", "conform --max-grid -1", "conform --seed x", "conform --prefill-step -1",
                           "conform --prefill-step x", "conform --budget quick --certify certificate.json"}) {
    const pfx::test::PfxRun ran = run_pfx(line);
    EXPECT_EQ(ran.status, 2) << line << "\n" << ran.out << ran.err;
    EXPECT_NE(ran.err.find("pfx conform: "), std::string::npos) << line << "\n" << ran.err;
    EXPECT_TRUE(ran.out.empty()) << line << "\n" << ran.out;
  }
  // A certificate is llama.cpp's (what llama-server --pfx-certificate reads): another engine has none.
  const pfx::test::PfxRun certify = run_pfx("conform --budget quick --certify certificate.json");
  EXPECT_NE(certify.err.find("--certify: --engine reference has no certificate (--engine llama has"), std::string::npos)
      << certify.err;
  if (!pfx::driver::cuda::unavailable_reason().empty()) {
    const pfx::test::PfxRun ran = run_pfx("conform --engine cuda --budget quick");
    EXPECT_EQ(ran.status, 2) << ran.out << ran.err;
    EXPECT_NE(ran.err.find("--engine cuda: "), std::string::npos) << ran.err;
  }
}

}  // namespace
