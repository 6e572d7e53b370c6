#pragma once

/// \file
/// The one `--engine` option of `pfx replay`, `pfx soak` and `pfx conform` (docs/cli.md, "Engines"):
/// one vocabulary, one factory, and the options of llama.cpp's engine that go with it (--model,
/// --ubatch, --threads, --flash-attn, --kv-type, --verbose; docs/engines.md). A command that cannot use an
/// engine (soak and conform: none) says why. In a pfx built without llama.cpp the llama options
/// exist and `--engine llama` is an InputError that says so.

#include <pfx/driver/collective.hpp>
#include <pfx/driver/engine.hpp>
#include <pfx/driver/shard_layout.hpp>
#include <pfx/engines/reference_model.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace pfx::cli {

/// Every engine a command may run, by the name `--engine` takes:
///   reference          the reference model on the host (engines::HostReferenceEngine)
///   blocked-attention  the reference model whose attention is tiled by the call (THM-1's counterexample class)
///   nondeterministic   the reference model whose reduction order changes per call
///   cuda               the reference model on a CUDA device (bad input where no device is usable)
///   none               no model: decisions only, no KV state (replay)
///   llama              llama.cpp on --model (its vocabulary replaces --vocab)
inline const std::vector<std::string>& engine_names() {
  static const std::vector<std::string> names = {"reference", "blocked-attention", "nondeterministic",
                                                 "cuda",      "none",              "llama"};
  return names;
}

/// What `--engine` chose, and llama.cpp's options for when it chose llama.
struct EngineChoice {
  std::string name = "reference";
  struct Llama {
    std::string model;          ///< --model: a GGUF file
    std::size_t ubatch = 0;     ///< --ubatch: llama.cpp's n_ubatch; 0: the chunk
    std::size_t threads = 0;    ///< --threads; 0: one
    std::string flash_attention = "auto";
    std::string kv_type = "f16";
    bool verbose = false;       ///< --verbose: llama.cpp's own log lines
  } llama;
};

/// An engine and the words the commands print for it ("host reference engine (vocab 64, ...)").
struct ChosenEngine {
  std::unique_ptr<driver::Engine> engine;
  std::string description;
  std::size_t context = 0;  ///< the most rows a KV state may hold (llama: the model's trained context); 0: no bound
  /// An engine that serves several requests in one batch (llama: its slots' way, a KV stream each):
  /// conform's batching finding (conform::CheckOptions::serve_together); empty for the others.
  std::function<std::vector<std::vector<float>>(const std::vector<std::vector<token>>&)> serve_together{};
  /// The certificate of the configuration the engine computes on, from a conform report's JSON
  /// (llama: pfx/llama/certificate.hpp, what llama-server --pfx-certificate reads); empty for the others.
  std::function<std::string(const std::string&)> certify{};
};

/// The KV rows a run's lane holds: --capacity on an engine without a context of its own; on one with
/// (llama), its context, capped by --capacity when given (so that a model's state is sized by the
/// model, not by the default capacity).
[[nodiscard]] std::size_t lane_capacity(const ChosenEngine& engine, std::size_t capacity, bool capacity_given);

/// Adds --engine (engine_names(), default reference) and llama.cpp's options to `command`.
void add_engine_option(CLI::App& command, EngineChoice& choice);

/// Throws InputError when llama.cpp's options were given but the engine is not llama.
void check_llama_options_unused(const CLI::App& command, const EngineChoice& choice);

/// The chosen engine: the reference model of `shape` on the host (reference, blocked-attention,
/// nondeterministic) or on a device (cuda), decisions only (none: shape's chunk and vocab), or
/// llama.cpp (llama: shape.chunk is its n_batch). Throws InputError for a shape the engine refuses,
/// for cuda where no device is usable, and for llama when pfx was built without llama.cpp, when
/// --model is missing, unreadable or not a model, or for a --ubatch above the chunk.
[[nodiscard]] ChosenEngine make_engine(const EngineChoice& choice, const engines::ReferenceModelShape& shape);

/// Decode context parallelism: the layout of the KV rows, and this rank's end of the group where
/// each rank is a process of its own (under mpirun); null: one process drives every rank.
struct Dcp {
  driver::ShardLayout layout;
  driver::Collective* group = nullptr;
};

/// Whether `--engine NAME` has a decode-context-parallel form: reference and cuda.
[[nodiscard]] bool has_dcp_form(const std::string& engine);

/// make_engine for `dcp`'s layout: the reference engine is engines::DcpReferenceEngine and the CUDA
/// one engines::cuda::DcpReferenceEngineOnDevice (its device rank mod the visible devices under
/// mpirun), each rank attending its own rows. Another engine has no decode-context-parallel form: in one process it is
/// returned as make_engine makes it (the replay shards its state, and its attention reads every row),
/// and with a group it is an InputError, since each rank would hold every row.
[[nodiscard]] ChosenEngine make_engine(const EngineChoice& choice, const engines::ReferenceModelShape& shape,
                                       const Dcp& dcp);

}  // namespace pfx::cli
