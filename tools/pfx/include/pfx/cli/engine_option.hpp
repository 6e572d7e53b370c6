#pragma once

/// \file
/// `--engine llama` of `pfx replay`, `pfx soak` and `pfx conform` (docs/cli.md, docs/engines.md): the
/// options that set up pfx::llama's engine (--model, --ubatch, --threads, --flash-attn, --kv-type),
/// and the engine itself. In a pfx built without llama.cpp the options exist and the engine is an
/// InputError that says so.

#include <pfx/driver/engine.hpp>

#include <cstddef>
#include <memory>
#include <string>

namespace CLI {
class App;
}

namespace pfx::cli {

struct LlamaOptions {
  std::string model;          ///< --model: a GGUF file
  std::size_t ubatch = 0;     ///< --ubatch: llama.cpp's n_ubatch; 0: the chunk
  std::size_t threads = 0;    ///< --threads; 0: one
  std::string flash_attention = "auto";
  std::string kv_type = "f16";
};

/// Whether this pfx was built with pfx::llama.
[[nodiscard]] bool llama_built() noexcept;

/// Adds --model, --ubatch, --threads, --flash-attn and --kv-type to `command`.
void add_llama_options(CLI::App& command, LlamaOptions& options);

struct LlamaEngine {
  std::unique_ptr<driver::Engine> engine;
  std::string description;
};

/// The llama.cpp engine of `options` whose prefill chunk (n_batch) is `chunk`. Throws InputError when
/// pfx was built without llama.cpp, when --model is missing, unreadable or not a model, and for a
/// --ubatch above the chunk.
[[nodiscard]] LlamaEngine llama_engine(const LlamaOptions& options, std::size_t chunk);

/// Throws InputError when llama options were given but the engine is not llama (`engine`).
void check_llama_options_unused(const CLI::App& command, const std::string& engine);

}  // namespace pfx::cli
