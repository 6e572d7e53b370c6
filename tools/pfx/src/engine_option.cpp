#include <pfx/cli/engine_option.hpp>

#include <pfx/cli/command.hpp>
#include <pfx/cli/options.hpp>
#ifdef PFX_CLI_LLAMA
#include <pfx/llama/engine.hpp>
#endif

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <stdexcept>

namespace pfx::cli {

bool llama_built() noexcept {
#ifdef PFX_CLI_LLAMA
  return true;
#else
  return false;
#endif
}

void add_llama_options(CLI::App& command, LlamaOptions& options) {
  command.add_option("--model", options.model, "--engine llama: the GGUF model file");
  command.add_option("--ubatch", options.ubatch, "--engine llama: llama.cpp's n_ubatch, at most --chunk (default: --chunk)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  command.add_option("--threads", options.threads, "--engine llama: threads (default 1: results do not depend on it, speed on a busy machine does)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1024}));
  command.add_option("--flash-attn", options.flash_attention, "--engine llama: flash attention on, off or auto")
      ->check(CLI::IsMember({"on", "off", "auto"}))->capture_default_str();
  command.add_option("--kv-type", options.kv_type, "--engine llama: the KV cache's element type")
      ->check(CLI::IsMember({"f16", "f32"}))->capture_default_str();
}

void check_llama_options_unused(const CLI::App& command, const std::string& engine) {
  if (engine == "llama") return;
  for (const char* name : {"--model", "--ubatch", "--threads", "--flash-attn", "--kv-type"}) {
    if (command.count(name) > 0) throw InputError(fmt::format("{} is an option of --engine llama, not of --engine {}", name, engine));
  }
}

LlamaEngine llama_engine(const LlamaOptions& options, std::size_t chunk) {
#ifdef PFX_CLI_LLAMA
  if (options.model.empty()) throw InputError("--engine llama needs --model PATH (a GGUF file)");
  llama::Settings settings{.model = options.model, .chunk = chunk, .ubatch = options.ubatch, .threads = options.threads,
                           .flash_attention = llama::parse_flash_attention(options.flash_attention),
                           .kv_type = llama::parse_kv_type(options.kv_type)};
  try {
    auto engine = std::make_unique<llama::Engine>(std::move(settings));
    std::string description = engine->describe();
    return {std::move(engine), std::move(description)};
  } catch (const llama::ModelError& e) {
    throw InputError(e.what());
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
#else
  (void)options;
  (void)chunk;
  throw InputError("--engine llama: this pfx was built without llama.cpp (run scripts/llama.sh, or point CMake at "
                   "your own with -Dllama_DIR=, then configure and build again; docs/integration.md)");
#endif
}

}  // namespace pfx::cli
