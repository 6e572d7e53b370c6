#pragma once

/// \file
/// The parse of llama.cpp's sequence state (pfx/llama/sequence_state.hpp, compiled in) for
/// pfx.integrations.llama_cpp, so that llama-cpp-python's engine reads its rows through the same
/// code as pfx::llama.

#include <pybind11/pybind11.h>

namespace pfx::python {

/// Adds _llama_rows_of_sequence_state and _llama_each_row_of_sequence_state to the module.
void add_llama_state(pybind11::module_& module);

}  // namespace pfx::python
