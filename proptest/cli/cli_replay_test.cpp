// `pfx replay` (docs/cli.md) in-process: the command's JSON output has a line per request and a
// summary; the rule chunk, --engine none, signals and write errors; a bad trace replays nothing. The
// loop it runs is pfx::replay's, tested in proptest/replay/.

#include "support/requirement.hpp"
#include "cli/in_process.hpp"

#include <pfx/cli/command.hpp>
#include <pfx/cli/engine_option.hpp>
#include <pfx/cli/interrupt.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

namespace {

using pfx::test::PfxRun;
using pfx::test::run_pfx;

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

std::string write_file(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ReplayCommand, JsonHasOneObjectPerRequestThenASummaryAndAWorkloadFileReplaysAsTheEmbeddedOne) {
  pfx::test::verifies("CLI-1");
  const std::string model = "--vocab 512 --chunk 16 --capacity 2048";
  const PfxRun workload = run_pfx("workload --requests 12 --seed 5 " + model);
  ASSERT_EQ(workload.status, pfx::cli::exit_ok);
  const std::string path = write_file("pfx_replay_workload.jsonl", workload.out);

  const PfxRun embedded = run_pfx("replay --json --verify --requests 12 --seed 5 --keep-min 32 " + model);
  const PfxRun from_file = run_pfx("replay --json --verify --seed 5 --keep-min 32 " + model + " " + path);
  ASSERT_EQ(embedded.status, pfx::cli::exit_ok) << embedded.err;
  ASSERT_EQ(from_file.status, pfx::cli::exit_ok) << from_file.err;
  const auto a = json_lines(embedded.out);
  const auto b = json_lines(from_file.out);
  ASSERT_EQ(a.size(), 13u);  // 12 requests, 1 summary
  ASSERT_EQ(b.size(), a.size());
  for (std::size_t i = 0; i + 1 < a.size(); ++i) {
    EXPECT_EQ(a[i]["type"], "request");
    for (const char* field : {"request", "line", "offset", "reason", "bound", "prompt_tokens", "prefill_tokens",
                              "generated_tokens", "bitexact", "label"}) {
      EXPECT_EQ(a[i][field], b[i][field]) << field << " of request " << i + 1;
    }
    EXPECT_EQ(a[i]["bitexact"], true);
    EXPECT_EQ(a[i]["prefill_tokens"].get<std::size_t>() + a[i]["offset"].get<std::size_t>(), a[i]["prompt_tokens"]);
  }
  const nlohmann::json& summary = a.back();
  EXPECT_EQ(summary["type"], "summary");
  EXPECT_EQ(summary["requests"], 12);
  EXPECT_EQ(summary["mismatches"], 0);
  EXPECT_EQ(summary["failures"], 0);
  EXPECT_EQ(summary["verified"], 12);
  EXPECT_GT(summary["reused_tokens"].get<std::size_t>(), 0u);
  EXPECT_GT(summary["prefill_time_ratio"].get<double>(), 0.0);
  EXPECT_EQ(summary["settings"]["keep_min"], 32);
  EXPECT_EQ(summary["settings"]["chunk"], 16);
  for (const char* field : {"requests", "prompt_tokens", "reused_tokens", "prefill_tokens", "mismatches", "failures"}) {
    EXPECT_EQ(summary[field], b.back()[field]) << field;
  }
}

TEST(ReplayCommand, ARuleChunkOffTheEngineGridShowsTHM1sCounterexampleAndExitsOne) {
  // docs/spec.md, THM-1: the rule aligned to 1 while the engine prefills on a grid of 8 resumes at
  // offsets off the grid, and --verify must see it. The cold side is run_cold, so a warm side that
  // reuses wrongly cannot be compared with itself.
  pfx::test::verifies("THM-1 CLI-1");
  const std::string base = "replay --verify --requests 8 --seed 7 --chunk 8 --keep-min 1 --vocab 512 --capacity 1024 ";
  const PfxRun off_grid = run_pfx(base + "--rule-chunk 1");
  EXPECT_EQ(off_grid.status, pfx::cli::exit_mismatch) << off_grid.err;
  EXPECT_NE(off_grid.err.find("warning: --rule-chunk 1 is not a multiple of the engine's chunk 8"), std::string::npos)
      << off_grid.err;
  // The first table row that says NO names the request the summary names.
  std::istringstream rows(off_grid.out);
  std::string first_no;
  for (std::string line; std::getline(rows, line);) {
    if (first_no.empty() && line.find(" NO: ") != std::string::npos) first_no = line;
  }
  ASSERT_FALSE(first_no.empty()) << off_grid.out;
  std::istringstream fields(first_no);
  std::size_t request = 0;
  fields >> request;
  EXPECT_NE(off_grid.out.find("the first is request " + std::to_string(request) + " (line"), std::string::npos)
      << off_grid.out;

  const PfxRun json = run_pfx(base + "--rule-chunk 1 --json");
  EXPECT_EQ(json.status, pfx::cli::exit_mismatch);
  const auto lines = json_lines(json.out);
  ASSERT_FALSE(lines.empty());
  std::size_t first_false = 0;
  for (const auto& line : lines) {
    if (line["type"] == "request" && line["bitexact"] == false) {
      first_false = line["request"].get<std::size_t>();
      break;
    }
  }
  EXPECT_EQ(first_false, request);
  EXPECT_EQ(lines.back()["first_mismatch"]["request"], request);
  EXPECT_EQ(lines.back()["settings"]["rule_chunk"], 1);
  EXPECT_GT(lines.back()["mismatches"].get<std::size_t>(), 0u);

  // On the grid (the default, or a multiple): no warning, every response bit-exact.
  for (const std::string rule : {"", "--rule-chunk 8", "--rule-chunk 24"}) {
    const PfxRun on_grid = run_pfx(base + rule);
    EXPECT_EQ(on_grid.status, pfx::cli::exit_ok) << rule << ": " << on_grid.out;
    EXPECT_EQ(on_grid.err.find("warning"), std::string::npos) << rule;
    EXPECT_NE(on_grid.out.find(", 0 mismatches"), std::string::npos) << rule;
  }
  // Full width: a rule chunk above every prompt aligns every offset to 0; past 64 bits it is refused.
  for (const std::string rule : {"4294967296", "18446744073709551615"}) {
    std::string command = base;
    command.append("--rule-chunk ").append(rule).append(" --json");
    const PfxRun wide = run_pfx(command);
    EXPECT_EQ(wide.status, pfx::cli::exit_ok) << rule;
    EXPECT_EQ(json_lines(wide.out).back()["reused_tokens"], 0) << rule;
    EXPECT_EQ(json_lines(wide.out).back()["settings"]["rule_chunk"], std::stoull(rule)) << rule;
  }
  for (const std::string rule : {"0", "-1", "18446744073709551616"}) {
    std::string command = base;
    command.append("--rule-chunk ").append(rule);
    const PfxRun bad = run_pfx(command);
    EXPECT_EQ(bad.status, pfx::cli::exit_bad_input) << rule;
    EXPECT_NE(bad.err.find("--rule-chunk"), std::string::npos) << rule << ": " << bad.err;
  }
}

TEST(ReplayCommand, AnOptionPast64BitsIsRefusedNotClamped) {
  pfx::test::verifies("CLI-2");
  for (const std::string option : {"--keep-min", "--seed"}) {
    const PfxRun bad = run_pfx("replay --requests 2 " + option + " 18446744073709551616");
    EXPECT_EQ(bad.status, pfx::cli::exit_bad_input) << option;
    EXPECT_NE(bad.err.find(option + ": 18446744073709551616 does not fit 64 bits"), std::string::npos) << bad.err;
  }
  const PfxRun top = run_pfx("replay --requests 2 --json --keep-min 18446744073709551615");
  EXPECT_EQ(top.status, pfx::cli::exit_ok) << top.err;
  EXPECT_EQ(json_lines(top.out).back()["settings"]["keep_min"], 18446744073709551615ULL);
  EXPECT_EQ(json_lines(top.out).back()["reused_tokens"], 0);
}

TEST(ReplayCommand, AFaultRateThatIsNotAProbabilityIsRefused) {
  pfx::test::verifies("CLI-2");
  for (const std::string rate : {"nan", "NaN", "-nan", "inf", "-inf", "-0.5", "1.5", "1e9", "0.5abc", "half", ""}) {
    const PfxRun bad = run_pfx("replay --requests 2 --vocab 512 --capacity 1024 --faults " + rate);
    EXPECT_EQ(bad.status, pfx::cli::exit_bad_input) << "--faults " << rate << ": " << bad.out;
    EXPECT_NE(bad.err.find("--faults"), std::string::npos) << rate << ": " << bad.err;
    EXPECT_EQ(bad.out, "") << rate;  // nothing ran
  }
  for (const std::string rate : {"0", "1", "0.25", "1e-3"}) {
    EXPECT_NE(run_pfx("replay --requests 2 --vocab 512 --capacity 1024 --faults " + rate).status,
              pfx::cli::exit_bad_input) << rate;
  }
}

TEST(ReplayCommand, EngineNoneReportsAsAModelWouldAndRefusesWhatNeedsOne) {
  pfx::test::verifies("CLI-5 CLI-2");
  const std::string workload = "replay --requests 12 --seed 9 --vocab 512 --chunk 16 --capacity 2048 --keep-min 16 --json";
  const PfxRun model = run_pfx(workload);
  const PfxRun none = run_pfx(workload + " --engine none");
  ASSERT_EQ(model.status, pfx::cli::exit_ok) << model.err;
  ASSERT_EQ(none.status, pfx::cli::exit_ok) << none.err;
  const auto a = json_lines(model.out);
  const auto b = json_lines(none.out);
  ASSERT_EQ(b.size(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::vector<std::string> keys_a;
    std::vector<std::string> keys_b;
    for (const auto& [key, value] : a[i].items()) keys_a.push_back(key);
    for (const auto& [key, value] : b[i].items()) keys_b.push_back(key);
    EXPECT_EQ(keys_b, keys_a) << "line " << i + 1 << ": the same output format";
    const bool summary = i + 1 == a.size();
    for (const char* field : summary ? std::vector<const char*>{"requests", "failures", "prompt_tokens", "reused_tokens",
                                                                "prefill_tokens", "ok"}
                                     : std::vector<const char*>{"offset", "reason", "prompt_tokens", "prefill_tokens",
                                                                "generated_tokens"}) {
      ASSERT_TRUE(a[i].contains(field)) << field << " of line " << i + 1;
      EXPECT_EQ(b[i].at(field), a[i].at(field)) << field << " of line " << i + 1;
    }
  }
  EXPECT_EQ(b.back()["settings"]["engine"], "no engine (decisions only: chunk 16, vocab 512)");

  const PfxRun text = run_pfx("replay --requests 3 --engine none --no-progress");
  EXPECT_EQ(text.status, pfx::cli::exit_ok) << text.err;
  EXPECT_NE(text.out.find("lane: no engine (decisions only: chunk 64, vocab 262144), capacity 32768"), std::string::npos)
      << text.out;

  struct Refused {
    std::string options;
    std::string message;
  };
  for (const Refused& r : std::vector<Refused>{
           {"--engine none --verify", "--verify needs a model: --engine none computes no KV row"},
           {"--engine none --backend host", "--backend host contradicts --engine none: give --engine alone"},
           {"--engine none --dcp 4", "--dcp 4: --engine none has no KV state to shard"},
           {"--engine nothing", "--engine"}}) {
    const PfxRun bad = run_pfx("replay --requests 2 " + r.options);
    EXPECT_EQ(bad.status, pfx::cli::exit_bad_input) << r.options;
    EXPECT_NE(bad.err.find(r.message), std::string::npos) << r.options << ": " << bad.err;
    EXPECT_EQ(bad.out, "") << r.options << ": nothing ran";
  }
}

// One --engine vocabulary and one --chunk default across replay, soak and conform (docs/cli.md,
// "Engines"): each command takes the engines its job allows, refuses the others saying why, and the
// deprecated --backend still works, with a warning naming the new spelling.
TEST(Engines, EveryCommandTakesOneVocabularyAndOneChunkDefault) {
  pfx::test::verifies("CLI-2");
  for (const std::string& engine : pfx::cli::engine_names()) {
    for (const std::string command : {"replay", "soak", "conform"}) {
      std::string arguments = command;
      arguments += " --engine " + engine + " --help";
      const PfxRun ran = run_pfx(arguments);
      EXPECT_EQ(ran.status, pfx::cli::exit_ok) << command << " --engine " << engine << ": " << ran.err;
    }
  }
  const PfxRun blocked = run_pfx("replay --requests 6 --engine blocked-attention --verify --no-progress");
  EXPECT_EQ(blocked.status, pfx::cli::exit_ok) << blocked.out << blocked.err;
  EXPECT_NE(blocked.out.find("lane: host blocked-attention reference engine"), std::string::npos) << blocked.out;
  const PfxRun noisy = run_pfx("replay --requests 6 --engine nondeterministic --verify --no-progress");
  EXPECT_EQ(noisy.status, pfx::cli::exit_mismatch) << noisy.out << noisy.err;  // two runs of it differ
  for (const std::string command : {"soak --requests 10", "conform --budget quick"}) {
    const PfxRun none = run_pfx(command + " --engine none");
    EXPECT_EQ(none.status, pfx::cli::exit_bad_input) << command;
    EXPECT_NE(none.err.find("--engine none computes no KV row and no logit"), std::string::npos) << none.err;
  }

  const nlohmann::json conform = nlohmann::json::parse(run_pfx("conform --budget quick --json").out);
  EXPECT_EQ(conform["chunk"], pfx::cli::default_chunk);
  const PfxRun replay = run_pfx("replay --requests 2 --json --no-progress");
  EXPECT_EQ(json_lines(replay.out).back()["settings"]["chunk"], pfx::cli::default_chunk);
  const PfxRun soak = run_pfx("soak --requests 10 --warmup 5 --json --no-progress");
  EXPECT_EQ(nlohmann::json::parse(soak.out)["settings"]["chunk"], pfx::cli::default_chunk) << soak.out << soak.err;

  const PfxRun host = run_pfx("replay --requests 2 --backend host --no-progress");
  EXPECT_EQ(host.status, pfx::cli::exit_ok) << host.err;
  EXPECT_NE(host.err.find("warning: --backend is deprecated; --backend host is --engine reference"), std::string::npos)
      << host.err;
  EXPECT_NE(host.out.find("lane: host reference engine"), std::string::npos) << host.out;
}

TEST(ReplayCommand, EngineNoneReplaysTwoTurnsOfAMillionTokens) {
  // The original lane's scale (docs/performance.md times it at the default vocabulary): the second
  // turn extends the first, so all of its first million rows are offered, and only its new tokens
  // are prefilled.
  pfx::test::verifies("CLI-5");
  constexpr std::size_t first = 1'000'000;
  constexpr std::size_t added = 1'000;
  const auto ids = [](std::size_t from, std::size_t to) {
    std::string text;
    text.reserve(2 * (to - from));
    for (std::size_t i = from; i < to; ++i) {
      text += i == from ? "" : ",";
      text += static_cast<char>('0' + (i * 7 + i / 13) % 10);
    }
    return text;
  };
  const std::string turn_1 = "{\"prompt\": [" + ids(0, first) + "], \"max_new_tokens\": 4}";
  const std::string turn_2 = "{\"prompt\": [" + ids(0, first) + "," + ids(first, first + added) + "], \"max_new_tokens\": 4}";
  const std::string path = write_file("pfx_replay_million.jsonl", turn_1 + "\n" + turn_2 + "\n");
  const PfxRun run = run_pfx("replay --engine none --json --vocab 10 --capacity 1002000 " + path);
  ASSERT_EQ(run.status, pfx::cli::exit_ok) << run.err;
  const auto lines = json_lines(run.out);
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_EQ(lines[0]["prompt_tokens"], first);
  EXPECT_EQ(lines[0]["offset"], 0);
  EXPECT_EQ(lines[1]["prompt_tokens"], first + added);
  EXPECT_EQ(lines[1]["offset"], first);  // a multiple of the chunk, 64
  EXPECT_EQ(lines[1]["reason"], "reused");
  EXPECT_EQ(lines[1]["prefill_tokens"], added);
  EXPECT_EQ(lines[2]["reused_tokens"], first);
  EXPECT_EQ(lines[2]["ok"], true);
}

/// An output stream that raises `signal` once it has written `lines` lines: a signal that arrives
/// while a run is in the middle of its requests, at a point the test chooses.
class SignalAfterLines : public std::streambuf {
 public:
  SignalAfterLines(int signal, std::size_t lines) : signal_(signal), lines_(lines) {}
  [[nodiscard]] const std::string& text() const noexcept { return text_; }

 protected:
  int_type overflow(int_type c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    text_ += traits_type::to_char_type(c);
    if (traits_type::to_char_type(c) == '\n' && --lines_ == 0) std::raise(signal_);
    return c;
  }

 private:
  int signal_;
  std::size_t lines_;
  std::string text_;
};

/// Runs `pfx <arguments>` with handlers installed and `signal` raised after `lines` lines of output;
/// exits with the run's status after writing its output to stderr (for EXPECT_EXIT's pattern).
[[noreturn]] void run_until_signalled(const std::vector<std::string>& arguments, int signal, std::size_t lines) {
  pfx::cli::install_interrupt_handlers();
  SignalAfterLines buffer(signal, lines);
  std::ostream out(&buffer);
  std::ostringstream err;
  const int status = pfx::cli::run(arguments, out, err);
  std::fputs(buffer.text().c_str(), stderr);
  std::exit(status);
}

TEST(ReplayCommand, ASignalStopsTheRunBetweenTwoRequestsWithASummaryOfWhatRan) {
  // In-process, in a child (a death test), so that the signal's flag does not outlive the test: the
  // header's 3 lines, then 2 requests, then SIGINT or SIGTERM.
  pfx::test::verifies("CLI-1");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::vector<std::string> replay = {"replay", "--requests", "40", "--vocab", "512", "--capacity", "1024",
                                           "--no-progress"};
  EXPECT_EXIT(run_until_signalled(replay, SIGINT, 5), ::testing::ExitedWithCode(130),
              "\n2 requests \\(0 failed\\)[^\n]*\nKV state: [^\n]*\nINTERRUPTED by SIGINT after 2 requests");
  const std::vector<std::string> soak = {"soak", "--requests", "400", "--warmup", "10", "--vocab", "512",
                                         "--capacity", "1024", "--no-progress"};
  EXPECT_EXIT(run_until_signalled(soak, SIGTERM, 1), ::testing::ExitedWithCode(143),
              "INTERRUPTED by SIGTERM after 0 requests");  // raised by its first header line
}

TEST(ReplayCommand, AnEmptyTraceIsAnErrorThatNamesItAndOnlyNoArgumentMeansTheEmbeddedWorkload) {
  pfx::test::verifies("CLI-2");
  for (const std::string& text : {std::string(), std::string("\n \n\t\n"), std::string("{\"op\": \"clear\"}\n")}) {
    const std::string path = write_file("pfx_replay_empty.jsonl", text);
    const PfxRun empty = run_pfx("replay " + path);
    EXPECT_EQ(empty.status, pfx::cli::exit_bad_input) << empty.out;
    EXPECT_NE(empty.err.find(path + " holds no request"), std::string::npos) << empty.err;
    EXPECT_EQ(empty.out, "");
  }
  std::ostringstream out;
  std::ostringstream err;
  const std::vector<std::string> arguments = {"replay", ""};  // `pfx replay ''`
  EXPECT_EQ(pfx::cli::run(arguments, out, err), pfx::cli::exit_bad_input);
  EXPECT_NE(err.str().find("the path is empty"), std::string::npos) << err.str();
  EXPECT_EQ(out.str(), "");
}

TEST(ReplayCommand, JsonEchoesEachRequestsIdAndAFailedRequestStillReportsItsOffset) {
  pfx::test::verifies("CLI-1 DRV-4");
  std::string trace;
  const std::vector<std::string> ids = {"\"a-1\"", "42", "{\"k\":[1,\"x\"]}", "", "null"};
  std::vector<int> prompt;
  for (std::size_t i = 0; i < 40; ++i) {
    for (int t = 0; t < 24; ++t) prompt.push_back(static_cast<int>((i * 7 + static_cast<std::size_t>(t)) % 500));
    nlohmann::json line{{"prompt", prompt}, {"max_new_tokens", 2}};
    const std::string& id = ids[i % ids.size()];
    if (!id.empty()) line["id"] = nlohmann::json::parse(id);
    trace += line.dump() + "\n";
  }
  const std::string path = write_file("pfx_replay_ids.jsonl", trace);
  const PfxRun run = run_pfx("replay --json --faults 0.05 --seed 11 --chunk 8 --keep-min 8 --vocab 512 --capacity 2048 " + path);
  ASSERT_EQ(run.status, pfx::cli::exit_ok) << run.err;
  std::size_t failed = 0;
  for (const auto& line : json_lines(run.out)) {
    if (line["type"] != "request") continue;
    const std::string& id = ids[(line["request"].get<std::size_t>() - 1) % ids.size()];
    if (id.empty()) {
      EXPECT_FALSE(line.contains("id"));
    } else {
      EXPECT_EQ(line["id"], nlohmann::json::parse(id));
    }
    EXPECT_TRUE(line.contains("offset")) << line;
    EXPECT_TRUE(line.contains("reason")) << line;
    if (line.contains("failed")) {
      ++failed;
      EXPECT_FALSE(line["error"].get<std::string>().empty());
      EXPECT_EQ(line["offset"].get<std::size_t>() % 8, 0u);
    }
  }
  EXPECT_GT(failed, 0u) << "the seed must make some request fail";
}

/// A stream buffer that refuses every byte, as a full disk or a closed file does.
class RefusingBuffer final : public std::streambuf {
 protected:
  int_type overflow(int_type /*ch*/) override { return traits_type::eof(); }
  std::streamsize xsputn(const char* /*s*/, std::streamsize /*n*/) override { return 0; }
};

TEST(Run, AnOutputThatCannotBeWrittenFailsTheRunWithAMessage) {
  pfx::test::verifies("CLI-2");
  for (const std::string command : {"replay --requests 2 --vocab 512 --capacity 1024", "workload --requests 2",
                                    "explain --help", "audit --cases 10 --protocol-length 1"}) {
    RefusingBuffer refusing;
    std::ostream out(&refusing);
    std::ostringstream err;
    std::vector<std::string> arguments;
    std::istringstream words(command);
    for (std::string word; words >> word;) arguments.push_back(word);
    EXPECT_EQ(pfx::cli::run(arguments, out, err), pfx::cli::exit_output_lost) << command;
    EXPECT_NE(err.str().find("pfx: cannot write the output"), std::string::npos) << command << ": " << err.str();
  }
  RefusingBuffer refusing;  // the messages themselves lost: still not a success
  std::ostream err(&refusing);
  std::ostringstream out;
  const std::vector<std::string> bad = {"replay", "--faults", "nan"};
  EXPECT_NE(pfx::cli::run(bad, out, err), pfx::cli::exit_ok);
}

TEST(ReplayCommand, ABadTraceReplaysNothingAndNamesEveryBadLine) {
  pfx::test::verifies("CLI-2");
  const std::string path = write_file("pfx_replay_bad.jsonl",
                                      "{\"prompt\": [1, 2, 3], \"max_new_tokens\": 2}\n"
                                      "{\"prompt\": [1, 2, 3], \"max_new_tokens\": \"two\"}\n"
                                      "{\"op\": \"clear\"}\n"
                                      "{\"prompt\": [1, 600], \"max_new_tokens\": 2}\n");
  const PfxRun run = run_pfx("replay --vocab 512 " + path);
  EXPECT_EQ(run.status, pfx::cli::exit_bad_input);
  EXPECT_EQ(run.out, "") << "nothing was replayed";
  EXPECT_NE(run.err.find(path + ":2: field \"max_new_tokens\": expected a non-negative integer"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find(path + ":4: field \"prompt\": element 1 is 600, outside the vocabulary 0..511"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("2 bad lines; nothing was replayed"), std::string::npos) << run.err;

  const PfxRun missing = run_pfx("replay " + ::testing::TempDir() + "pfx_no_such_trace.jsonl");
  EXPECT_EQ(missing.status, pfx::cli::exit_bad_input);
  EXPECT_NE(missing.err.find("pfx_no_such_trace.jsonl: cannot read the file (No such file or directory)"),
            std::string::npos)
      << missing.err;
  // A directory opens as a stream and reads as empty: it is named as what it is, not as an empty trace.
  const PfxRun directory = run_pfx("replay " + ::testing::TempDir());
  EXPECT_EQ(directory.status, pfx::cli::exit_bad_input);
  EXPECT_NE(directory.err.find("cannot read the file: it is a directory"), std::string::npos) << directory.err;
}

TEST(Run, BadInputExitsTwoWithTheCommandsNameAndHelpAndVersionExitZero) {
  pfx::test::verifies("CLI-2");
  const PfxRun none = run_pfx("");
  EXPECT_EQ(none.status, pfx::cli::exit_bad_input);
  EXPECT_NE(none.err.find("pfx: "), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("Run with --help for the options."), std::string::npos) << none.err;
  const PfxRun bad_option = run_pfx("replay --chunk 0");
  EXPECT_EQ(bad_option.status, pfx::cli::exit_bad_input);
  EXPECT_EQ(bad_option.err.rfind("pfx replay: --chunk", 0), 0u) << bad_option.err;
  const PfxRun bad_input = run_pfx("workload --capacity 10");
  EXPECT_EQ(bad_input.status, pfx::cli::exit_bad_input);
  EXPECT_EQ(bad_input.err, "pfx workload: --capacity 10 is too small for the embedded workload (at least 256)\n");
  EXPECT_EQ(bad_option.out + bad_input.out, "") << "nothing was run";
  const PfxRun help = run_pfx("replay --help");
  EXPECT_EQ(help.status, pfx::cli::exit_ok);
  EXPECT_NE(help.out.find("--verify"), std::string::npos) << help.out;
  const PfxRun version = run_pfx("--version");
  EXPECT_EQ(version.status, pfx::cli::exit_ok);
  EXPECT_FALSE(version.out.empty());
  EXPECT_EQ(version.err, "");
}

}  // namespace
