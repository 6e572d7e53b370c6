#pragma once

/// \file
/// The record that follows a llama.cpp context's KV cache (pfx/llama/record.hpp, header-only) for
/// pfx.integrations.llama_cpp, so that llama-cpp-python's rule keeps its record with the same code as
/// llama-server's slots. Each function takes the rule's pfx.Machine, the record itself.

#include <pybind11/pybind11.h>

namespace pfx::python {

/// Adds _llama_settle, _llama_begin, _llama_commit, _llama_abort and _llama_forget_from to the module.
void add_llama_record(pybind11::module_& module);

}  // namespace pfx::python
