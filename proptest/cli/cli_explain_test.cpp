// pfx explain, run in-process: its decision and bound are the core's (CLI-4), and bad input is an
// InputError that names the argument and the field (CLI-2).

#include "cli/in_process.hpp"
#include "support/requirement.hpp"

#include <pfx/cli/explain.hpp>
#include <pfx/core.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using pfx::cli::ExplainOptions;

std::string explain(const ExplainOptions& options) {
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(pfx::cli::run_explain(options, {out, err, false}), pfx::cli::exit_ok);
  return out.str();
}

/// The InputError's message, or "" when none was thrown.
std::string input_error(const ExplainOptions& options) {
  try {
    (void)explain(options);
  } catch (const pfx::cli::InputError& e) {
    return e.what();
  }
  return "";
}

ExplainOptions inline_options(std::string record, std::string prompt) {
  ExplainOptions options;
  options.record = std::move(record);
  options.prompt = std::move(prompt);
  options.chunk = 4;
  options.keep_min = 2;
  return options;
}

/// Sets an environment variable for the lifetime of the object (nullopt: unset), then restores it.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnvironment() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

/// The values of the bounds' rows in the JSON report, in order (empty when none was consulted).
std::vector<std::size_t> printed_bounds(const nlohmann::json& report) {
  std::vector<std::size_t> values;
  for (const nlohmann::json& row : report["bounds"]) values.push_back(row["value"].get<std::size_t>());
  return values;
}

/// The values of the bounds' rows in the text report: the number after each row's name.
std::vector<std::size_t> printed_bound_lines(const std::string& text) {
  std::vector<std::size_t> values;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    for (const std::string_view row :
         {"common prefix", "canonical end", "one token left", "alignment", "prefill step", "keep_min"}) {
      if (line.starts_with("  " + std::string(row) + " ")) values.push_back(std::stoul(line.substr(2 + row.size())));
    }
  }
  return values;
}

/// Core's bounds in the order explain prints them: the prefill step's only when one is configured.
std::vector<std::size_t> values_of(const pfx::Bounds& b, const pfx::Config& config) {
  if (config.prefill_step == 0) return {b.common_prefix, b.canonical_end, b.one_token_left, b.aligned, b.keep_min};
  return {b.common_prefix, b.canonical_end, b.one_token_left, b.aligned, b.stepped, b.keep_min};
}

/// A file in the test's temporary directory holding `text`.
std::string file_with(const std::string& name, const std::string& text) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace

PFX_PROPERTY(CliExplain, TheDecisionAndTheBoundAreThoseOfDecideOnEveryRecordAndPrompt, "CLI-4", ()) {
  const auto ids = *rc::gen::container<std::vector<pfx::token>>(rc::gen::inRange<pfx::token>(0, 3));
  const auto end = *rc::gen::inRange<std::size_t>(0, ids.size() + 1);
  const auto kept = *rc::gen::inRange<std::size_t>(0, ids.size() + 1);
  auto prompt = std::vector<pfx::token>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(kept));
  for (const pfx::token t : *rc::gen::container<std::vector<pfx::token>>(rc::gen::inRange<pfx::token>(0, 3))) {
    prompt.push_back(t);
  }
  const pfx::Config config{*rc::gen::arbitrary<bool>(), *rc::gen::inRange<std::size_t>(0, 9),
                           *rc::gen::inRange<std::size_t>(1, 9),
                           *rc::gen::weightedElement<std::size_t>({{4, 0}, {1, 1}, {1, 2}, {1, 3}, {1, 5}, {1, SIZE_MAX}}),
                           *rc::gen::weightedElement<std::size_t>({{2, 0}, {1, 1}, {1, 3}, {1, SIZE_MAX}}),
                           *rc::gen::arbitrary<bool>()};
  const bool as_object = *rc::gen::arbitrary<bool>();

  ExplainOptions options;
  options.record = fmt::format("{{\"ids\": [{}], \"canonical_end\": {}}}", fmt::join(ids, ", "), end);
  options.prompt = as_object ? fmt::format("{{\"prompt\": [{}], \"max_new_tokens\": 1}}", fmt::join(prompt, ","))
                             : fmt::format("[{}]", fmt::join(prompt, ","));
  options.chunk = config.chunk;
  options.keep_min = config.keep_min;
  options.enabled = config.enabled;
  options.prefill_step = config.prefill_step;
  options.admission_padding = config.admission_padding;
  options.decode_rows_exact = config.decode_rows_exact;
  // The environment says the opposite, so the option must win.
  const ScopedEnvironment reuse("TF_GLM53_PREFIX_CACHE", config.enabled ? "0" : "1");

  const pfx::Decision expected = pfx::decide(config, ids, end, prompt);
  const std::string text = explain(options);
  RC_ASSERT(text.ends_with(fmt::format("\noffset {}: {}, decided by {}\n", expected.offset, name(expected.reason),
                                       name(expected.bound))));

  options.json = true;
  const nlohmann::json report = nlohmann::json::parse(explain(options));
  RC_ASSERT(report["offset"].get<std::size_t>() == expected.offset);
  RC_ASSERT(report["reason"] == name(expected.reason));
  RC_ASSERT(report["bound"] == name(expected.bound));
  RC_ASSERT(report["common_prefix"].get<std::size_t>() == expected.common_prefix);
  // Exactly the decision's bound is marked tightest, and none when no bound was consulted.
  std::size_t marked = 0;
  for (const nlohmann::json& row : report["bounds"]) {
    if (!row["tightest"].get<bool>()) continue;
    ++marked;
    RC_ASSERT(row["name"] == name(expected.bound));
  }
  RC_ASSERT(marked == (expected.bound == pfx::Bound::none ? 0U : 1U));
  // Every number printed is the one core computed (pfx::bounds), in both forms.
  const std::vector<std::size_t> values = printed_bounds(report);
  const std::vector<std::size_t> lines = printed_bound_lines(text);
  RC_ASSERT(values == lines);
  if (expected.bound == pfx::Bound::none) {
    RC_ASSERT(values.empty());
  } else {
    RC_ASSERT(values == values_of(pfx::bounds(config, ids, end, prompt), config));
  }
}

TEST(CliExplain, EveryPrintedNumberIsCoresBoundOnTheEdgeCases) {
  pfx::test::verifies("CLI-4");
  static_assert(pfx::bounds(pfx::Config{true, 2, 1}, std::array<pfx::token, 3>{1, 2, 3}, 1,
                            std::array<pfx::token, 2>{1, 2}) == pfx::Bounds{2, 1, 1, 1, 1, 2, pfx::Bound::canonical_end});
  struct Case {
    const char* what;
    std::string record;
    std::string prompt;
    bool enabled;
    pfx::Bound bound;
  };
  const std::vector<Case> cases = {
      {"an empty prompt", "[1,2,3]", "[]", true, pfx::Bound::common_prefix},
      {"an empty record", "[]", "[1,2,3]", true, pfx::Bound::none},
      {"reuse off", "[1,2,3,4,5,6,7,8]", "[1,2,3,4,5,6,7,8,9]", false, pfx::Bound::none},
      {"the canonical end", R"({"ids": [1,2,3,4,5,6,7,8,9,10], "canonical_end": 5})", "[1,2,3,4,5,6,7,8,9,10,11]", true,
       pfx::Bound::canonical_end},
      {"one token left", "[1,2,3,4,5,6,7,8,9]", "[1,2,3,4,5]", true, pfx::Bound::one_token_left},
  };
  for (const Case& c : cases) {
    ExplainOptions options = inline_options(c.record, c.prompt);
    options.chunk = 1;
    options.enabled = c.enabled;
    const std::string text = explain(options);
    options.json = true;
    const nlohmann::json report = nlohmann::json::parse(explain(options));
    EXPECT_EQ(report["bound"], name(c.bound)) << c.what;
    const pfx::cli::HeldRecord held = pfx::cli::read_record("--record", c.record, std::nullopt);
    const std::vector<pfx::token> prompt = pfx::cli::read_prompt("--prompt", c.prompt);
    const pfx::Config config = pfx::cli::explain_config(options);
    EXPECT_EQ(printed_bound_lines(text), printed_bounds(report)) << c.what << "\n" << text;
    if (c.bound == pfx::Bound::none) {
      EXPECT_TRUE(printed_bounds(report).empty()) << c.what;
    } else {
      EXPECT_EQ(printed_bounds(report), values_of(pfx::bounds(config, held.ids, held.canonical_end, prompt), config))
          << c.what;
    }
  }
}

TEST(CliExplain, EveryReasonWithEveryBindingBoundIsPrintedExactlyAsCoreComputesIt) {
  pfx::test::verifies("CLI-4");
  // Every (reason, bound) pair decide can answer, found by enumerating small inputs with core alone,
  // then each first example explained: a pair that explain prints wrongly, or one the enumeration no
  // longer reaches, fails here whatever the random property above happened to draw.
  struct Example {
    pfx::Config config;
    std::vector<pfx::token> ids;
    std::size_t canonical_end = 0;
    std::vector<pfx::token> prompt;
  };
  std::map<std::pair<pfx::Reason, pfx::Bound>, Example> examples;
  const auto sequences = [](std::size_t longest, pfx::token symbols) {
    std::vector<std::vector<pfx::token>> all = {{}};
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (all[i].size() == longest) continue;
      for (pfx::token t = 1; t <= symbols; ++t) {
        all.push_back(all[i]);
        all.back().push_back(t);
      }
    }
    return all;
  };
  for (const std::vector<pfx::token>& ids : sequences(4, 2)) {
    for (const std::vector<pfx::token>& prompt : sequences(5, 2)) {
      for (std::size_t end = 0; end <= ids.size(); ++end) {
        for (const bool enabled : {true, false}) {
          for (const std::size_t chunk : {1U, 2U, 3U}) {
            for (const std::size_t keep_min : {0U, 2U, 5U}) {
              for (const std::size_t step : {0U, 2U, 3U}) {
                const pfx::Config config{enabled, keep_min, chunk, step};
                const pfx::Decision d = pfx::decide(config, ids, end, prompt);
                examples.try_emplace({d.reason, d.bound}, Example{config, ids, end, prompt});
              }
            }
          }
        }
      }
    }
  }
  std::set<std::pair<pfx::Reason, pfx::Bound>> expected = {{pfx::Reason::disabled, pfx::Bound::none},
                                                           {pfx::Reason::empty_record, pfx::Bound::none}};
  for (const pfx::Reason reason : {pfx::Reason::reused, pfx::Reason::below_keep_min, pfx::Reason::nothing_reusable}) {
    for (const pfx::Bound bound : {pfx::Bound::common_prefix, pfx::Bound::canonical_end, pfx::Bound::one_token_left,
                                   pfx::Bound::alignment, pfx::Bound::prefill_step}) {
      expected.emplace(reason, bound);
    }
  }
  std::set<std::pair<pfx::Reason, pfx::Bound>> found;
  for (const auto& entry : examples) found.insert(entry.first);
  EXPECT_EQ(found, expected);

  for (const auto& [pair, e] : examples) {
    const std::string what =
        fmt::format("{} by {}: ids [{}] canonical_end {}, prompt [{}], reuse {} keep_min {} chunk {} prefill_step {}",
                    name(pair.first), name(pair.second), fmt::join(e.ids, ","), e.canonical_end,
                    fmt::join(e.prompt, ","), e.config.enabled, e.config.keep_min, e.config.chunk,
                    e.config.prefill_step);
    ExplainOptions options;
    options.record = fmt::format(R"({{"ids": [{}], "canonical_end": {}}})", fmt::join(e.ids, ","), e.canonical_end);
    options.prompt = fmt::format("[{}]", fmt::join(e.prompt, ","));
    options.chunk = e.config.chunk;
    options.keep_min = e.config.keep_min;
    options.enabled = e.config.enabled;
    options.prefill_step = e.config.prefill_step;
    const std::string text = explain(options);
    options.json = true;
    const nlohmann::json report = nlohmann::json::parse(explain(options));
    const pfx::Decision d = pfx::decide(e.config, e.ids, e.canonical_end, e.prompt);
    EXPECT_EQ(report["offset"].get<std::size_t>(), d.offset) << what;
    EXPECT_EQ(report["reason"], name(d.reason)) << what;
    EXPECT_EQ(report["bound"], name(d.bound)) << what;
    EXPECT_EQ(report["common_prefix"].get<std::size_t>(), d.common_prefix) << what;
    EXPECT_TRUE(text.ends_with(fmt::format("\noffset {}: {}, decided by {}\n", d.offset, name(d.reason), name(d.bound))))
        << what << "\n" << text;
    EXPECT_EQ(printed_bound_lines(text), printed_bounds(report)) << what << "\n" << text;
    if (d.bound == pfx::Bound::none) {
      EXPECT_TRUE(printed_bounds(report).empty()) << what;
      continue;
    }
    EXPECT_EQ(printed_bounds(report), values_of(pfx::bounds(e.config, e.ids, e.canonical_end, e.prompt), e.config))
        << what;
    // The row marked tightest, in both forms, is the decision's bound, and only that row.
    std::vector<std::string> marked;
    for (const nlohmann::json& row : report["bounds"]) {
      if (row["tightest"].get<bool>()) marked.push_back(row["name"].get<std::string>());
    }
    EXPECT_EQ(marked, std::vector<std::string>{std::string(name(d.bound))}) << what;
    const std::size_t mark = text.find("<- tightest");
    ASSERT_NE(mark, std::string::npos) << what << "\n" << text;
    EXPECT_EQ(mark, text.rfind("<- tightest")) << what << "\n" << text;
    EXPECT_EQ(text.rfind("\n  " + std::string(name(d.bound)) + " ", mark), text.rfind("\n  ", mark))
        << what << "\n" << text;
  }
}

TEST(CliExplain, TheKnobIsEnabledAndTheDeprecatedDisabledStillTurnsItOff) {
  pfx::test::verifies("CLI-4 CLI-2");
  const ScopedEnvironment reuse("TF_GLM53_PREFIX_CACHE", std::nullopt);
  const std::string args = "explain --record [1,2,3,4,5] --prompt [1,2,3,4,5,6] --chunk 1 --keep-min 1";
  const pfx::test::PfxRun on = pfx::test::run_pfx(args + " --enabled 1");
  const pfx::test::PfxRun off = pfx::test::run_pfx(args + " --enabled 0");
  const pfx::test::PfxRun deprecated = pfx::test::run_pfx(args + " --disabled");
  EXPECT_EQ(on.status, pfx::cli::exit_ok) << on.err;
  EXPECT_TRUE(on.out.ends_with("\noffset 5: reused, decided by common prefix\n")) << on.out;
  EXPECT_EQ(off.status, pfx::cli::exit_ok) << off.err;
  EXPECT_TRUE(off.out.ends_with("\noffset 0: disabled, decided by none\n")) << off.out;
  EXPECT_EQ(deprecated.out, off.out);
  EXPECT_NE(deprecated.err.find("warning: --disabled is deprecated; it is --enabled 0"), std::string::npos)
      << deprecated.err;
  EXPECT_EQ(off.err, "");
  const pfx::test::PfxRun both = pfx::test::run_pfx(args + " --enabled 1 --disabled");
  EXPECT_EQ(both.status, pfx::cli::exit_bad_input);
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
  const pfx::test::PfxRun neither = pfx::test::run_pfx(args + " --enabled maybe");
  EXPECT_EQ(neither.status, pfx::cli::exit_bad_input);
  EXPECT_NE(neither.err.find("--enabled"), std::string::npos) << neither.err;
  EXPECT_EQ(both.out + neither.out, "") << "nothing was explained";
}

TEST(CliExplain, EachBoundIsPrintedWithItsValueAndInvariantAndTheTightestIsMarked) {
  pfx::test::verifies("CLI-4");
  // lcp 6, canonical_end 8, one token left 6: the tightest is 6, which chunk 4 rounds down to 4.
  const std::string out = explain(inline_options(R"({"ids": [1,2,3,4,5,6,7,8,9,10], "canonical_end": 8})",
                                                 "[1,2,3,4,5,6,99]"));
  EXPECT_NE(out.find("record: 10 ids, canonical_end 8\n"), std::string::npos) << out;
  EXPECT_NE(out.find("config: reuse on, keep_min 2, chunk 4\n"), std::string::npos) << out;
  const std::vector<std::string> rows = {
      "  common prefix           6  INV-1  ", "  canonical end           8  INV-2  ",
      "  one token left          6  INV-3  ", "  alignment               4  INV-5  ",
      "  keep_min                2  INV-4  "};
  for (const std::string& row : rows) EXPECT_NE(out.find(row), std::string::npos) << row << "\n" << out;
  const std::size_t alignment = out.find("  alignment ");
  EXPECT_NE(out.find("<- tightest", alignment), std::string::npos) << out;
  EXPECT_EQ(out.find("<- tightest"), out.rfind("<- tightest")) << out;
  EXPECT_TRUE(out.ends_with("\noffset 4: reused, decided by alignment\n")) << out;

  // keep_min 5 refuses the 4 rows the bounds allow; the bound that cut them is still named.
  ExplainOptions options = inline_options(R"([1,2,3,4,5,6,7,8,9,10])", "[1,2,3,4,5,6,99]");
  options.keep_min = 5;
  EXPECT_TRUE(explain(options).ends_with("\noffset 0: below keep_min, decided by alignment\n"));
  options.enabled = false;
  EXPECT_TRUE(explain(options).ends_with("no bound was consulted: reuse is off (INV-6)\n\noffset 0: disabled, "
                                         "decided by none\n"));
}

TEST(CliExplain, ThePrefillStepIsAnOptionWithARowOfItsOwn) {
  pfx::test::verifies("CLI-4 INV-12");
  // lcp 9, one token left 8, chunk 2: 8. A prompt of 9 tokens in steps of 3 ends with 3 tokens; a
  // resume at 8 would compute its last token alone, so the step lowers it a chunk, to 6.
  const ScopedEnvironment reuse("TF_GLM53_PREFIX_CACHE", std::nullopt);
  const std::string args = "explain --record [1,2,3,4,5,6,7,8,9,10] --prompt [1,2,3,4,5,6,7,8,9] --chunk 2 --keep-min 2";
  const pfx::test::PfxRun stepped = pfx::test::run_pfx(args + " --prefill-step 3");
  EXPECT_EQ(stepped.status, pfx::cli::exit_ok) << stepped.err;
  EXPECT_NE(stepped.out.find("config: reuse on, keep_min 2, chunk 2, prefill step 3\n"), std::string::npos)
      << stepped.out;
  EXPECT_NE(stepped.out.find("  alignment               8  INV-5  "), std::string::npos) << stepped.out;
  EXPECT_NE(stepped.out.find("  prefill step            6  INV-12 alignment, lowered so a resume ends with a "
                             "one-token step iff the cold run does (prefill step 3)   <- tightest\n"),
            std::string::npos)
      << stepped.out;
  EXPECT_NE(stepped.out.find("  keep_min                2  INV-4  6 >= 2: worth reusing\n"), std::string::npos)
      << stepped.out;
  EXPECT_TRUE(stepped.out.ends_with("\noffset 6: reused, decided by prefill step\n")) << stepped.out;
  // keep_min judges what the step leaves: 7 refuses the 6 rows, though the grid allows 8.
  const pfx::test::PfxRun below = pfx::test::run_pfx(
      "explain --record [1,2,3,4,5,6,7,8,9,10] --prompt [1,2,3,4,5,6,7,8,9] --chunk 2 --keep-min 7 --prefill-step 3");
  EXPECT_TRUE(below.out.ends_with("\noffset 0: below keep_min, decided by prefill step\n")) << below.out;
  // Without the option there is no premise and no row; JSON says prefill_step 0.
  const pfx::test::PfxRun none = pfx::test::run_pfx(args);
  EXPECT_EQ(none.out.find("prefill step"), std::string::npos) << none.out;
  EXPECT_TRUE(none.out.ends_with("\noffset 8: reused, decided by one token left\n")) << none.out;
  const pfx::test::PfxRun json = pfx::test::run_pfx(args + " --json");
  EXPECT_EQ(nlohmann::json::parse(json.out)["config"]["prefill_step"], 0) << json.out;
  // Full width: one step whatever the length; 2^64 does not fit, and a negative step is bad input.
  const pfx::test::PfxRun one_step = pfx::test::run_pfx(args + " --prefill-step 18446744073709551615 --json");
  EXPECT_EQ(one_step.status, pfx::cli::exit_ok) << one_step.err;
  const nlohmann::json report = nlohmann::json::parse(one_step.out);
  EXPECT_EQ(report["config"]["prefill_step"].get<std::size_t>(), SIZE_MAX);
  EXPECT_EQ(report["offset"], 6);  // a resume at 8 would leave one token, the cold run's one step holds 9
  EXPECT_EQ(report["bound"], "prefill step");
  for (const char* bad : {"-1", "18446744073709551616", "three"}) {
    const pfx::test::PfxRun refused = pfx::test::run_pfx(args + " --prefill-step " + bad);
    EXPECT_EQ(refused.status, pfx::cli::exit_bad_input) << bad;
    EXPECT_NE(refused.err.find("--prefill-step"), std::string::npos) << bad << ": " << refused.err;
    EXPECT_EQ(refused.out, "") << bad;
  }
}

TEST(CliExplain, TheAdmissionPaddingIsAnOptionTheStepRowSays) {
  pfx::test::verifies("CLI-4 INV-12");
  // As above, a resume at 8 of a 9-token prompt in steps of 3; padded, that admission computes 4
  // rows, not its last token alone, so it is kept: 8, decided by one token left.
  const ScopedEnvironment reuse("TF_GLM53_PREFIX_CACHE", std::nullopt);
  const std::string args = "explain --record [1,2,3,4,5,6,7,8,9,10] --prompt [1,2,3,4,5,6,7,8,9] --chunk 2 --keep-min 2";
  const pfx::test::PfxRun padded = pfx::test::run_pfx(args + " --prefill-step 3 --admission-padding 3");
  EXPECT_EQ(padded.status, pfx::cli::exit_ok) << padded.err;
  EXPECT_NE(padded.out.find("config: reuse on, keep_min 2, chunk 2, prefill step 3, admission padding 3\n"),
            std::string::npos)
      << padded.out;
  EXPECT_NE(padded.out.find("  prefill step            8  INV-12 alignment, lowered so a resume ends with a "
                            "one-token step iff the cold run does (prefill step 3, admission padding 3)\n"),
            std::string::npos)
      << padded.out;
  EXPECT_TRUE(padded.out.ends_with("\noffset 8: reused, decided by one token left\n")) << padded.out;
  // Full width, in JSON; without a prefill step the padding is carried but decides nothing.
  const pfx::test::PfxRun json = pfx::test::run_pfx(args + " --prefill-step 3 --admission-padding 18446744073709551615 --json");
  EXPECT_EQ(json.status, pfx::cli::exit_ok) << json.err;
  const nlohmann::json report = nlohmann::json::parse(json.out);
  EXPECT_EQ(report["config"]["admission_padding"].get<std::size_t>(), SIZE_MAX);
  EXPECT_EQ(report["offset"], 8);
  const pfx::test::PfxRun no_step = pfx::test::run_pfx(args + " --admission-padding 3");
  EXPECT_EQ(no_step.out.find("admission padding"), std::string::npos) << no_step.out;
  EXPECT_TRUE(no_step.out.ends_with("\noffset 8: reused, decided by one token left\n")) << no_step.out;
  const pfx::test::PfxRun unpadded = pfx::test::run_pfx(args + " --prefill-step 3 --json");
  EXPECT_EQ(nlohmann::json::parse(unpadded.out)["config"]["admission_padding"], 0) << unpadded.out;
  for (const char* bad : {"-1", "18446744073709551616", "three"}) {
    const pfx::test::PfxRun refused = pfx::test::run_pfx(args + " --admission-padding " + bad);
    EXPECT_EQ(refused.status, pfx::cli::exit_bad_input) << bad;
    EXPECT_NE(refused.err.find("--admission-padding"), std::string::npos) << bad << ": " << refused.err;
    EXPECT_EQ(refused.out, "") << bad;
  }
}

TEST(CliExplain, DecodeRowsExactIsAFlagThatLiftsTheCanonicalEndToTheRecordsIds) {
  pfx::test::verifies("CLI-4 INV-2");
  // 12 ids of which the last 4 decode wrote (canonical_end 8); the prompt keeps all 12 and adds 3.
  // Without the flag the offset stops at 8, decided by canonical end; with it, rows decode wrote are
  // reused up to the grid's 12, and the canonical end row says len(ids).
  const ScopedEnvironment reuse("TF_GLM53_PREFIX_CACHE", std::nullopt);
  const std::string args =
      "explain --record {\"ids\":[1,2,3,4,5,6,7,8,9,10,11,12],\"canonical_end\":8} "
      "--prompt [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15] --chunk 4 --keep-min 2";
  const pfx::test::PfxRun inexact = pfx::test::run_pfx(args);
  EXPECT_EQ(inexact.status, pfx::cli::exit_ok) << inexact.err;
  EXPECT_NE(inexact.out.find("config: reuse on, keep_min 2, chunk 4\n"), std::string::npos) << inexact.out;
  EXPECT_TRUE(inexact.out.ends_with("\noffset 8: reused, decided by canonical end\n")) << inexact.out;
  const pfx::test::PfxRun exact = pfx::test::run_pfx(args + " --decode-rows-exact");
  EXPECT_EQ(exact.status, pfx::cli::exit_ok) << exact.err;
  EXPECT_NE(exact.out.find("config: reuse on, keep_min 2, chunk 4, decode rows exact\n"), std::string::npos)
      << exact.out;
  EXPECT_NE(exact.out.find("  canonical end          12  INV-2  len(ids): decode rows are exact, so every row "
                           "held may be reused\n"),
            std::string::npos)
      << exact.out;
  EXPECT_TRUE(exact.out.ends_with("\noffset 12: reused, decided by common prefix\n")) << exact.out;
  const pfx::test::PfxRun json = pfx::test::run_pfx(args + " --decode-rows-exact --json");
  const nlohmann::json report = nlohmann::json::parse(json.out);
  EXPECT_EQ(report["config"]["decode_rows_exact"], true);
  EXPECT_EQ(report["record"]["canonical_end"], 8);  // the record still says which rows decode wrote
  EXPECT_EQ(report["offset"], 12);
  EXPECT_EQ(nlohmann::json::parse(pfx::test::run_pfx(args + " --json").out)["config"]["decode_rows_exact"], false);
}

TEST(CliExplain, DefaultsAreReplaysChunk64AndTheSeedsEnvironmentVariables) {
  pfx::test::verifies("CLI-4");
  ExplainOptions options;
  {
    const ScopedEnvironment reuse("TF_GLM53_PREFIX_CACHE", std::nullopt);
    const ScopedEnvironment keep_min("TF_GLM53_PREFIX_CACHE_MIN", std::nullopt);
    EXPECT_EQ(pfx::cli::explain_config(options), (pfx::Config{true, 64, 64}));
  }
  {
    const ScopedEnvironment reuse("TF_GLM53_PREFIX_CACHE", "0");
    const ScopedEnvironment keep_min("TF_GLM53_PREFIX_CACHE_MIN", "3");
    EXPECT_EQ(pfx::cli::explain_config(options), (pfx::Config{false, 3, 64}));
    options.keep_min = 7;
    options.chunk = 2;
    EXPECT_EQ(pfx::cli::explain_config(options), (pfx::Config{false, 7, 2}));
  }
}

TEST(CliExplain, TheRecordAndThePromptAreReadFromFilesAsFromInlineJson) {
  pfx::test::verifies("CLI-4");
  const std::string record = R"({"ids": [5,6,7,8,9], "canonical_end": 4})";
  const std::string prompt = R"({"prompt": [5,6,7,8,9,1], "max_new_tokens": 2})";
  ExplainOptions from_files = inline_options(file_with("pfx_explain_record.json", record),
                                             file_with("pfx_explain_prompt.json", prompt));
  const std::string out = explain(from_files);
  EXPECT_EQ(out, explain(inline_options(record, prompt)));
  EXPECT_TRUE(out.ends_with("\noffset 4: reused, decided by canonical end\n")) << out;

  // A plain array of ids holds rows up to its end, unless --canonical-end says otherwise.
  EXPECT_EQ(pfx::cli::read_record("--record", "[5,6,7]", std::nullopt).canonical_end, 3U);
  EXPECT_EQ(pfx::cli::read_record("--record", "[5,6,7]", 1).canonical_end, 1U);
  EXPECT_EQ(pfx::cli::read_record("--record", record, 2).canonical_end, 2U);
  // Both ends of the one range of token ids, and -0, which JSON means as 0.
  EXPECT_EQ(pfx::cli::read_prompt("--prompt", "[0, 2147483647, -0]"), (std::vector<pfx::token>{0, 2147483647, 0}));
}

TEST(CliExplain, BadInputIsAnInputErrorThatNamesTheArgumentAndTheField) {
  pfx::test::verifies("CLI-2");
  const std::string bad_file = file_with("pfx_explain_bad_record.json", R"({"ids": [1, 2], "canonical_end": -3})");
  struct Case {
    std::string record;
    std::string prompt;
    std::string message;
  };
  const std::vector<Case> cases = {
      {bad_file, "[1]", "--record " + bad_file + ": field \"canonical_end\": expected a non-negative integer, got -3"},
      {R"({"ids": [1, 2], "canonical_end": 1.5})", "[1]",
       "--record: field \"canonical_end\": expected a non-negative integer, got 1.5"},
      {R"({"ids": [1, -2], "canonical_end": 1})", "[1]",
       "--record: field \"ids\": element 1: expected a token id (an integer in 0..2147483647), got -2"},
      {"[1, 2147483648]", "[1]", "--record: element 1: expected a token id (an integer in 0..2147483647), got 2147483648"},
      {R"([1, "2"])", "[1]", "--record: element 1: expected a token id (an integer in 0..2147483647), got the string \"2\""},
      {R"({"ids": "1 2"})", "[1]", "--record: field \"ids\": expected an array of token ids, got the string \"1 2\""},
      {R"({"canonical_end": 1})", "[1]", "--record: field \"ids\": missing"},
      {R"({"ids": [1]})", "[1]", "--record: field \"canonical_end\": missing (give it here, or with --canonical-end)"},
      {"[1, 2", "[1]", "--record: malformed JSON: parse error at line 1, column 6"},
      {"/nonexistent/record.json", "[1]", "--record /nonexistent/record.json: cannot read the file"},
      {std::filesystem::temp_directory_path().string(), "[1]",
       "--record " + std::filesystem::temp_directory_path().string() + ": cannot read the file: it is a directory"},
      {"[1]", R"({"max_new_tokens": 1})", "--prompt: field \"prompt\": missing"},
      {"[1]", R"({"prompt": {"a": 1}})", "--prompt: field \"prompt\": expected an array of token ids, got an object"},
      {"[1]", "[0.5]", "--prompt: element 0: expected a token id (an integer in 0..2147483647), got 0.5"},
      {"[1]", "{} ", "--prompt: field \"prompt\": missing"},
      // The machine refuses the record (INV-9), in the core's words.
      {R"({"ids": [1, 2], "canonical_end": 3})", "[1]",
       "--record: canonical_end 3 with 2 ids: canonical_end is past the end of ids"},
  };
  for (const Case& c : cases) {
    const std::string message = input_error(inline_options(c.record, c.prompt));
    EXPECT_TRUE(message.starts_with(c.message)) << "record " << c.record << ", prompt " << c.prompt << "\n  got:  "
                                                << message << "\n  want: " << c.message;
  }

  ExplainOptions chunk_zero = inline_options("[1, 2]", "[1, 2]");
  chunk_zero.chunk = 0;
  EXPECT_EQ(input_error(chunk_zero), "--chunk 0: chunk must be at least 1");
  ExplainOptions past = inline_options("[1, 2]", "[1, 2]");
  past.canonical_end = 3;
  EXPECT_EQ(input_error(past), "--canonical-end: canonical_end 3 with 2 ids: canonical_end is past the end of ids");
}
