#pragma once

/// \file
/// pfx::llama: a pfx::driver::Engine over llama.cpp (docs/integration.md, "llama.cpp"). The engine
/// holds one llama_model; each KV state it makes is a llama_context of its own whose memory, for
/// sequence 0, holds the rows: the lane's state and a cold side's are two contexts of one model.
/// Each prefill call is one llama_decode of the chunk's tokens at their positions (llama.cpp splits
/// it into ubatches of n_ubatch rows); a decode step is one llama_decode of one token; forgetting
/// rows is llama_memory_seq_rm(memory, 0, from, -1).

#include <pfx/driver/engine.hpp>
#include <pfx/driver/kv_state.hpp>
#include <pfx/llama/certificate.hpp>
#include <pfx/token.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

struct llama_model;

namespace pfx::llama {

/// Flash attention: on, off, or llama.cpp's own choice (where its version has one; else its default).
enum class FlashAttention { off, on, automatic };

/// The KV cache's element type.
enum class KvType { f16, f32 };

struct Settings {
  std::string model;           ///< path of a GGUF file
  std::size_t chunk = 64;      ///< tokens of one prefill call: llama.cpp's n_batch, the rule's chunk
  std::size_t ubatch = 0;      ///< llama.cpp's n_ubatch, at most chunk; 0: the chunk
  std::size_t threads = 0;     ///< 0: one (ggml's barriers spin on a busy machine; raise it for a large model)
  FlashAttention flash_attention = FlashAttention::automatic;
  KvType kv_type = KvType::f16;
  bool verbose = false;        ///< llama.cpp's own log lines on stderr (otherwise none: pfx's errors say what failed)
};

/// The model file is missing, unreadable, or not a model llama.cpp loads. The message names it.
class ModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// llama.cpp refused or failed a call (a context it could not make, a decode that failed).
class LlamaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Parses "on", "off", "auto" and "f16", "f32"; throws std::invalid_argument naming the value.
[[nodiscard]] FlashAttention parse_flash_attention(const std::string& value);
[[nodiscard]] KvType parse_kv_type(const std::string& value);
[[nodiscard]] const char* to_string(FlashAttention value) noexcept;
[[nodiscard]] const char* to_string(KvType value) noexcept;

class Engine final : public driver::Engine {
 public:
  /// Loads the model. Throws std::invalid_argument for a chunk of 0 or a ubatch above the chunk,
  /// ModelError naming the file when it cannot be read or loaded.
  explicit Engine(Settings settings);
  ~Engine() override;

  [[nodiscard]] std::size_t chunk() const noexcept override { return settings_.chunk; }
  [[nodiscard]] std::size_t vocab() const noexcept override { return vocab_; }
  [[nodiscard]] const Settings& settings() const noexcept { return settings_; }
  /// The model's trained context (llama.cpp's n_ctx_train): the most rows a KV state of it may hold.
  [[nodiscard]] std::size_t trained_context() const noexcept { return trained_context_; }

  /// A new llama_context of n_ctx >= capacity rows, one sequence. Throws std::invalid_argument for a
  /// capacity above the model's trained context, LlamaError when llama.cpp cannot make it.
  [[nodiscard]] std::unique_ptr<driver::KvState> make_kv_state(std::size_t capacity) const override;

  /// One llama_decode of `tokens` at positions [position, position + n), sequence 0, logits of the
  /// last. Throws std::invalid_argument for more tokens than the chunk or a state this engine did
  /// not make, LlamaError when llama_decode fails.
  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override;
  void decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override;

  /// `prompts` served together, each cold, as a server's slots are: a new llama_context of one KV
  /// stream per prompt (n_seq_max prompts, kv_unified off), every prompt's tokens in one llama_decode
  /// (llama.cpp splits it into ubatches of n_ubatch rows), then `steps` greedy decode steps of all of
  /// them in one llama_decode each. For each prompt, the logits of its last token and of each step,
  /// concatenated. Alone is a batch of one: what the conformance check's batching finding compares
  /// with (pfx::conform::CheckOptions::serve_together). Throws std::invalid_argument for no prompt, an
  /// empty one or one longer than the trained context with `steps`, LlamaError when llama.cpp fails.
  [[nodiscard]] std::vector<std::vector<float>> serve_together(const std::vector<std::vector<token>>& prompts,
                                                               std::size_t steps) const;

  /// What this engine computes on, as a certificate names it (pfx/llama/certificate.hpp): ggml's version,
  /// its CPU paths (GGML_CPU_USE_REF as this process has it), the model, the chunk as n_batch, the
  /// ubatch, flash attention, the KV type and the threads.
  [[nodiscard]] Served served() const;

  /// "llama.cpp FILE (vocab V, L layers, context N, chunk C, ubatch U, T threads, flash attention X, KV f16)".
  [[nodiscard]] std::string describe() const;

 private:
  Settings settings_;
  llama_model* model_ = nullptr;
  std::size_t vocab_ = 0;
  std::size_t layers_ = 0;
  std::size_t trained_context_ = 0;
};

}  // namespace pfx::llama
