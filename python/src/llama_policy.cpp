#include "llama_policy.hpp"

#include "convert.hpp"

#include <pfx/llama/policy.hpp>

#include <pybind11/stl.h>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace py = pybind11;

namespace pfx::python {

void add_llama_policy(py::module_& module) {
  module.def(
      "_llama_exact_grid",
      [](py::handle n_batch, py::handle n_ubatch) {
        const std::size_t batch = count(n_batch, "n_batch");
        const std::size_t ubatch = count(n_ubatch, "n_ubatch");
        if (batch == 0 || ubatch == 0) throw py::value_error("n_batch and n_ubatch must be at least 1");
        return llama::exact_grid(batch, ubatch);
      },
      py::arg("n_batch"), py::arg("n_ubatch"));
  module.def(
      "_llama_unvouched",
      [](bool recurrent_or_hybrid, int n_swa, std::string multimodal, int gpu_layers) {
        return llama::unvouched({.recurrent_or_hybrid = recurrent_or_hybrid,
                                 .n_swa = n_swa,
                                 .multimodal = std::move(multimodal),
                                 .gpu_layers = gpu_layers});
      },
      py::kw_only(), py::arg("recurrent_or_hybrid") = false, py::arg("n_swa") = 0, py::arg("multimodal") = "",
      py::arg("gpu_layers") = 0);
  module.def(
      "_llama_resolve",
      [](py::handle n_batch, py::handle n_ubatch, bool flash_attention_off, py::handle chunk) {
        const llama::ContextFacts facts{.n_batch = count(n_batch, "n_batch"),
                                        .n_ubatch = count(n_ubatch, "n_ubatch"),
                                        .flash_attention_off = flash_attention_off};
        const auto shape =
            llama::resolve(facts, chunk.is_none() ? std::nullopt : std::optional(count(chunk, "chunk")));
        if (const auto* error = std::get_if<std::string>(&shape)) throw py::value_error(*error);
        const auto& resolved = std::get<llama::RuleShape>(shape);
        return std::make_pair(resolved.chunk, resolved.prefill_step);
      },
      py::arg("n_batch"), py::arg("n_ubatch"), py::kw_only(), py::arg("flash_attention_off"),
      py::arg("chunk") = py::none());
}

}  // namespace pfx::python
