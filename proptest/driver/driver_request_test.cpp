// Bad requests and settings: each is refused with an error that names the problem, before anything
// is written, so the record and the KV state stay exactly as they were.

#include "support/lanes.hpp"
#include "support/requirement.hpp"

#include <pfx/driver/environment.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/driver/host_kv_state.hpp>
#include <pfx/engines/faulty_engine.hpp>
#include <pfx/engines/host_reference_engine.hpp>
#include <pfx/driver/lane.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <string>

namespace {

using pfx::token;
using pfx::driver::ConfigError;
using pfx::engines::HostReferenceEngine;
using pfx::driver::Lane;
using pfx::driver::RequestError;

/// The error's message, or "" when `call` does not throw E.
template <class E, class Call>
std::string message_of(Call&& call) {
  try {
    call();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

PFX_PROPERTY(Requests, ABadRequestIsRefusedAndChangesNothing, "DRV-3 INV-10", ()) {
  const std::size_t capacity = *rc::gen::inRange<std::size_t>(8, 80);
  HostReferenceEngine engine({.vocab = 16, .width = 4, .hidden = 8, .layers = 2, .chunk = 4, .seed = 3});
  Lane lane(engine, {.capacity = capacity, .config = {.enabled = true, .keep_min = 0}, .poison = true});
  const auto history = *rc::gen::container<std::vector<token>>(capacity / 2, rc::gen::inRange<token>(0, 16));
  if (!history.empty()) (void)lane.serve(history, *rc::gen::inRange<std::size_t>(0, capacity / 2));

  std::vector<token> prompt = *rc::gen::nonEmpty(
      rc::gen::container<std::vector<token>>(rc::gen::inRange<token>(0, 16)));
  std::size_t max_new = *rc::gen::inRange<std::size_t>(0, 4);
  const int badness = *rc::gen::inRange(0, 4);
  std::string expected;
  switch (badness) {
    case 0:
      prompt.clear();
      expected = "the prompt is empty";
      break;
    case 1: {
      const std::size_t at = *rc::gen::inRange<std::size_t>(0, prompt.size());
      prompt[at] = *rc::gen::element<token>(-1, 16, 17, std::numeric_limits<token>::min(),
                                            std::numeric_limits<token>::max());
      expected = "prompt token " + std::to_string(at) + " is " + std::to_string(prompt[at]) +
                 ", outside the vocabulary 0..15";
      break;
    }
    case 2:
      max_new = *rc::gen::element<std::size_t>(capacity - prompt.size() % capacity + 1, capacity + 1,
                                               std::numeric_limits<std::size_t>::max());
      expected = "do not fit the KV state's " + std::to_string(capacity) + " rows";
      break;
    default:
      prompt.resize(capacity + *rc::gen::inRange<std::size_t>(1, 5), 1);
      expected = "do not fit the KV state's " + std::to_string(capacity) + " rows";
      break;
  }
  const pfx::Machine machine = lane.machine();
  const std::vector<float> rows = lane.kv().copy_rows(0, capacity);
  const std::size_t written = lane.written_end();

  const std::string message = message_of<RequestError>([&] { (void)lane.serve(prompt, max_new); });
  RC_ASSERT(message.find(expected) != std::string::npos);
  RC_ASSERT(lane.machine() == machine);
  RC_ASSERT(pfx::test::same_bits(lane.kv().copy_rows(0, capacity), rows));
  RC_ASSERT(lane.written_end() == written);
}

PFX_PROPERTY(Requests, EveryRequestThatFitsIsServed, "DRV-3", ()) {
  // The other side of the checks: a prompt of 1..capacity tokens from the whole vocabulary, and as
  // many new tokens as fit (len(prompt) + max_new_tokens <= capacity), mostly at the limits.
  const std::size_t capacity = *rc::gen::inRange<std::size_t>(1, 40);
  HostReferenceEngine engine({.vocab = 16, .width = 4, .hidden = 8, .layers = 2, .chunk = 4, .seed = 3});
  Lane lane(engine, {.capacity = capacity, .config = {.enabled = true, .keep_min = 0}, .poison = true});
  const std::size_t length = *rc::gen::weightedElement<std::size_t>(
      {{2, capacity}, {1, 1}, {2, *rc::gen::inRange<std::size_t>(1, capacity + 1)}});
  const auto tokens = rc::gen::weightedOneOf<token>(
      {{1, rc::gen::just<token>(0)}, {1, rc::gen::just<token>(15)}, {2, rc::gen::inRange<token>(0, 16)}});
  const std::vector<token> prompt = *rc::gen::container<std::vector<token>>(length, tokens);
  const std::size_t room = capacity - length;
  const std::size_t max_new = *rc::gen::weightedElement<std::size_t>(
      {{2, room}, {1, 0}, {2, *rc::gen::inRange<std::size_t>(0, room + 1)}});
  const pfx::driver::Response response = lane.serve(prompt, max_new);
  RC_ASSERT(response.generated.size() == max_new);
  RC_CLASSIFY(length + max_new == capacity, "fills the state exactly");
}

TEST(Requests, APromptThatFillsTheStateExactlyIsServed) {
  pfx::test::verifies("DRV-3");
  HostReferenceEngine engine({.vocab = 16, .width = 4, .hidden = 8, .layers = 2, .chunk = 4, .seed = 3});
  Lane lane(engine, {.capacity = 12, .config = {.enabled = true, .keep_min = 0}, .poison = true});
  const std::vector<token> prompt(9, 2);
  EXPECT_EQ(lane.serve(prompt, 3).generated.size(), 3U);  // 9 + 3 = 12 rows: fits
  EXPECT_EQ(lane.serve(prompt, 0).generated.size(), 0U);  // prefill only: logits, no tokens
  EXPECT_THROW((void)lane.serve(prompt, 4), RequestError);
  EXPECT_EQ(lane.serve(std::vector<token>(12, 15), 0).prefilled, 12U);  // 12 prompt rows: fits
  EXPECT_THROW((void)lane.serve(std::vector<token>(13, 15), 0), RequestError);
}

TEST(Requests, ALaneOrModelThatCannotWorkIsRefusedAtConstruction) {
  pfx::test::verifies("DRV-3");
  HostReferenceEngine engine({.vocab = 16, .width = 4, .hidden = 8, .layers = 2, .chunk = 4, .seed = 3});
  EXPECT_NE(message_of<ConfigError>([&] { Lane lane(engine, {.capacity = 0}); }).find("capacity"), std::string::npos);
  // The rule's chunk is rule_chunk's alone: a chunk where the lane does not read it is refused, not ignored.
  EXPECT_NE(message_of<ConfigError>([&] { Lane lane(engine, {.config = {.chunk = 4}}); }).find("options.rule_chunk"),
            std::string::npos);
  EXPECT_NE(message_of<ConfigError>([&] { Lane lane(engine, {.rule_chunk = 0}); }).find("rule_chunk must be at least 1"),
            std::string::npos);
  EXPECT_NE(message_of<std::invalid_argument>([] { HostReferenceEngine one_layer({.layers = 1}); }).find("layers = 1"),
            std::string::npos);
  EXPECT_NE(message_of<std::invalid_argument>([] { HostReferenceEngine no_grid({.chunk = 0}); }).find("chunk = 0"),
            std::string::npos);
  EXPECT_THROW(pfx::engines::FaultyEngine(engine, 1.5, 0), std::invalid_argument);
  const auto kv = engine.make_kv_state(4);
  std::vector<float> logits(16);
  const std::vector<token> tokens = {1, 2};
  EXPECT_NE(message_of<std::out_of_range>([&] { engine.prefill(*kv, tokens, 3, logits); }).find("[3, 5)"),
            std::string::npos);
}

// A lane configures its machine with options.config as given, every knob but the chunk, which is the
// rule chunk when one is given and the engine's grid otherwise (THM-1's premise).
PFX_PROPERTY(Requests, TheMachineIsConfiguredWithTheOptionsAndTheRuleChunkOrTheEnginesGrid, "THM-1", ()) {
  const std::size_t chunk = *rc::gen::inRange<std::size_t>(1, 9);
  HostReferenceEngine engine({.vocab = 16, .width = 4, .hidden = 8, .layers = 2, .chunk = chunk, .seed = 3});
  pfx::driver::LaneOptions options{.capacity = 16};
  options.config.enabled = *rc::gen::arbitrary<bool>();
  options.config.keep_min = *rc::gen::inRange<std::size_t>(0, 100);
  if (*rc::gen::arbitrary<bool>()) options.rule_chunk = *rc::gen::inRange<std::size_t>(1, 20);
  const Lane lane(engine, options);
  pfx::Config expected = options.config;
  expected.chunk = options.rule_chunk.value_or(chunk);
  RC_ASSERT(lane.machine().config() == expected);
}

TEST(Requests, AFullWidthCapacityIsRefusedWithAClearErrorNeverWrapped) {
  // capacity x row bytes past 64 bits would wrap to a small allocation that later writes overrun; a
  // product that fits but no memory can hold is refused too. Either way the message names the capacity.
  pfx::test::verifies("DRV-3");
  HostReferenceEngine engine({.vocab = 16, .width = 4, .hidden = 8, .layers = 2, .chunk = 4, .seed = 3});
  constexpr std::size_t top = std::numeric_limits<std::size_t>::max();
  // Row bytes here: 2 layers x {K, V} x 4 floats x 4 bytes = 2^6, so 2^58 rows wrap to 0 bytes and
  // 2^57 rows ask for 2^63 bytes, past any address space.
  for (const std::size_t capacity : {top, top - 1, std::size_t{1} << 58, (std::size_t{1} << 58) + 1,
                                     std::size_t{1} << 57}) {
    const std::string message = message_of<ConfigError>([&] { Lane lane(engine, {.capacity = capacity}); });
    EXPECT_NE(message.find(std::to_string(capacity)), std::string::npos) << capacity << ": " << message;
  }
  EXPECT_NE(message_of<std::length_error>([] { pfx::driver::HostKvState kv({std::size_t{1} << 58, 2, 4}); })
                .find("does not fit 64 bits"),
            std::string::npos);
  EXPECT_NE(message_of<std::length_error>([] { pfx::driver::HostKvState kv({top, 1, 1}); }).find("HostKvState"),
            std::string::npos);
}

// DRV-5: the original class's variables, its meanings and defaults, the conventional spellings, and
// no silent misreading (docs/python.md, "The environment").
TEST(Environment, UnsetVariablesGiveTheSeedsDefaults) {
  pfx::test::verifies("DRV-5 AUDIT-259");
  const pfx::Config config = pfx::driver::apply_environment({}, std::nullopt, std::nullopt);
  EXPECT_TRUE(config.enabled);
  EXPECT_EQ(config.keep_min, 64U);
}

TEST(Environment, EveryConventionalSpellingOfTheFlagIsRead) {
  pfx::test::verifies("DRV-5");
  using pfx::driver::apply_environment;
  for (const char* on : {"1", "true", "on", "yes", "TRUE", "On", "yEs", " 1\n", "\ttrue ", "", "  "}) {
    EXPECT_TRUE(apply_environment({.enabled = false}, on, std::nullopt).enabled) << '"' << on << '"';
  }
  for (const char* off : {"0", "false", "off", "no", "FALSE", "Off", "NO", " 0", "0\r\n", "\x1c no\x0b"}) {
    EXPECT_FALSE(apply_environment({}, off, std::nullopt).enabled) << '"' << off << '"';
  }
  const pfx::Config base{.enabled = true, .keep_min = 5, .chunk = 16};
  EXPECT_EQ(apply_environment(base, "off", std::nullopt).chunk, 16U);  // the variables set no chunk
  EXPECT_EQ(apply_environment(base, "off", std::nullopt).keep_min, 5U);
}

TEST(Environment, TheCountIsReadAsPythonsIntReadsIt) {
  pfx::test::verifies("DRV-5");
  using pfx::driver::apply_environment;
  const std::pair<const char*, std::size_t> cases[] = {
      {"0", 0}, {" 128 ", 128}, {"+8", 8}, {" 8 ", 8}, {"1_000", 1000}, {"007", 7}, {"-0", 0}, {"+0_0", 0},
      {"4294967295", 4294967295U}, {"4294967296", std::size_t{1} << 32}, {"4_294_967_297", (std::size_t{1} << 32) + 1},
      {"18446744073709551615", std::numeric_limits<std::size_t>::max()}};
  for (const auto& [text, value] : cases) {
    EXPECT_EQ(apply_environment({}, std::nullopt, text).keep_min, value) << '"' << text << '"';
  }
}

PFX_PROPERTY(Environment, EveryCountReadsBackAsItself, "DRV-5", (std::size_t keep_min)) {
  RC_ASSERT(pfx::driver::apply_environment({}, std::nullopt, std::to_string(keep_min)).keep_min == keep_min);
  RC_ASSERT(pfx::driver::apply_environment({}, std::nullopt, "+" + std::to_string(keep_min)).keep_min == keep_min);
}

TEST(Environment, AMalformedValueIsAnErrorThatNamesTheVariable) {
  pfx::test::verifies("DRV-5");
  using pfx::driver::apply_environment;
  for (const char* value : {"2", "-1", "0x1", "y", "enable", "truee", "o n", "1 0"}) {
    const std::string message = message_of<ConfigError>([&] { (void)apply_environment({}, value, std::nullopt); });
    EXPECT_NE(message.find("TF_GLM53_PREFIX_CACHE=\"" + std::string(value) + "\" is malformed"), std::string::npos)
        << "value \"" << value << "\": " << message;
  }
  for (const char* value : {"", " ", "abc", "-5", "- 5", "+", "12abc", "6__4", "_64", "64_", "1e3", "0x10", "6.0",
                            "99999999999999999999999", "18446744073709551616", "-99999999999999999999999"}) {
    const std::string message = message_of<ConfigError>([&] { (void)apply_environment({}, std::nullopt, value); });
    EXPECT_NE(message.find("TF_GLM53_PREFIX_CACHE_MIN=\"" + std::string(value) + "\" is malformed"),
              std::string::npos)
        << "value \"" << value << "\": " << message;
  }
  EXPECT_NE(message_of<ConfigError>([&] { (void)apply_environment({}, std::nullopt, "-5"); }).find("negative"),
            std::string::npos);
}

TEST(Environment, TheProcessEnvironmentIsRead) {
  pfx::test::verifies("DRV-5");
  ASSERT_EQ(setenv("TF_GLM53_PREFIX_CACHE", "off", 1), 0);
  ASSERT_EQ(setenv("TF_GLM53_PREFIX_CACHE_MIN", "7", 1), 0);
  const pfx::Config config = pfx::driver::config_from_environment();
  EXPECT_FALSE(config.enabled);
  EXPECT_EQ(config.keep_min, 7U);
  EXPECT_EQ(pfx::driver::config_from_environment({.keep_min = 3, .chunk = 5}).chunk, 5U);  // the variables set no chunk
  ASSERT_EQ(setenv("TF_GLM53_PREFIX_CACHE_MIN", "seven", 1), 0);
  EXPECT_THROW((void)pfx::driver::config_from_environment(), ConfigError);
  unsetenv("TF_GLM53_PREFIX_CACHE");
  unsetenv("TF_GLM53_PREFIX_CACHE_MIN");
  EXPECT_TRUE(pfx::driver::config_from_environment().enabled);
}

}  // namespace
