#pragma once

/// \file
/// pfx's rule on llama.cpp, decided once for every front that serves it: llama-server's `--pfx`
/// (integrations/llama_server/pfx_server.cpp) and llama-cpp-python's `Llama`
/// (pfx.integrations.llama_cpp.rule, through the native module). Header-only, pfx's core and the
/// standard library only, no llama.cpp: each front reads its context's facts its own way and asks
/// here what follows from them. The words of each refusal are the cause; the front says who refuses
/// and what the user can do instead (docs/engines.md, "llama.cpp").

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace pfx::llama {

/// The finest grid on which a resume computes every ubatch where a cold run does: n_ubatch when it
/// divides n_batch (each call then splits on the n_ubatch grid), n_batch otherwise (the ubatch grid
/// restarts at each call). Both at least 1.
[[nodiscard]] constexpr std::size_t exact_grid(std::size_t n_batch, std::size_t n_ubatch) noexcept {
  return n_batch % n_ubatch == 0 ? n_ubatch : n_batch;
}

/// What a context is, as far as the rule's premises go.
struct ContextFacts {
  std::size_t n_batch = 0;           ///< llama_n_batch: a prompt is added in calls of this many tokens
  std::size_t n_ubatch = 0;          ///< llama_n_ubatch: llama.cpp splits each call into these
  bool flash_attention_off = false;  ///< asked off; auto is taken as on (llama.cpp does not say what it chose)
  /// ggml's CPU backend on its reference paths (GGML_CPU_USE_REF, ggml-cpu.patch): a row's bits do not
  /// depend on the ubatch or batch that holds it.
  bool batch_invariant = false;
  bool recurrent_or_hybrid = false;  ///< llama_model_is_recurrent or _is_hybrid
  int n_swa = 0;                     ///< the model's sliding window; 0: none
  /// What writes multimodal rows into the context ("--mmproj", "the chat handler Llava15ChatHandler"); "" none.
  std::string multimodal{};
  int gpu_layers = 0;                ///< layers offloaded to a GPU on a build that supports it (-1: all); else 0
};

/// The chunk and prefill step the rule takes (pfx::Config's).
struct RuleShape {
  std::size_t chunk = 1;
  std::size_t prefill_step = 0;
  friend bool operator==(const RuleShape&, const RuleShape&) = default;
};

/// What the rule cannot vouch for in `facts`, the first cause in words; "" when nothing. Each front
/// adds who refuses and what to do instead.
[[nodiscard]] inline std::string unvouched(const ContextFacts& facts) {
  if (facts.recurrent_or_hybrid) return "the model is recurrent or hybrid: its state is not rows that a prefix can keep";
  if (facts.n_swa > 0) {
    return "the model uses sliding-window attention (n_swa " + std::to_string(facts.n_swa) +
           "): its cache drops rows a resume needs and restores them from checkpoints";
  }
  if (!facts.multimodal.empty()) return facts.multimodal + " writes image and audio rows into the context through its encoder";
  if (facts.gpu_layers != 0) {
    return (facts.gpu_layers < 0 ? std::string("every layer") : std::to_string(facts.gpu_layers) + " layers") +
           " offloaded to a GPU, where pfx has measured nothing (only llama.cpp's CPU build, docs/engines.md)";
  }
  return "";
}

/// The rule's chunk and prefill step for `facts`, `asked` the chunk a user gave as `chunk_name` (none:
/// the default), or the words of why it cannot: n_batch or n_ubatch of 0, or `asked` off the grid
/// (0 included). Call it where unvouched(facts) is "".
///  - batch invariant: every row is computed alone, so a resume at any offset is exact: chunk 1 (or
///    the one asked), no step;
///  - flash attention off and n_batch a multiple of n_ubatch: only a ubatch of one row computes a row
///    otherwise, and only a prefill's last ubatch can be short (docs/engines.md, "Under the prefill
///    step"): chunk 1 with the prefill step n_ubatch;
///  - otherwise the grid, no step. A chunk asked for must be a multiple of the grid; it is then taken
///    without a step.
[[nodiscard]] inline std::variant<RuleShape, std::string> resolve(const ContextFacts& facts,
                                                                  std::optional<std::size_t> asked,
                                                                  std::string_view chunk_name = "chunk") {
  if (facts.n_batch == 0 || facts.n_ubatch == 0) return "n_batch and n_ubatch must be at least 1";
  const std::size_t grid = facts.batch_invariant ? 1 : exact_grid(facts.n_batch, facts.n_ubatch);
  if (asked && (*asked == 0 || *asked % grid != 0)) {
    return std::string(chunk_name) + " " + std::to_string(*asked) + " is not a multiple of the grid " +
           std::to_string(grid) + " on which llama.cpp resumes exactly (" +
           (facts.batch_invariant ? std::string("every row computed alone")
                                  : "n_batch " + std::to_string(facts.n_batch) + ", n_ubatch " + std::to_string(facts.n_ubatch)) +
           "); use a multiple of " + std::to_string(grid);
  }
  if (asked) return RuleShape{*asked, 0};
  if (facts.batch_invariant) return RuleShape{1, 0};
  const bool step = facts.flash_attention_off && facts.n_batch % facts.n_ubatch == 0;
  return step ? RuleShape{1, facts.n_ubatch} : RuleShape{grid, 0};
}

}  // namespace pfx::llama
