#include <pfx/cli/engine_option.hpp>

#include <pfx/cli/command.hpp>
#include <pfx/driver/cuda.hpp>
#include <pfx/engines/blocked_attention_engine.hpp>
#include <pfx/engines/dcp_reference_engine.hpp>
#include <pfx/engines/dcp_reference_engine_on_device.hpp>
#include <pfx/engines/decisions_only_engine.hpp>
#include <pfx/engines/host_reference_engine.hpp>
#include <pfx/engines/nondeterministic_engine.hpp>
#include <pfx/engines/reference_engine_on_device.hpp>
#ifdef PFX_CLI_LLAMA
#include <pfx/llama/engine.hpp>
#endif

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>

namespace pfx::cli {
namespace {

#ifdef PFX_CLI_LLAMA
/// Decode steps of each request in conform's batching finding on llama.cpp.
constexpr std::size_t kBatchingSteps = 4;
#endif

ChosenEngine llama_engine(const EngineChoice::Llama& options, std::size_t chunk) {
#ifdef PFX_CLI_LLAMA
  if (options.model.empty()) throw InputError("--engine llama needs --model PATH (a GGUF file)");
  llama::Settings settings{.model = options.model, .chunk = chunk, .ubatch = options.ubatch, .threads = options.threads,
                           .flash_attention = llama::parse_flash_attention(options.flash_attention),
                           .kv_type = llama::parse_kv_type(options.kv_type), .verbose = options.verbose};
  try {
    auto engine = std::make_unique<llama::Engine>(std::move(settings));
    std::string description = engine->describe();
    const std::size_t context = engine->trained_context();
    const llama::Engine& served = *engine;
    // A few decode steps as well: a request's answer is its prefill's logits and its steps', as a
    // server's slots decode them together.
    auto together = [&served](const std::vector<std::vector<token>>& prompts) {
      return served.serve_together(prompts, kBatchingSteps);
    };
    auto certify = [&served](const std::string& report_json) {
      return llama::certificate(llama::configuration(served.served()), report_json);
    };
    return {std::move(engine), std::move(description), context, together, certify};
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

/// InputError with CUDA's reason when `--engine cuda` cannot run here.
void require_cuda() {
  const std::string why_not = driver::cuda::unavailable_reason();
  if (!why_not.empty()) throw InputError(fmt::format("--engine cuda: {}", why_not));
}

/// "reference engine (vocab V, width W, L layers, chunk C)".
std::string describe_model(const engines::ReferenceModelShape& shape) {
  return fmt::format("reference engine (vocab {}, width {}, {} layers, chunk {})", shape.vocab, shape.width,
                     shape.layers, shape.chunk);
}

}  // namespace

void add_engine_option(CLI::App& command, EngineChoice& choice) {
  command.add_option("--engine", choice.name,
                     fmt::format("The engine: {} (docs/cli.md, \"Engines\")", fmt::join(engine_names(), ", ")))
      ->check(CLI::IsMember(engine_names()))
      ->capture_default_str();
  EngineChoice::Llama& llama = choice.llama;
  command.add_option("--model", llama.model, "--engine llama: the GGUF model file");
  command.add_option("--ubatch", llama.ubatch, "--engine llama: llama.cpp's n_ubatch, at most --chunk (default: --chunk)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  command.add_option("--threads", llama.threads, "--engine llama: threads (default 1: results do not depend on it, speed on a busy machine does)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1024}));
  command.add_option("--flash-attn", llama.flash_attention, "--engine llama: flash attention on, off or auto")
      ->check(CLI::IsMember({"on", "off", "auto"}))->capture_default_str();
  command.add_option("--kv-type", llama.kv_type, "--engine llama: the KV cache's element type")
      ->check(CLI::IsMember({"f16", "f32"}))->capture_default_str();
  command.add_flag("--verbose", llama.verbose, "--engine llama: print llama.cpp's own log lines (default: none)");
}

void check_llama_options_unused(const CLI::App& command, const EngineChoice& choice) {
  if (choice.name == "llama") return;
  for (const char* name : {"--model", "--ubatch", "--threads", "--flash-attn", "--kv-type", "--verbose"}) {
    if (command.count(name) > 0) {
      throw InputError(fmt::format("{} is an option of --engine llama, not of --engine {}", name, choice.name));
    }
  }
}

std::size_t lane_capacity(const ChosenEngine& engine, std::size_t capacity, bool capacity_given) {
  if (engine.context == 0) return capacity;
  return capacity_given ? std::min(capacity, engine.context) : engine.context;
}

ChosenEngine make_engine(const EngineChoice& choice, const engines::ReferenceModelShape& shape) {
  const std::string& name = choice.name;
  if (name == "llama") return llama_engine(choice.llama, shape.chunk);
  if (name == "none") {
    return {std::make_unique<engines::DecisionsOnlyEngine>(shape.chunk, shape.vocab),
            fmt::format("no engine (decisions only: chunk {}, vocab {})", shape.chunk, shape.vocab)};
  }
  const std::string model = describe_model(shape);
  try {
    if (name == "reference") return {std::make_unique<engines::HostReferenceEngine>(shape), "host " + model};
    if (name == "blocked-attention") {
      return {std::make_unique<engines::BlockedAttentionEngine>(shape), "host blocked-attention " + model};
    }
    if (name == "nondeterministic") {
      return {std::make_unique<engines::NondeterministicEngine>(shape), "host nondeterministic " + model};
    }
    if (name == "cuda") {
      require_cuda();
      return {std::make_unique<engines::cuda::ReferenceEngineOnDevice>(shape), "CUDA " + model};
    }
  } catch (const std::invalid_argument& e) {  // a shape the engine refuses
    throw InputError(e.what());
  }
  throw InputError(fmt::format("--engine {}: unknown engine; the engines are {}", name, fmt::join(engine_names(), ", ")));
}

bool has_dcp_form(const std::string& engine) { return engine == "reference" || engine == "cuda"; }

ChosenEngine make_engine(const EngineChoice& choice, const engines::ReferenceModelShape& shape, const Dcp& dcp) {
  const std::string layout = fmt::format("decode context parallel over {} ranks, interleave {}", dcp.layout.ranks,
                                         dcp.layout.interleave);
  if (!has_dcp_form(choice.name)) {
    if (dcp.group != nullptr) {
      throw InputError(fmt::format("--engine {} has no decode-context-parallel form: under mpirun each rank holds "
                                   "its own KV rows alone, which only --engine reference and --engine cuda attend "
                                   "to (run it in one process with --dcp N to shard its state there)",
                                   choice.name));
    }
    return make_engine(choice, shape);
  }
  try {
    if (choice.name == "cuda") {
      require_cuda();
      return {std::make_unique<engines::cuda::DcpReferenceEngineOnDevice>(shape, dcp.layout, dcp.group),
              fmt::format("CUDA {}, {}", describe_model(shape), layout)};
    }
    return {std::make_unique<engines::DcpReferenceEngine>(shape, dcp.layout, dcp.group),
            fmt::format("host {}, {}", describe_model(shape), layout)};
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
}

}  // namespace pfx::cli
