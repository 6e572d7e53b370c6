// llama-server's decisions under --pfx (integrations/llama_server/pfx_server.cpp), without llama.cpp:
// which arguments are pfx's and which llama.cpp's, when ggml's batch-invariant paths are turned on,
// which KV layout --parallel auto gets, what the start refuses by name, which chunk and prefill step
// the rule takes, and what a slot's record offers. The same file llama-server links (scripts/llama.sh);
// the suites through the real binary (test_llama_server*.py) see these decisions served, this one sees
// each decision alone, in seconds, and is what the mutation check runs for that file.

#include "support/requirement.hpp"

#include "pfx_server.h"

#include <pfx/llama/certificate.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>
#include <openssl/evp.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <system_error>
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

// ---------------------------------------------------------------- --pfx-certificate (certified decode rows)

// A report as `pfx conform --engine llama --certify` writes it, with `decode` as its decode rows
// finding: every field the certificate derives its facts from.
std::string report_json(const std::string& decode, bool independent = true) {
  return std::string(R"({"type":"conform","verdict":"safe","grids":[{"grid":1,"resumes":128,"exact":true},)") +
         R"({"grid":2,"resumes":0,"exact":false}],"batching":{"batches":4,"independent":)" +
         (independent ? "true" : "false") + R"(},"decode_rows":)" + decode + "}";
}

const std::string kProved =
    R"({"resumes":200,"reusable":true,"rescored":100,"rescoring_differs":0,"kv_blocks":200,"kv_blocks_differ":0})";

// The served facts of a server on the batch-invariant path over the model file `model`.
server_facts certified_facts(const std::string& model) {
  server_facts facts = defaults();
  facts.ggml_version = "0.25.3";
  facts.ggml_commit = "unknown";
  facts.model_path = model;
  facts.flash_attention = "auto";
  facts.kv_type = "f16";
  facts.threads = 2;
  facts.batch_threads = 2;
  return facts;
}

// This program's own temporary folder, removed when it ends.
class Scratch {
 public:
  Scratch() : path_(std::filesystem::temp_directory_path() / ("pfx_llama_server_decisions_" + std::to_string(::getpid()))) {}
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Scratch(Scratch&&) = delete;
  Scratch& operator=(Scratch&&) = delete;
  ~Scratch() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

const std::filesystem::path& scratch() {
  static const Scratch folder;
  return folder.path();
}

// A file holding `text`, `name` in the folder `folder` of scratch(); its path.
std::string write_file(const std::string& name, const std::string& text, const std::string& folder = "a") {
  const std::filesystem::path dir = scratch() / folder;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name) << text;
  return (dir / name).string();
}

// The certificate of the configuration `facts` serve (on the batch-invariant path), from `report`.
std::string certificate_for(const server_facts& facts, const std::string& report, bool reference_paths = true) {
  return pfx::llama::certificate(pfx_server::configuration_served(facts, reference_paths), report);
}

// A certificate conform wrote on the very configuration served turns decode rows exact on, and the
// start line says so; the option needs --pfx and a file.
TEST(LlamaServerCertificate, OneOfTheConfigurationServedMakesDecodeRowsExact) {
  pfx::test::verifies("LLAMA-6 INV-2");
  const server_facts facts = certified_facts(write_file("model.gguf", "weights"));
  const std::string path = write_file("certificate.json", certificate_for(facts, report_json(kProved)));
  ASSERT_EQ(configured({"--pfx"}, facts), "");
  EXPECT_FALSE(pfx_server::current().decode_rows_exact);
  ASSERT_EQ(configured({"--pfx", "--pfx-certificate", path}, facts), "");
  EXPECT_TRUE(pfx_server::current().decode_rows_exact);
  EXPECT_NE(pfx_server::describe().find("decode rows exact (the certificate " + path + ")"), std::string::npos)
      << pfx_server::describe();
  ASSERT_EQ(configured({"--pfx", "--pfx-certificate=" + path}, facts), "");
  EXPECT_TRUE(pfx_server::current().decode_rows_exact);

  // On ggml's own paths (--pfx-alone), a certificate of them: the start line keeps what it says of them.
  server_facts alone = facts;
  alone.flash_attention_off = true;
  alone.flash_attention = "off";
  alone.n_batch = 64;
  alone.n_ubatch = 16;
  const std::string own = write_file("own.json", certificate_for(alone, report_json(kProved), false));
  ASSERT_EQ(configured({"--pfx", "--pfx-alone", "--pfx-certificate", own}, alone), "");
  EXPECT_TRUE(pfx_server::current().decode_rows_exact);
  EXPECT_NE(pfx_server::describe().find("(--pfx-alone: flash attention off, n_batch 64, n_ubatch 16, decode rows exact "
                                        "(the certificate " + own + "))"),
            std::string::npos)
      << pfx_server::describe();

  start_fresh();
  EXPECT_EQ(take({"--pfx-certificate", path}).error,
            "llama-server: --pfx-certificate is a setting of pfx's rule, which is off: add --pfx");
  start_fresh();
  EXPECT_EQ(take({"--pfx", "--pfx-certificate"}).error, "llama-server: --pfx-certificate: expected a file, got nothing");
  start_fresh();
  EXPECT_EQ(take({"--pfx", "--pfx-certificate", path, "--pfx-certificate"}).error,
            "llama-server: --pfx-certificate: expected a file, got nothing");
  start_fresh();
  EXPECT_EQ(take({"--pfx", "--pfx-certificate="}).error, "llama-server: --pfx-certificate: expected a file, got nothing");
}

// A certificate that does not cover what is served stops the start, naming why: another configuration
// (each field with both values: the ubatch, the model's bytes, the CPU paths), one changed after conform
// wrote it, a fact edited by hand and sealed again, evidence that does not prove decode rows exact, a
// chunk it proves no resume on, and no certificate at all. Nothing is turned on.
TEST(LlamaServerCertificate, OneThatDoesNotCoverWhatIsServedStopsTheStartNamingWhy) {
  pfx::test::verifies("LLAMA-6");
  const std::string model = write_file("model.gguf", "weights");
  const server_facts facts = certified_facts(model);
  const std::string text = certificate_for(facts, report_json(kProved));
  const std::string path = write_file("certificate.json", text);
  const auto refused = [&](const std::vector<std::string>& arguments, const server_facts& served, const std::string& why) {
    const std::string error = configured(arguments, served);
    EXPECT_NE(error.find(why), std::string::npos) << error;
    EXPECT_EQ(error.rfind("llama-server --pfx --pfx-certificate ", 0), 0U) << error;
    EXPECT_FALSE(pfx_server::current().decode_rows_exact);
  };
  server_facts other = facts;
  other.n_ubatch = 256;
  refused({"--pfx", "--pfx-certificate", path}, other,
          "certifies another configuration than the one served: n_ubatch \"512\" certified, \"256\" served");
  other = facts;
  other.model_path = write_file("other.gguf", "other weights");
  refused({"--pfx", "--pfx-certificate", path}, other, "model \"model.gguf\" certified, \"other.gguf\" served");
  other.model_path = write_file("model.gguf", "weights, changed", "b");  // another model of the same name
  refused({"--pfx", "--pfx-certificate", path}, other, "served: model sha256 \"");
  refused({"--pfx", "--pfx-alone", "--pfx-certificate", path}, facts,
          "CPU paths \"reference (GGML_CPU_USE_REF)\" certified, \"ggml's own\" served");
  other = facts;
  other.kv_type = "K q8_0, V f16";
  refused({"--pfx", "--pfx-certificate", path}, other, "KV type \"f16\" certified, \"K q8_0, V f16\" served");

  std::string edited = text;
  edited.replace(edited.find("\"n_ubatch\": \"512\""), 17, "\"n_ubatch\": \"256\"");
  refused({"--pfx", "--pfx-certificate", write_file("edited.json", edited)}, facts,
          "was changed after pfx conform wrote it (its digest does not match what it says)");
  // A fact edited and the digest sealed again: what it proves is derived from its report.
  nlohmann::json forged = nlohmann::json::parse(certificate_for(facts, report_json(R"({"resumes":12})")));
  forged["proved"]["decode rows equal"] = true;
  forged.erase("digest");
  forged["digest"] = [&] {  // sealed as conform seals: SHA-256 of the rest
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int length = 0;
    const std::string body = forged.dump();
    EVP_Digest(body.data(), body.size(), digest.data(), &length, EVP_sha256(), nullptr);
    std::string hex;
    static constexpr std::string_view digits = "0123456789abcdef";
    for (unsigned int i = 0; i < length; ++i) {
      hex += digits[digest[i] >> 4U];
      hex += digits[digest[i] & 15U];
    }
    return hex;
  }();
  refused({"--pfx", "--pfx-certificate", write_file("forged.json", forged.dump())}, facts,
          "which its own report does not show: certify the configuration again");

  refused({"--pfx", "--pfx-certificate",
           write_file("unproved.json", certificate_for(facts, report_json(
               R"({"resumes":200,"rescored":100,"rescoring_differs":3,"kv_blocks":200,"kv_blocks_differ":1})", false)))},
          facts,
          "it does not prove decode rows exact for this configuration (3 decode steps differed from a cold prefill's "
          "rescoring; 1 rows decode wrote differed from a cold prefill's, byte for byte; no batch of requests answered "
          "as each request alone): serve without --pfx-certificate");
  refused({"--pfx", "--pfx-chunk", "2", "--pfx-certificate", path}, facts,
          "it proves no resume on the rule's chunk 2 exact");
  refused({"--pfx", "--pfx-certificate", write_file("not.json", "{\"format\": \"something else\"}")}, facts,
          "is not a certificate pfx conform --engine llama --certify wrote");
  refused({"--pfx", "--pfx-certificate", "/nonexistent/certificate.json"}, facts,
          "/nonexistent/certificate.json: cannot read a certificate there");
}

// With decode rows exact, a slot's record holds the rows decode wrote: the prompt's write goes on through
// decode and is published when the slot is released, the generated tokens' rows with it, so the next
// turn is offered every row the slot holds and shares with it (but its last token). Without a
// certificate the rows decode wrote are never offered (INV-2). A write whose prefill never ended, or
// whose slot holds other tokens, publishes nothing past its offset.
PFX_PROPERTY(LlamaServerRecord, WithDecodeRowsExactTheRowsDecodeWroteAreOfferedAfterRelease, "LLAMA-6 INV-2", ()) {
  static const server_facts facts = certified_facts(write_file("model.gguf", "weights"));
  static const std::string path = write_file("certificate.json", certificate_for(facts, report_json(kProved)));
  const bool certified = *rc::gen::arbitrary<bool>();
  RC_ASSERT(configured(certified ? std::vector<std::string>{"--pfx", "--pfx-certificate", path}
                                 : std::vector<std::string>{"--pfx"},
                       facts) == "");
  const auto gen_tokens = rc::gen::resize(30, rc::gen::nonEmpty(rc::gen::container<std::vector<int32_t>>(rc::gen::inRange<int32_t>(0, 4))));
  const auto prompt = *gen_tokens;
  const auto generated = *gen_tokens;
  const auto next = *gen_tokens;
  std::vector<int32_t> held = prompt;  // the slot's tokens after decode: the prompt and what it generated
  held.insert(held.end(), generated.begin(), generated.end());
  std::vector<int32_t> turn = held;  // the next turn: all of it, and more
  turn.insert(turn.end(), next.begin(), next.end());

  pfx_server::record slot;
  std::string why;
  RC_ASSERT(slot.begin({}, prompt, why) == 0U);
  slot.commit();  // the prompt's last call decoded
  slot.finish(held);  // released after decode
  RC_ASSERT(slot.offer(held, turn) == (certified ? held.size() : prompt.size()));
  // Rows the slot no longer holds are not offered, decode's or a prefill's.
  const auto kept = *rc::gen::inRange<std::size_t>(0, held.size() + 1);
  const std::vector<int32_t> part(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(kept));
  RC_ASSERT(slot.offer(part, turn) == std::min(kept, certified ? held.size() : prompt.size()));

  // Released before its prefill ended (the slot holds part of the prompt): nothing past its offset.
  pfx_server::record cut;
  RC_ASSERT(cut.begin({}, prompt, why) == 0U);
  const std::vector<int32_t> partial(prompt.begin(), prompt.end() - 1);
  cut.finish(partial);
  RC_ASSERT(cut.offer(held, turn) == 0U);
}
