#include <pfx/llama/engine.hpp>
#include <pfx/llama/sequence_state.hpp>

#include <llama.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <utility>

namespace pfx::llama {
namespace {

/// Whether llama.cpp's own log lines reach stderr (Settings::verbose of the last engine made).
std::atomic<bool> verbose_log{false};

/// llama.cpp logs every load and context to stderr, and its reasons for a failure before pfx's own
/// error says what failed: none of it shows unless asked for (--verbose).
void quiet_log(ggml_log_level, const char* text, void*) {
  if (verbose_log.load(std::memory_order_relaxed)) std::fputs(text, stderr);
}

void initialize_backend(bool verbose) {
  verbose_log.store(verbose, std::memory_order_relaxed);
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(quiet_log, nullptr);
    llama_backend_init();
  });
}

/// Flash attention in the context parameters: a bool in older llama.cpp, an enum with "auto" since.
template <class Params>
void set_flash_attention(Params& params, FlashAttention value) {
  if constexpr (requires { params.flash_attn_type; }) {
    // llama_flash_attn_type: AUTO -1, DISABLED 0, ENABLED 1 (named by value: the enum does not exist
    // in the versions with a bool, and this branch must compile against them too).
    using Type = decltype(params.flash_attn_type);
    params.flash_attn_type = static_cast<Type>(value == FlashAttention::on ? 1 : value == FlashAttention::off ? 0 : -1);
  } else {
    // No "auto" here: llama.cpp's default stands (off in the versions with a bool).
    if (value != FlashAttention::automatic) params.flash_attn = value == FlashAttention::on;
  }
}

/// A context's parameters from the engine's settings: n_ctx rows, calls of up to n_batch tokens,
/// `sequences` sequences, a KV stream each (kv_unified off: a sequence's keys at the cells of their
/// positions, as llama-server's slots under --pfx).
llama_context_params context_params(const Settings& s, std::size_t n_ctx, std::size_t n_batch, std::size_t sequences) {
  llama_context_params params = llama_context_default_params();
  params.n_ctx = static_cast<std::uint32_t>(n_ctx);
  params.n_batch = static_cast<std::uint32_t>(n_batch);
  params.n_ubatch = static_cast<std::uint32_t>(s.ubatch);
  params.n_seq_max = static_cast<std::uint32_t>(sequences);
  params.kv_unified = false;
  params.n_threads = static_cast<std::int32_t>(s.threads);
  params.n_threads_batch = static_cast<std::int32_t>(s.threads);
  params.type_k = s.kv_type == KvType::f32 ? GGML_TYPE_F32 : GGML_TYPE_F16;
  params.type_v = params.type_k;
  params.no_perf = true;
  set_flash_attention(params, s.flash_attention);
  return params;
}

class KvState final : public driver::KvState {
 public:
  KvState(llama_model* model, const Settings& s, std::size_t capacity) : shape_{.capacity = capacity} {
    const llama_context_params params = context_params(s, capacity, s.chunk, 1);
    context_ = llama_init_from_model(model, params);
    if (context_ == nullptr) {
      throw LlamaError("llama.cpp could not make a context of " + std::to_string(capacity) + " rows");
    }
    batch_ = llama_batch_init(static_cast<std::int32_t>(s.chunk), 0, 1);
  }
  ~KvState() override {
    llama_batch_free(batch_);
    llama_free(context_);
  }
  KvState(const KvState&) = delete;
  KvState& operator=(const KvState&) = delete;

  [[nodiscard]] const driver::KvShape& shape() const noexcept override { return shape_; }

  void forget(std::size_t from) override {
    driver::check_rows(shape_, from, shape_.capacity, "llama KvState::forget");
    // Sequence 0, every position from `from` on; a partial removal of a plain KV cache never fails.
    if (!llama_memory_seq_rm(llama_get_memory(context_), 0, static_cast<llama_pos>(from), -1)) {
      throw LlamaError("llama.cpp refused to forget rows from " + std::to_string(from));
    }
  }

  void synchronize() override { llama_synchronize(context_); }

  [[nodiscard]] bool readable() const noexcept override { return true; }

  /// llama_state_seq_get_data of sequence 0, after the pending writes.
  [[nodiscard]] std::vector<std::byte> sequence_state() const {
    llama_synchronize(context_);
    std::vector<std::byte> state(llama_state_seq_get_size(context_, 0));
    const std::size_t written =
        llama_state_seq_get_data(context_, reinterpret_cast<std::uint8_t*>(state.data()), state.size(), 0);
    state.resize(written);
    return state;
  }

  [[nodiscard]] std::vector<std::byte> read_rows(std::size_t from, std::size_t to) const override {
    driver::check_rows(shape_, from, to, "llama KvState::read_rows");
    return rows_of_sequence_state(sequence_state(), from, to);
  }

  /// Decodes batch_'s first n tokens, filled by the caller, and copies the last one's logits.
  void run(std::size_t n, std::size_t vocab, std::span<float> logits) {
    batch_.n_tokens = static_cast<std::int32_t>(n);
    const std::int32_t status = llama_decode(context_, batch_);
    if (status != 0) {
      throw LlamaError("llama_decode failed with status " + std::to_string(status) +
                       (status == 1 ? " (no room in the KV cache)" : ""));
    }
    const float* last = llama_get_logits_ith(context_, -1);
    if (last == nullptr) throw LlamaError("llama.cpp returned no logits");
    std::copy_n(last, std::min(vocab, logits.size()), logits.begin());
  }

  llama_batch& batch() noexcept { return batch_; }

 protected:
  /// One serialization of the sequence for every row: a row at a time would serialize it once a row.
  void visit_rows(std::size_t from, std::size_t to, const RowVisitor& visit) const override {
    for_each_row_of_sequence_state(sequence_state(), from, to, visit);
  }

 private:
  driver::KvShape shape_;
  llama_context* context_ = nullptr;
  llama_batch batch_{};
};

KvState& own_state(driver::KvState& kv) {
  auto* state = dynamic_cast<KvState*>(&kv);
  if (state == nullptr) throw std::invalid_argument("pfx::llama::Engine: a KV state this engine did not make");
  return *state;
}

void put(llama_batch& batch, std::size_t i, token t, std::size_t position, bool wants_logits) {
  batch.token[i] = static_cast<llama_token>(t);
  batch.pos[i] = static_cast<llama_pos>(position);
  batch.n_seq_id[i] = 1;
  batch.seq_id[i][0] = 0;
  batch.logits[i] = wants_logits ? 1 : 0;
}

}  // namespace

FlashAttention parse_flash_attention(const std::string& value) {
  if (value == "on") return FlashAttention::on;
  if (value == "off") return FlashAttention::off;
  if (value == "auto") return FlashAttention::automatic;
  throw std::invalid_argument("flash attention '" + value + "': expected on, off or auto");
}

KvType parse_kv_type(const std::string& value) {
  if (value == "f16") return KvType::f16;
  if (value == "f32") return KvType::f32;
  throw std::invalid_argument("KV type '" + value + "': expected f16 or f32");
}

const char* to_string(FlashAttention value) noexcept {
  switch (value) {
    case FlashAttention::on: return "on";
    case FlashAttention::off: return "off";
    case FlashAttention::automatic: return "auto";
  }
  return "?";
}

const char* to_string(KvType value) noexcept { return value == KvType::f32 ? "f32" : "f16"; }

Engine::Engine(Settings settings) : settings_(std::move(settings)) {
  if (settings_.chunk == 0) throw std::invalid_argument("pfx::llama::Engine: the chunk must be at least 1");
  if (settings_.ubatch == 0) settings_.ubatch = settings_.chunk;
  if (settings_.ubatch > settings_.chunk) {
    throw std::invalid_argument("pfx::llama::Engine: ubatch " + std::to_string(settings_.ubatch) +
                                " is larger than the chunk " + std::to_string(settings_.chunk) +
                                " (llama.cpp's n_ubatch is at most its n_batch)");
  }
  // One thread unless asked: on a busy machine ggml's thread barriers spin, and a tiny model's
  // prefill took 30 times longer on two threads than on one (docs/engines.md).
  if (settings_.threads == 0) settings_.threads = 1;
  const std::string& path = settings_.model;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw ModelError("cannot read the model " + path + ": it is a directory");
  if (std::ifstream probe(path, std::ios::binary); !probe) {
    throw ModelError("cannot read the model " + path + ": " + std::strerror(errno));
  }
  initialize_backend(settings_.verbose);
  llama_model_params params = llama_model_default_params();
  params.n_gpu_layers = 0;
  model_ = llama_model_load_from_file(path.c_str(), params);
  if (model_ == nullptr) {
    throw ModelError("cannot load the model " + path + ": llama.cpp does not read it as a GGUF model" +
                     (settings_.verbose ? "" : " (--verbose shows llama.cpp's own log)"));
  }
  // A model that states no trained context (0) bounds a KV state only by llama.cpp's positions.
  const std::int32_t trained = llama_model_n_ctx_train(model_);
  trained_context_ = trained > 0 ? static_cast<std::size_t>(trained)
                                 : static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max());
  vocab_ = static_cast<std::size_t>(llama_vocab_n_tokens(llama_model_get_vocab(model_)));
  layers_ = static_cast<std::size_t>(llama_model_n_layer(model_));
}

Engine::~Engine() { llama_model_free(model_); }

std::unique_ptr<driver::KvState> Engine::make_kv_state(std::size_t capacity) const {
  if (capacity == 0) throw std::invalid_argument("pfx::llama::Engine: a KV state of 0 rows");
  // llama.cpp counts rows in 32-bit signed positions.
  if (capacity > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw std::invalid_argument("pfx::llama::Engine: a KV state of " + std::to_string(capacity) +
                                " rows is more than llama.cpp's positions can count");
  }
  // A longer context than the model was trained on runs, but answers what the model never learned.
  if (capacity > trained_context_) {
    throw std::invalid_argument("pfx::llama::Engine: a KV state of " + std::to_string(capacity) +
                                " rows is more than the model's trained context, " + std::to_string(trained_context_) +
                                " (n_ctx_train)");
  }
  return std::make_unique<KvState>(model_, settings_, capacity);
}

void Engine::prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
                     std::span<float> logits) {
  KvState& state = own_state(kv);
  if (tokens.empty() || tokens.size() > settings_.chunk) {
    throw std::invalid_argument("pfx::llama::Engine::prefill: " + std::to_string(tokens.size()) +
                                " tokens, expected 1 to the chunk " + std::to_string(settings_.chunk));
  }
  driver::check_rows(kv.shape(), position, position + tokens.size(), "pfx::llama::Engine::prefill");
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    put(state.batch(), i, tokens[i], position + i, i + 1 == tokens.size());
  }
  state.run(tokens.size(), vocab_, logits);
}

void Engine::decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) {
  KvState& state = own_state(kv);
  driver::check_rows(kv.shape(), position, position + 1, "pfx::llama::Engine::decode");
  put(state.batch(), 0, next, position, true);
  state.run(1, vocab_, logits);
}

std::vector<std::vector<float>> Engine::serve_together(const std::vector<std::vector<token>>& prompts,
                                                       std::size_t steps) const {
  if (prompts.empty()) throw std::invalid_argument("pfx::llama::Engine::serve_together: no prompt");
  std::size_t total = 0;
  std::size_t longest = 0;
  for (const std::vector<token>& prompt : prompts) {
    if (prompt.empty()) throw std::invalid_argument("pfx::llama::Engine::serve_together: an empty prompt");
    total += prompt.size();
    longest = std::max(longest, prompt.size());
  }
  if (longest + steps > trained_context_) {
    throw std::invalid_argument("pfx::llama::Engine::serve_together: a prompt of " + std::to_string(longest) +
                                " tokens and " + std::to_string(steps) + " steps need more rows than the model's "
                                "trained context, " + std::to_string(trained_context_));
  }
  constexpr std::size_t cells = 256;  // llama.cpp pads a stream's cells to this; each stream gets as many
  const std::size_t per_stream = (longest + steps + cells - 1) / cells * cells;
  const llama_context_params params =
      context_params(settings_, per_stream * prompts.size(), std::max(total, prompts.size()), prompts.size());
  std::unique_ptr<llama_context, decltype(&llama_free)> context(llama_init_from_model(model_, params), &llama_free);
  if (!context) throw LlamaError("llama.cpp could not make a context of " + std::to_string(prompts.size()) + " streams");
  const std::unique_ptr<llama_batch, void (*)(llama_batch*)> batch(
      new llama_batch(llama_batch_init(static_cast<std::int32_t>(params.n_batch), 0, 1)), [](llama_batch* b) {
        llama_batch_free(*b);
        delete b;
      });
  std::vector<std::vector<float>> served(prompts.size());
  std::vector<token> next(prompts.size());
  std::vector<std::int32_t> last(prompts.size());  // each sequence's row of logits in the batch
  // Decodes batch's first n tokens; appends each sequence's logits, and takes its greedy next token.
  const auto run = [&](std::size_t n) {
    batch->n_tokens = static_cast<std::int32_t>(n);
    if (const std::int32_t status = llama_decode(context.get(), *batch); status != 0) {
      throw LlamaError("llama_decode of " + std::to_string(prompts.size()) + " sequences failed with status " +
                       std::to_string(status));
    }
    for (std::size_t s = 0; s < prompts.size(); ++s) {
      const float* logits = llama_get_logits_ith(context.get(), last[s]);
      if (logits == nullptr) throw LlamaError("llama.cpp returned no logits");
      served[s].insert(served[s].end(), logits, logits + vocab_);
      next[s] = static_cast<token>(std::max_element(logits, logits + vocab_) - logits);
    }
  };
  const auto put_in = [&](std::size_t i, std::size_t s, token t, std::size_t position, bool wants_logits) {
    put(*batch, i, t, position, wants_logits);
    batch->seq_id[i][0] = static_cast<llama_seq_id>(s);
    if (wants_logits) last[s] = static_cast<std::int32_t>(i);
  };
  std::size_t i = 0;
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    for (std::size_t p = 0; p < prompts[s].size(); ++p) put_in(i++, s, prompts[s][p], p, p + 1 == prompts[s].size());
  }
  run(i);
  for (std::size_t step = 0; step < steps; ++step) {
    for (std::size_t s = 0; s < prompts.size(); ++s) put_in(s, s, next[s], prompts[s].size() + step, true);
    run(prompts.size());
  }
  return served;
}

Served Engine::served() const {
  // As ggml's CPU backend reads it when it starts (ggml-cpu.patch): set and not "0".
  const char* use_ref = std::getenv("GGML_CPU_USE_REF");
  return {.ggml = ggml_identity(ggml_version(), ggml_commit()),
          .reference_paths = use_ref != nullptr && std::strcmp(use_ref, "0") != 0,
          .model_path = settings_.model,
          .n_batch = settings_.chunk,
          .n_ubatch = settings_.ubatch,
          .flash_attention = to_string(settings_.flash_attention),
          .kv_type = to_string(settings_.kv_type),
          .threads = settings_.threads,
          .batch_threads = settings_.threads};
}

std::string Engine::describe() const {
  return "llama.cpp " + settings_.model + " (vocab " + std::to_string(vocab_) + ", " + std::to_string(layers_) +
         " layers, context " + std::to_string(trained_context_) + ", chunk " + std::to_string(settings_.chunk) + ", ubatch " + std::to_string(settings_.ubatch) + ", " +
         std::to_string(settings_.threads) + (settings_.threads == 1 ? " thread" : " threads") + ", flash attention " + to_string(settings_.flash_attention) +
         ", KV " + to_string(settings_.kv_type) + ")";
}

}  // namespace pfx::llama
