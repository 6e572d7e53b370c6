#pragma once

// pfx's rule inside llama.cpp's llama-server (integrations/llama_server/README.md). The server's
// sources include this header through llama-server.patch; it is C++17, as they are, and keeps
// pfx's core (C++20, core/include) out of them: pfx_server.cpp is the one file that includes it.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pfx {
class Machine;
}

namespace pfx_server {

// What --pfx, --pfx-chunk and --pfx-keep-min asked for, and what the server resolved from its context.
struct settings {
    bool enabled = false;      // --pfx
    bool alone = false;        // --pfx-alone: the CPU backend's own paths; pfx vouches for a request served alone
    std::size_t chunk = 0;     // --pfx-chunk; 0: the default the context's parameters give (configure)
    std::size_t keep_min = 0;  // --pfx-keep-min
    std::size_t prefill_step = 0;
    bool kv_unified_given = false;  // -kvu, --kv-unified or LLAMA_ARG_KV_UNIFIED, the last one given
    std::string certificate;   // --pfx-certificate FILE: "" none
    bool decode_rows_exact = false;  // the certificate proves decode rows exact for the configuration served

    // --pfx without --pfx-alone: ggml's CPU backend on its reference paths (GGML_CPU_USE_REF, which
    // take_arguments sets before any backend starts), on which a row's bits depend neither on the rows
    // beside it in a batch nor on the ubatch that holds it; each slot gets a KV stream of its own.
    bool batch_invariant() const { return enabled && !alone; }
};

// The one instance, read by every slot's record.
settings & current();

// Removes --pfx, --pfx-alone, --pfx-chunk N and --pfx-keep-min N from argv (argc shrinks), so that
// llama.cpp's own parser sees only its options. With the batch-invariant path it sets GGML_CPU_USE_REF=1
// in the environment, which ggml's CPU backend reads when it starts (ggml-cpu.patch). Returns an error
// naming the bad argument, or "" when all is well.
std::string take_arguments(int & argc, char ** argv);

// Whether `--parallel` auto (4 slots) gets one unified KV cache, as llama-server's own default does, or,
// on pfx's batch-invariant path, a KV stream per slot (unless --kv-unified was given, which configure
// then refuses).
bool auto_kv_unified();

// What the server knows at start that decides whether the rule can vouch for it.
struct server_facts {
    bool flash_attention_off = false;  // the context's flash attention was asked off (not auto)
    std::size_t n_batch = 0;           // llama_n_batch: the server adds a prompt in calls of this
    std::size_t n_ubatch = 0;          // llama_n_ubatch: llama.cpp splits each call into these
    int cache_reuse = 0;               // --cache-reuse
    bool speculative = false;          // a draft model or any other speculative decoding
    int n_swa = 0;                     // the model's sliding window
    bool recurrent_or_hybrid = false;
    bool multimodal = false;           // --mmproj
    int gpu_layers = 0;                // -ngl where the build offloads to a GPU (-1: all), else 0
    bool lora = false;                 // --lora, --lora-scaled
    bool has_model = true;             // false in the router mode (no --model)
    int n_parallel = 1;                // --parallel: slots whose requests may share a batch
    bool kv_unified = false;           // one KV cache for every slot (--kv-unified, or auto's default)
    int n_ctx_slot = 0;                // the context each slot gets
    // What a certificate names (--pfx-certificate; pfx/llama/certificate.hpp's Served)
    std::string ggml_version;          // ggml_version()
    std::string ggml_commit;           // ggml_commit()
    std::string model_path;            // --model
    std::string flash_attention;       // "on", "off", "auto"
    std::string kv_type;               // "f16" where K and V are alike, else "K q8_0, V f16"
    int threads = 0;                   // llama_n_threads
    int batch_threads = 0;             // llama_n_threads_batch
};

// Resolves the chunk and the prefill step from the facts, or returns an error naming the option or
// model property the rule cannot vouch for ("" when the server may start): the server's own options
// here, the model's and the context's by pfx/llama/policy.hpp, the decision llama-cpp-python's rule
// takes too. With --pfx-certificate, the certificate must prove decode rows exact for the very
// configuration served (else the error names what it lacks, or each field that differs, with both
// values), and the rule's chunk exact. On success current() holds the rule's configuration.
std::string configure(const server_facts & facts);

// What a certificate names of the configuration `facts` describe, on ggml's reference paths or its own
// (pfx/llama/certificate.hpp's configuration: field name to value). Reads the whole model file (its
// SHA-256); throws pfx::llama::CertificateError where it cannot.
std::map<std::string, std::string> configuration_served(const server_facts & facts, bool reference_paths);

// The one line the server prints at start with the rule on.
std::string describe();

// A slot's record: a pfx::Machine that travels with the slot's prompt (server_prompt), into the host
// prompt cache and back, so that it always describes the KV rows beside it.
class record {
  public:
    record();
    ~record();
    record(const record & other);
    record & operator=(const record & other);
    record(record && other) noexcept;
    record & operator=(record && other) noexcept;

    // The offset the rule grants `prompt` against this record, given `held`, the tokens the slot says
    // its rows hold: a write that never committed is aborted first (its rows below its offset stay),
    // and the record shrinks to what `held` still agrees with. 0 when the rule is off.
    std::size_t offer(const std::vector<int32_t> & held, const std::vector<int32_t> & prompt);

    // offer, then begin writing `prompt` from the granted offset, which it returns; `why` is the
    // decision in words, for the server's log.
    std::size_t begin(const std::vector<int32_t> & held, const std::vector<int32_t> & prompt, std::string & why);

    // A prefill from row 0 (cache_prompt false): a cold run's rows, which the record may offer later.
    void begin_cold(const std::vector<int32_t> & held, const std::vector<int32_t> & prompt);

    // The begun prompt's prefill was decoded: its rows are published, all but a last row that a
    // one-row ubatch computed where the prefill step applies (INV-12). Nothing while not writing. With
    // decode rows exact (a certificate), nothing yet: the write goes on through decode, and finish
    // publishes it with the rows decode wrote.
    void commit();

    // The slot is released (its request finished, stopped or was cancelled): with decode rows exact, the
    // begun prompt is published with the rows decode wrote after it, `held` being the tokens the slot's
    // rows hold (pfx/llama/record.hpp's finish). Nothing otherwise.
    void finish(const std::vector<int32_t> & held);

    // The begun prompt's rows are being computed otherwise than a prefill of it alone would (its tokens
    // share a batch with another slot's): the write is aborted, so that only the rows before its
    // offset stay claimed. Nothing while not writing.
    void abort();

    // The slot's rows are gone or rewritten (prompt_clear, a failed decode, a state loaded from a file).
    void clear();

    // Rows from `row` on are about to be rewritten otherwise than by a prefill (a context shift).
    void forget_from(std::size_t row);

  private:
    // The slot's machine, made where there is none yet, a write it never committed aborted, and on the
    // server's configuration (configure is an idle event).
    pfx::Machine & configured();
    std::unique_ptr<pfx::Machine> machine_;
};

}  // namespace pfx_server
