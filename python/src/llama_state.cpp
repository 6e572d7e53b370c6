#include "llama_state.hpp"

#include <pfx/llama/sequence_state.hpp>

#include <pybind11/stl.h>

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace py = pybind11;

namespace pfx::python {
namespace {

std::span<const std::byte> bytes_of(const py::bytes& state) {
  const std::string_view view = state;
  return std::as_bytes(std::span(view.data(), view.size()));
}

py::bytes to_bytes(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

/// A format the parse does not know is a ValueError, as Python's parsers say so.
template <class Parse>
auto parsed(Parse parse) {
  try {
    return parse();
  } catch (const std::runtime_error& e) {
    throw py::value_error(e.what());
  }
}

}  // namespace

void add_llama_state(py::module_& module) {
  module.def(
      "_llama_rows_of_sequence_state",
      [](const py::bytes& state, std::size_t start, std::size_t end) {
        return to_bytes(parsed([&] { return llama::rows_of_sequence_state(bytes_of(state), start, end); }));
      },
      py::arg("state"), py::arg("start"), py::arg("end"));
  module.def(
      "_llama_each_row_of_sequence_state",
      [](const py::bytes& state, std::size_t start, std::size_t end) {
        py::list rows;
        parsed([&] {
          llama::for_each_row_of_sequence_state(bytes_of(state), start, end,
                                                [&rows](std::size_t, std::span<const std::byte> row) { rows.append(to_bytes(row)); });
        });
        return rows;
      },
      py::arg("state"), py::arg("start"), py::arg("end"));
}

}  // namespace pfx::python
