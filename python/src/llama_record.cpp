#include "llama_record.hpp"

#include "convert.hpp"
#include "lane.hpp"

#include <pfx/llama/record.hpp>

#include <cstddef>
#include <span>

namespace py = pybind11;

namespace pfx::python {

void add_llama_record(py::module_& module) {
  // Every event may change the machine's ids: refused (BufferError) while a buffer of them is alive.
  module.def(
      "_llama_settle",
      [](Lane& record, py::handle held) {
        Tokens h(held, "held");
        llama::settle(unexported(record).machine, h.all());
      },
      py::arg("record"), py::arg("held"));
  module.def(
      "_llama_begin",
      [](Lane& record, py::handle held, py::handle prompt) {
        Tokens h(held, "held");
        Tokens p(prompt, "prompt");
        return llama::begin(unexported(record).machine, h.all(), p.all());
      },
      py::arg("record"), py::arg("held"), py::arg("prompt"));
  module.def(
      "_llama_commit", [](Lane& record) { llama::commit(unexported(record).machine); }, py::arg("record"));
  module.def(
      "_llama_abort", [](Lane& record) { llama::abort(unexported(record).machine); }, py::arg("record"));
  module.def(
      "_llama_forget_from",
      [](Lane& record, std::size_t row) { llama::forget_from(unexported(record).machine, row); },
      py::arg("record"), py::arg("row"));
}

}  // namespace pfx::python
