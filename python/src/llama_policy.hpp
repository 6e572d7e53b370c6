#pragma once

/// \file
/// pfx's rule on llama.cpp (pfx/llama/policy.hpp, header-only) for pfx.integrations.llama_cpp, so that
/// llama-cpp-python's rule takes the grid, the chunk and prefill step and the refusals from the same
/// code as llama-server's --pfx.

#include <pybind11/pybind11.h>

namespace pfx::python {

/// Adds _llama_exact_grid, _llama_unvouched and _llama_resolve to the module.
void add_llama_policy(pybind11::module_& module);

}  // namespace pfx::python
