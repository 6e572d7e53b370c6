// llama-server's decisions under --pfx (integrations/llama_server/pfx_server.cpp), without llama.cpp:
// which arguments are pfx's and which llama.cpp's, when ggml's batch-invariant paths are turned on,
// which KV layout --parallel auto gets, what the start refuses by name, which chunk and prefill step
// the rule takes, and what a slot's record offers. The same file llama-server links (scripts/llama.sh);
// the suites through the real binary (test_llama_server*.py) see these decisions served, this one sees
// each decision alone, in seconds, and is what the mutation check runs for that file.

#include "support/requirement.hpp"

#include "pfx_server.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace {

using pfx_server::server_facts;

// A fresh start: the settings llama-server begins with, and none of the variables pfx reads or sets.
void start_fresh() {
  pfx_server::current() = pfx_server::settings{};
  ::unsetenv("GGML_CPU_USE_REF");
  ::unsetenv("LLAMA_ARG_KV_UNIFIED");
}

struct Taken {
  std::string error;
  std::vector<std::string> kept;  // what llama.cpp's parser sees, the program's name first
};

// take_arguments over `arguments` (after the program's name), as main() calls it.
Taken take(const std::vector<std::string>& arguments) {
  std::vector<std::string> words{"llama-server"};
  words.insert(words.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  argv.reserve(words.size() + 1);
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);  // take_arguments ends the shrunk list with nullptr, as main's argv is
  int argc = static_cast<int>(words.size());
  Taken taken{pfx_server::take_arguments(argc, argv.data()), {}};
  for (int i = 0; i < argc; ++i) taken.kept.emplace_back(argv[static_cast<std::size_t>(i)]);
  EXPECT_EQ(argv[static_cast<std::size_t>(argc)], nullptr);
  return taken;
}

bool use_ref_set() {
  const char* value = std::getenv("GGML_CPU_USE_REF");
  return value != nullptr && std::string(value) != "0";
}

// llama-server's defaults (--parallel auto: 4 slots) on a plain dense model.
server_facts defaults() {
  server_facts facts;
  facts.n_batch = 2048;
  facts.n_ubatch = 512;
  facts.n_parallel = 4;
  facts.n_ctx_slot = 1024;
  return facts;
}

std::string configured(const std::vector<std::string>& arguments, const server_facts& facts) {
  start_fresh();
  const Taken taken = take(arguments);
  EXPECT_EQ(taken.error, "");
  return pfx_server::configure(facts);
}

PFX_PROPERTY(LlamaServerArguments, PfxsOwnAreTakenOutAndLlamaCppsKeptInTheirOrder, "LLAMA-5", ()) {
  start_fresh();
  const auto theirs = *rc::gen::container<std::vector<std::string>>(
      rc::gen::element<std::string>("--model", "m.gguf", "-np", "4", "--port", "8080", "-fa", "off", "--ctx-size"));
  const auto chunk = *rc::gen::inRange<std::size_t>(1, 1 << 20);
  const auto keep_min = *rc::gen::inRange<std::size_t>(0, 1 << 20);
  const bool alone = *rc::gen::arbitrary<bool>();
  std::vector<std::string> ours{"--pfx", "--pfx-chunk", std::to_string(chunk), "--pfx-keep-min=" + std::to_string(keep_min)};
  if (alone) ours.emplace_back("--pfx-alone");
  // pfx's options, whole, each at some place among llama.cpp's
  std::vector<std::string> arguments = theirs;
  for (std::size_t i = 0, at = 0; i < ours.size(); ++i) {
    at = *rc::gen::inRange<std::size_t>(at, arguments.size() + 1);
    const bool pair = ours[i] == "--pfx-chunk";
    arguments.insert(arguments.begin() + static_cast<std::ptrdiff_t>(at), ours[i]);
    if (pair) arguments.insert(arguments.begin() + static_cast<std::ptrdiff_t>(at + 1), ours[++i]);
    at += pair ? 2 : 1;
  }
  const Taken taken = take(arguments);
  RC_ASSERT(taken.error == "");
  std::vector<std::string> expected{"llama-server"};
  expected.insert(expected.end(), theirs.begin(), theirs.end());
  RC_ASSERT(taken.kept == expected);
  const pfx_server::settings& s = pfx_server::current();
  RC_ASSERT(s.enabled);
  RC_ASSERT(s.alone == alone);
  RC_ASSERT(s.chunk == chunk);
  RC_ASSERT(s.keep_min == keep_min);
  // ggml's reference paths exactly on the batch-invariant path, set before any backend starts
  RC_ASSERT(use_ref_set() == !alone);
}

TEST(LlamaServerArguments, WithoutPfxNothingIsTurnedOnAndItsSettingsAreRefusedByName) {
  pfx::test::verifies("LLAMA-5");
  start_fresh();
  EXPECT_EQ(take({"--model", "m.gguf"}).error, "");
  EXPECT_FALSE(pfx_server::current().enabled);
  EXPECT_FALSE(use_ref_set());  // stock llama-server computes as llama.cpp does
  EXPECT_TRUE(pfx_server::auto_kv_unified());  // and keeps its default: one KV cache for --parallel auto
  for (const char* setting : {"--pfx-chunk", "--pfx-keep-min", "--pfx-alone"}) {
    start_fresh();
    std::vector<std::string> arguments{setting};
    if (std::string(setting) != "--pfx-alone") arguments.emplace_back("4");
    EXPECT_EQ(take(arguments).error, std::string("llama-server: ") + setting + " is a setting of pfx's rule, which is off: add --pfx");
  }
}

TEST(LlamaServerArguments, ABadCountIsRefusedNamingTheOptionAndWhatItGot) {
  pfx::test::verifies("LLAMA-5");
  for (const auto& [arguments, expected] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--pfx", "--pfx-chunk", "0"}, "--pfx-chunk: expected an integer >= 1, got '0'"},
           {{"--pfx", "--pfx-chunk=x"}, "--pfx-chunk: expected an integer >= 1, got 'x'"},
           {{"--pfx", "--pfx-chunk", "18446744073709551616"}, "got '18446744073709551616'"},  // 2^64
           {{"--pfx", "--pfx-keep-min=-1"}, "--pfx-keep-min: expected an integer >= 0, got '-1'"},
           {{"--pfx", "--pfx-keep-min"}, "--pfx-keep-min: expected an integer >= 0, got nothing"}}) {
    start_fresh();
    EXPECT_NE(take(arguments).error.find(expected), std::string::npos) << take(arguments).error;
  }
  start_fresh();
  EXPECT_EQ(take({"--pfx", "--pfx-chunk", "18446744073709551615"}).error, "");  // 2^64-1 is a count
  EXPECT_EQ(pfx_server::current().chunk, 18446744073709551615U);
}

// --parallel auto gives one KV cache unless pfx's batch-invariant path is on; a unified cache asked
// for, by flag or by llama.cpp's variable (the command line over it, as llama.cpp reads them), is
// asked for.
PFX_PROPERTY(LlamaServerKvLayout, AutoGivesAStreamPerSlotOnTheBatchInvariantPathUnlessAUnifiedCacheIsAskedFor,
             "LLAMA-5", ()) {
  start_fresh();
  const auto variable = *rc::gen::maybe(rc::gen::element<std::string>("1", "true", "on", "enabled", "0", "false", "off", "disabled"));
  const auto flags = *rc::gen::container<std::vector<std::string>>(
      rc::gen::element<std::string>("-kvu", "--kv-unified", "-no-kvu", "--no-kv-unified"));
  const bool pfx = *rc::gen::arbitrary<bool>();
  const bool alone = pfx && *rc::gen::arbitrary<bool>();
  if (variable) ::setenv("LLAMA_ARG_KV_UNIFIED", (*variable).c_str(), 1);
  std::vector<std::string> arguments = flags;
  if (pfx) arguments.emplace_back("--pfx");
  if (alone) arguments.emplace_back("--pfx-alone");
  RC_ASSERT(take(arguments).error == "");
  bool asked = variable && (*variable == "1" || *variable == "true" || *variable == "on" || *variable == "enabled");
  if (!flags.empty()) asked = flags.back() == "-kvu" || flags.back() == "--kv-unified";
  RC_ASSERT(pfx_server::auto_kv_unified() == (!pfx || alone || asked));
  ::unsetenv("LLAMA_ARG_KV_UNIFIED");
}

TEST(LlamaServerStart, OnTheBatchInvariantPathAResumeAtAnyOffsetIsTakenAndAUnifiedCacheOfSlotsRefused) {
  pfx::test::verifies("LLAMA-5");
  server_facts facts = defaults();
  EXPECT_EQ(configured({"--pfx"}, facts), "");
  EXPECT_EQ(pfx_server::current().chunk, 1U);  // no grid, no step: every row is computed alone
  EXPECT_EQ(pfx_server::current().prefill_step, 0U);
  EXPECT_NE(pfx_server::describe().find("4 slots, each answer the same as its request served alone"), std::string::npos);
  EXPECT_EQ(configured({"--pfx", "--pfx-chunk", "64"}, facts), "");
  EXPECT_EQ(pfx_server::current().chunk, 64U);  // a chunk asked for is kept

  facts.kv_unified = true;
  const std::string refused = configured({"--pfx"}, facts);
  EXPECT_NE(refused.find("llama-server --pfx: --kv-unified with 4 slots"), std::string::npos) << refused;
  EXPECT_NE(refused.find("LLAMA_ARG_KV_UNIFIED"), std::string::npos) << refused;
  EXPECT_NE(refused.find("add --pfx-alone"), std::string::npos) << refused;
  facts.n_parallel = 1;  // one slot: one cache holds one slot's rows, in order
  EXPECT_EQ(configured({"--pfx"}, facts), "");
  facts.n_parallel = 4;  // --pfx-alone vouches for a request served alone, and says so
  EXPECT_EQ(configured({"--pfx", "--pfx-alone"}, facts), "");
  EXPECT_NE(pfx_server::describe().find("pfx vouches for a request served alone"), std::string::npos);
}

// With --pfx-alone, the grid and step of LLAMA-1: flash attention off and n_batch a multiple of n_ubatch
// give chunk 1 and the prefill step n_ubatch; otherwise the grid (n_ubatch when it divides n_batch,
// n_batch when not), no step; a chunk asked for must be a multiple of the grid.
PFX_PROPERTY(LlamaServerStart, AloneTheChunkAndStepFollowTheGridOfTheContext, "LLAMA-1 LLAMA-5", ()) {
  server_facts facts = defaults();
  facts.n_ubatch = *rc::gen::inRange<std::size_t>(1, 4097);
  facts.n_batch = *rc::gen::oneOf(rc::gen::just(facts.n_ubatch * *rc::gen::inRange<std::size_t>(1, 9)),
                                  rc::gen::inRange<std::size_t>(1, 1 << 16));
  facts.flash_attention_off = *rc::gen::arbitrary<bool>();
  const std::size_t grid = facts.n_batch % facts.n_ubatch == 0 ? facts.n_ubatch : facts.n_batch;
  RC_ASSERT(configured({"--pfx", "--pfx-alone"}, facts) == "");
  const bool step = facts.flash_attention_off && facts.n_batch % facts.n_ubatch == 0;
  RC_ASSERT(pfx_server::current().chunk == (step ? 1 : grid));
  RC_ASSERT(pfx_server::current().prefill_step == (step ? facts.n_ubatch : 0));
  const std::size_t chunk = *rc::gen::inRange<std::size_t>(1, 1 << 16);
  const std::string error = configured({"--pfx", "--pfx-alone", "--pfx-chunk", std::to_string(chunk)}, facts);
  if (chunk % grid == 0) {
    RC_ASSERT(error == "");
    RC_ASSERT(pfx_server::current().chunk == chunk);
    RC_ASSERT(pfx_server::current().prefill_step == 0U);
  } else {
    RC_ASSERT(error.find("--pfx-chunk " + std::to_string(chunk) + " is not a multiple of the grid " + std::to_string(grid)) !=
              std::string::npos);
  }
}

TEST(LlamaServerStart, WhatTheRuleCannotVouchForStopsTheStartByName) {
  pfx::test::verifies("LLAMA-5");
  const auto refused = [](auto edit, const std::string& expected) {
    server_facts facts = defaults();
    edit(facts);
    for (const std::vector<std::string>& arguments : {std::vector<std::string>{"--pfx"}, {"--pfx", "--pfx-alone"}}) {
      const std::string error = configured(arguments, facts);
      EXPECT_NE(error.find("llama-server --pfx: " + expected), std::string::npos) << error;
    }
    start_fresh();  // and without --pfx the server is stock: nothing is refused
    EXPECT_EQ(pfx_server::configure(facts), "");
  };
  refused([](server_facts& f) { f.has_model = false; }, "the router mode");
  refused([](server_facts& f) { f.cache_reuse = 256; }, "--cache-reuse 256");
  refused([](server_facts& f) { f.speculative = true; }, "speculative decoding");
  refused([](server_facts& f) { f.n_swa = 128; }, "the model uses sliding-window attention (n_swa 128)");
  refused([](server_facts& f) { f.recurrent_or_hybrid = true; }, "the model is recurrent or hybrid");
  refused([](server_facts& f) { f.multimodal = true; }, "--mmproj");
  refused([](server_facts& f) { f.lora = true; }, "--lora");
  refused([](server_facts& f) { f.gpu_layers = -1; }, "every layer offloaded to a GPU");
  refused([](server_facts& f) { f.gpu_layers = 5; }, "5 layers offloaded to a GPU");
  refused([](server_facts& f) { f.n_ubatch = 0; }, "n_batch and n_ubatch must be at least 1");
}

// A slot's record on the batch-invariant path (chunk 1, no step): after a prefill of `first` is
// committed, the rule offers any prompt the tokens it shares with what the slot holds, but its last;
// an aborted write keeps only the rows below its offset; rows forgotten are not offered; a cold prefill
// is offered like any; the rule off offers nothing.
PFX_PROPERTY(LlamaServerRecord, OffersTheSharedPrefixOfWhatTheSlotHoldsButTheLastToken, "LLAMA-5", ()) {
  RC_ASSERT(configured({"--pfx"}, defaults()) == "");
  const auto gen_prompt = rc::gen::resize(40, rc::gen::nonEmpty(rc::gen::container<std::vector<int32_t>>(rc::gen::inRange<int32_t>(0, 3))));
  const auto first = *gen_prompt;
  const auto second = *gen_prompt;
  const auto shared = [](const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    return static_cast<std::size_t>(std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(std::min(a.size(), b.size())), b.begin()).first - a.begin());
  };
  const auto granted = [&](const std::vector<int32_t>& held, const std::vector<int32_t>& prompt) {
    return std::min(shared(held, prompt), prompt.size() - 1);
  };
  pfx_server::record slot;
  RC_ASSERT(slot.offer({}, first) == 0U);
  std::string why;
  const bool cold = *rc::gen::arbitrary<bool>();
  if (cold) {
    slot.begin_cold({}, first);
  } else {
    RC_ASSERT(slot.begin({}, first, why) == 0U);
    RC_ASSERT(why.find("prompt of " + std::to_string(first.size()) + " tokens") != std::string::npos);
  }
  slot.commit();
  RC_ASSERT(slot.offer(first, second) == granted(first, second));

  pfx_server::record copy = slot;  // the record travels with the slot's prompt into the cache and back
  RC_ASSERT(copy.offer(first, second) == granted(first, second));

  // The slot's rows beyond what it now holds are gone: only the prefix it still holds is offered.
  const auto kept = *rc::gen::inRange<std::size_t>(0, first.size() + 1);
  const std::vector<int32_t> held(first.begin(), first.begin() + static_cast<std::ptrdiff_t>(kept));
  RC_ASSERT(slot.offer(held, second) == granted(held, second));

  // A write aborted (its prompt shared a batch) leaves only the rows below its offset, also when its
  // prefill's last call is decoded after; so does one never committed.
  pfx_server::record writing = copy;
  const std::size_t offset = writing.begin(first, second, why);
  RC_ASSERT(offset == granted(first, second));
  if (*rc::gen::arbitrary<bool>()) {
    writing.abort();
    writing.commit();
  }
  RC_ASSERT(writing.offer(second, second) == std::min(offset, second.size() - 1));
  RC_ASSERT(writing.offer(second, first) == std::min(shared(second, first), std::min(offset, first.size() - 1)));

  // Rows about to be rewritten otherwise than by a prefill are not offered again.
  const auto row = *rc::gen::inRange<std::size_t>(0, first.size() + 1);
  copy.forget_from(row);
  RC_ASSERT(copy.offer(first, first) == std::min(row, first.size() - 1));
  copy.clear();
  RC_ASSERT(copy.offer(first, first) == 0U);

  pfx_server::current().enabled = false;
  RC_ASSERT(slot.offer(first, second) == 0U);
}

// Under the prefill step (--pfx-alone, flash attention off, n_batch a multiple of n_ubatch) a committed
// prefill claims its rows but a last one that a one-row ubatch computed alone (INV-12): a longer prompt
// computes that row in a longer ubatch, so no later prompt is offered it.
PFX_PROPERTY(LlamaServerRecord, UnderThePrefillStepNoLastRowAOneRowUbatchComputedIsOffered, "LLAMA-5", ()) {
  server_facts facts = defaults();
  facts.flash_attention_off = true;
  facts.n_ubatch = *rc::gen::inRange<std::size_t>(2, 9);
  facts.n_batch = facts.n_ubatch * *rc::gen::inRange<std::size_t>(1, 5);
  RC_ASSERT(configured({"--pfx", "--pfx-alone"}, facts) == "");
  RC_ASSERT(pfx_server::current().prefill_step == facts.n_ubatch);
  const auto gen_tokens = [](std::size_t n) { return rc::gen::container<std::vector<int32_t>>(n, rc::gen::inRange<int32_t>(0, 3)); };
  const std::vector<int32_t> prompt = *gen_tokens(*rc::gen::inRange<std::size_t>(1, 4 * facts.n_ubatch + 2));
  std::vector<int32_t> longer = prompt;
  const std::vector<int32_t> tail = *gen_tokens(*rc::gen::inRange<std::size_t>(1, 2 * facts.n_ubatch + 1));
  longer.insert(longer.end(), tail.begin(), tail.end());
  const bool last_row_alone = (prompt.size() - 1) % facts.n_ubatch == 0;
  pfx_server::record slot;
  slot.begin_cold({}, prompt);
  slot.commit();
  RC_ASSERT(slot.offer(prompt, longer) <= (last_row_alone ? prompt.size() - 1 : prompt.size()));
}

}  // namespace
