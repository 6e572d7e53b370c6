#pragma once

/// \file
/// pfx.Lane and pfx.verify (docs/python.md, "Serving with pfx.Lane", "Checking your engine end to
/// end"): the C++ Lane (driver/) and its end-to-end check over an engine written in Python, through
/// the one wrapper of python_engine.hpp.

#include <pybind11/pybind11.h>

namespace pfx::python {

/// Adds Lane, Response, verify and VerifyReport to the module, and the trace reader and mismatch
/// wording that pfx.integrations.vllm.verify shares with them (_read_trace, _describe_mismatches).
void add_serving(pybind11::module_& module);

}  // namespace pfx::python
