// pfx's rule inside llama-server: the decisions, through pfx's core (pfx_server.h says what each
// call promises; README.md how the server calls them).

#include "pfx_server.h"

#include <pfx/core.hpp>
#include <pfx/llama/certificate.hpp>
#include <pfx/llama/policy.hpp>
#include <pfx/llama/record.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <variant>

namespace pfx_server {

settings & current() {
    static settings the_settings;
    return the_settings;
}

namespace {

// The text of `--name TEXT` or `--name=TEXT` at argv[i] into `text`, and how many entries it took; false
// where nothing follows the name.
bool option_text(int argc, char ** argv, int i, std::string_view name, std::string_view & text, int & used) {
    const std::string_view word = argv[i];
    if (word.size() > name.size() && word[name.size()] == '=') {
        text = word.substr(name.size() + 1);
        used = 1;
    } else if (i + 1 < argc) {
        text = argv[i + 1];
        used = 2;
    } else {
        return false;
    }
    return true;
}

// The value of `--name N` or `--name=N` at argv[i], or an error; `used` is how many entries it took.
std::string count_argument(int argc, char ** argv, int i, std::string_view name, std::size_t least,
                           std::size_t & value, int & used) {
    std::string_view text;
    if (!option_text(argc, argv, i, name, text, used)) {
        return "llama-server: " + std::string(name) + ": expected an integer >= " + std::to_string(least) +
               ", got nothing";
    }
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size() || value < least) {
        return "llama-server: " + std::string(name) + ": expected an integer >= " + std::to_string(least) +
               ", got '" + std::string(text) + "'";
    }
    return "";
}

// The value of `--name FILE` or `--name=FILE` at argv[i], or an error; `used` is how many entries it took.
std::string text_argument(int argc, char ** argv, int i, std::string_view name, std::string & value, int & used) {
    std::string_view text;
    if (!option_text(argc, argv, i, name, text, used) || text.empty()) {
        return "llama-server: " + std::string(name) + ": expected a file, got nothing";
    }
    value = std::string(text);
    return "";
}

bool is_option(std::string_view word, std::string_view name) {
    return word == name || (word.size() > name.size() && word.substr(0, name.size()) == name &&
                            word[name.size()] == '=');
}

// As llama.cpp's common_arg_utils::is_truthy reads a boolean environment variable.
bool truthy(std::string_view value) {
    return value == "on" || value == "enabled" || value == "true" || value == "1";
}

std::string facts_text;  // what describe() says the defaults were resolved from
int slots = 1;           // --parallel, for describe()
bool kv_unified = false; // for describe()
int n_ctx_slot = 0;      // for describe()

pfx::Config wanted() {
    const settings & s = current();
    return {.enabled = true, .keep_min = s.keep_min, .chunk = s.chunk == 0 ? 1 : s.chunk,
            .prefill_step = s.prefill_step, .decode_rows_exact = s.decode_rows_exact};
}

}  // namespace

std::string take_arguments(int & argc, char ** argv) {
    settings & s = current();
    bool chunk_given = false;
    bool keep_min_given = false;
    bool alone_given = false;
    // llama.cpp reads LLAMA_ARG_KV_UNIFIED first and the command line over it: with --parallel auto a
    // unified cache asked for either way is asked for, and refused below like the flag.
    const char * kv_unified_env = std::getenv("LLAMA_ARG_KV_UNIFIED");
    s.kv_unified_given = kv_unified_env != nullptr && truthy(kv_unified_env);
    int kept = 1;
    for (int i = 1; i < argc;) {
        const std::string_view word = argv[i];
        int used = 1;
        std::string error;
        if (word == "-h" || word == "--help") {
            // llama.cpp's parser prints its own options next and exits; pfx's come first.
            std::printf("pfx's rule (integrations/llama_server/README.md in pfx):\n"
                        "--pfx                    each slot's reuse, the prompt cache's and slot selection are pfx's "
                        "rule's decisions\n"
                        "--pfx-chunk N            the rule's chunk, a multiple of the grid llama.cpp resumes exactly on "
                        "(default: from flash attention, n_batch and n_ubatch)\n"
                        "--pfx-keep-min N         the fewest tokens worth reusing (default: 0)\n"
                        "--pfx-alone              keep ggml's fastest CPU paths, whose results depend on the batch: "
                        "pfx then vouches only for a request served alone, on the grid they resume exactly on\n"
                        "--pfx-certificate FILE   reuse rows decode wrote too, where FILE (pfx conform --engine llama "
                        "--certify FILE) proves them exact for this very configuration\n\n");
            argv[kept++] = argv[i];
        } else if (word == "--pfx") {
            s.enabled = true;
        } else if (word == "--pfx-alone") {
            s.alone = true;
            alone_given = true;
        } else if (is_option(word, "--pfx-chunk")) {
            error = count_argument(argc, argv, i, "--pfx-chunk", 1, s.chunk, used);
            chunk_given = true;
        } else if (is_option(word, "--pfx-certificate")) {
            error = text_argument(argc, argv, i, "--pfx-certificate", s.certificate, used);
        } else if (is_option(word, "--pfx-keep-min")) {
            error = count_argument(argc, argv, i, "--pfx-keep-min", 0, s.keep_min, used);
            keep_min_given = true;
        } else {
            if (word == "-kvu" || word == "--kv-unified") s.kv_unified_given = true;
            if (word == "-no-kvu" || word == "--no-kv-unified") s.kv_unified_given = false;
            argv[kept++] = argv[i];
        }
        if (!error.empty()) return error;
        i += used;
    }
    argc = kept;
    argv[argc] = nullptr;
    if ((chunk_given || keep_min_given || alone_given || !s.certificate.empty()) && !s.enabled) {
        return std::string("llama-server: ") +
               (chunk_given ? "--pfx-chunk" : keep_min_given ? "--pfx-keep-min" : alone_given ? "--pfx-alone" : "--pfx-certificate") +
               " is a setting of pfx's rule, which is off: add --pfx";
    }
    if (s.batch_invariant()) {
        // Read by ggml's CPU backend when llama.cpp starts it (ggml-cpu.patch): before any backend exists.
        setenv("GGML_CPU_USE_REF", "1", 1);
    }
    return "";
}

bool auto_kv_unified() {
    return !current().batch_invariant() || current().kv_unified_given;
}

std::map<std::string, std::string> configuration_served(const server_facts & facts, bool reference_paths) {
    return pfx::llama::configuration({.ggml = pfx::llama::ggml_identity(facts.ggml_version.c_str(), facts.ggml_commit.c_str()),
                                      .reference_paths = reference_paths,
                                      .model_path = facts.model_path,
                                      .n_batch = facts.n_batch,
                                      .n_ubatch = facts.n_ubatch,
                                      .flash_attention = facts.flash_attention,
                                      .kv_type = facts.kv_type,
                                      .threads = static_cast<std::size_t>(facts.threads),
                                      .batch_threads = static_cast<std::size_t>(facts.batch_threads)});
}

namespace {

// --pfx-certificate: decode rows are exact where the certificate proves them so for the configuration
// served, and proves the rule's chunk exact there too; else the error says why, and the server stops.
std::string certified(const server_facts & facts) {
    settings & s = current();
    s.decode_rows_exact = false;
    if (s.certificate.empty()) return "";
    const std::string refused = "llama-server --pfx --pfx-certificate ";
    try {
        const pfx::llama::Proved proved =
            pfx::llama::read_certificate(s.certificate, configuration_served(facts, s.batch_invariant()));
        if (!proved.decode_rows_equal) {
            std::string lacking;
            for (const std::string & why : proved.decode_rows_lacking) lacking += (lacking.empty() ? "" : "; ") + why;
            return refused + s.certificate + ": it does not prove decode rows exact for this configuration (" + lacking +
                   "): serve without --pfx-certificate";
        }
        if (std::find(proved.exact_grids.begin(), proved.exact_grids.end(), s.chunk) == proved.exact_grids.end()) {
            return refused + s.certificate + ": it proves no resume on the rule's chunk " + std::to_string(s.chunk) +
                   " exact: give --pfx-chunk one of the grids it proves";
        }
    } catch (const pfx::llama::CertificateError & e) {
        return refused + e.what();
    }
    s.decode_rows_exact = true;
    facts_text += ", decode rows exact (the certificate " + s.certificate + ")";
    return "";
}

}  // namespace

std::string configure(const server_facts & facts) {
    settings & s = current();
    if (!s.enabled) return "";
    const std::string refused = "llama-server --pfx: ";
    const std::string cannot = ", which pfx's rule cannot vouch for; ";
    if (!facts.has_model) {
        return refused + "the router mode (no --model) serves each model from a process of its own, started "
                         "without the rule; give --model";
    }
    if (facts.cache_reuse > 0) {
        return refused + "--cache-reuse " + std::to_string(facts.cache_reuse) +
               " shifts rows of an earlier prompt to new positions, rows no prefill of the new prompt computes" +
               cannot + "leave --cache-reuse at 0 with --pfx";
    }
    if (facts.speculative) {
        return refused + "speculative decoding (--model-draft, --spec-type) keeps a draft context and verifies "
                         "drafts in batches of their own" + cannot + "serve without it under --pfx";
    }
    if (facts.lora) {
        return refused + "--lora: a request may change the adapters, and with them every row" + cannot +
               "serve it without --pfx";
    }
    const pfx::llama::ContextFacts context{.n_batch = facts.n_batch,
                                           .n_ubatch = facts.n_ubatch,
                                           .flash_attention_off = facts.flash_attention_off,
                                           .batch_invariant = s.batch_invariant(),
                                           .recurrent_or_hybrid = facts.recurrent_or_hybrid,
                                           .n_swa = facts.n_swa,
                                           .multimodal = facts.multimodal ? "--mmproj" : "",
                                           .gpu_layers = facts.gpu_layers};
    if (const std::string cause = pfx::llama::unvouched(context); !cause.empty()) {
        return refused + cause + cannot + "serve it without --pfx";
    }
    const auto shape =
        pfx::llama::resolve(context, s.chunk == 0 ? std::nullopt : std::optional(s.chunk), "--pfx-chunk");
    if (const auto * error = std::get_if<std::string>(&shape)) return refused + *error;
    slots = facts.n_parallel;
    kv_unified = facts.kv_unified;
    n_ctx_slot = facts.n_ctx_slot;
    s.chunk = std::get<pfx::llama::RuleShape>(shape).chunk;
    s.prefill_step = std::get<pfx::llama::RuleShape>(shape).prefill_step;
    if (s.batch_invariant()) {
        // Every row is computed one at a time (GGML_CPU_USE_REF): its bits are a function of its token, its
        // position and the rows before it, whatever ubatch or batch holds it. A resume at any offset is
        // then exact (THM-1 with chunk 1), and so is a request decoded beside others, as long as its keys
        // are read in the order of their positions: a KV stream per slot.
        if (facts.kv_unified && facts.n_parallel > 1) {
            return refused + "--kv-unified with " + std::to_string(facts.n_parallel) +
                   " slots: one cache holds every slot's rows, and a slot's later rows may take cells freed below "
                   "its earlier ones, which changes the order attention sums them in, and with it the answer; pfx's "
                   "batch-invariant path gives each slot a KV stream of its own: drop --kv-unified (and "
                   "LLAMA_ARG_KV_UNIFIED), or add "
                   "--pfx-alone (pfx then vouches only for a request served alone)";
        }
        facts_text = std::string("batch-invariant CPU paths, ") +
                     (facts.kv_unified ? "one KV cache" : "a KV stream per slot") + " of " +
                     std::to_string(facts.n_ctx_slot) + " tokens";
    } else {
        facts_text = std::string("--pfx-alone: flash attention ") + (facts.flash_attention_off ? "off" : "on or auto") +
                     ", n_batch " + std::to_string(facts.n_batch) + ", n_ubatch " + std::to_string(facts.n_ubatch);
    }
    return certified(facts);  // after facts_text, which it extends
}

std::string describe() {
    const settings & s = current();
    return "pfx: the rule is on: chunk " + std::to_string(s.chunk) + ", prefill step " + std::to_string(s.prefill_step) +
           ", keep_min " + std::to_string(s.keep_min) + " (" + facts_text +
           "); each slot's reuse, the prompt cache's and slot selection are its decisions" +
           (s.batch_invariant()
                ? std::string("; ") + std::to_string(slots) + (slots > 1 ? " slots" : " slot") +
                      ", each answer the same as its request served alone" +
                      (slots > 1 && !kv_unified ? " (each slot has " + std::to_string(n_ctx_slot) + " of the context's tokens)" : std::string())
            : slots > 1 ? std::string("; with --parallel ") + std::to_string(slots) +
                              ", requests decoded at the same time share batches, which on llama.cpp's CPU build changes "
                              "their logprobs (docs/engines.md, \"llama-server\"): pfx vouches for a request served alone"
                        : std::string());
}

record::record() = default;
record::~record() = default;
record::record(record &&) noexcept = default;
record & record::operator=(record &&) noexcept = default;
record::record(const record & other)
    : machine_(other.machine_ ? std::make_unique<pfx::Machine>(*other.machine_) : nullptr) {}
record & record::operator=(const record & other) {
    if (this != &other) {
        machine_ = other.machine_ ? std::make_unique<pfx::Machine>(*other.machine_) : nullptr;
    }
    return *this;
}

// The record's events are pfx/llama/record.hpp's, which llama-cpp-python's rule takes too; here only
// the slot's machine is made and kept on the server's configuration.
pfx::Machine & record::configured() {
    if (!machine_) machine_ = std::make_unique<pfx::Machine>();
    pfx::llama::abort(*machine_);
    if (machine_->config() != wanted()) (void) machine_->configure(wanted());
    return *machine_;
}

std::size_t record::offer(const std::vector<int32_t> & held, const std::vector<int32_t> & prompt) {
    if (!current().enabled) return 0;
    pfx::Machine & machine = configured();
    pfx::llama::settle(machine, held);
    return machine.query(prompt).decision.offset;
}

std::size_t record::begin(const std::vector<int32_t> & held, const std::vector<int32_t> & prompt, std::string & why) {
    const pfx::Decision decision = pfx::llama::begin(configured(), held, prompt);
    why = "pfx: prompt of " + std::to_string(prompt.size()) + " tokens: the slot held " +
          std::to_string(pfx::common_prefix(std::span<const pfx::token>(held), std::span<const pfx::token>(prompt))) +
          " of it, the rule allows " + std::to_string(decision.offset) + " (" + std::string(pfx::name(decision.reason)) +
          ", bound " + std::string(pfx::name(decision.bound)) + ")";
    return decision.offset;
}

void record::begin_cold(const std::vector<int32_t> & held, const std::vector<int32_t> & prompt) {
    pfx::llama::begin_cold(configured(), held, prompt);
}

void record::commit() {
    // With decode rows exact the write goes on through decode: finish publishes it with their rows.
    if (machine_ && !machine_->config().decode_rows_exact) pfx::llama::commit(*machine_);
}

void record::finish(const std::vector<int32_t> & held) {
    if (machine_ && machine_->config().decode_rows_exact) pfx::llama::finish(*machine_, held);
}

void record::abort() {
    if (machine_) pfx::llama::abort(*machine_);
}

void record::clear() {
    if (machine_) (void) machine_->clear();
}

void record::forget_from(std::size_t row) {
    if (machine_) pfx::llama::forget_from(*machine_, row);
}

}  // namespace pfx_server
