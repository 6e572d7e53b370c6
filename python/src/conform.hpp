#pragma once

/// \file
/// pfx.conform: the conformance check of pfx::conform (conform/, docs/conform.md) on an engine written
/// in Python (docs/python.md, "Checking an engine"), through the same C++ check as `pfx conform`.

#include <pybind11/pybind11.h>

namespace pfx::python {

/// Adds conform() and its report types to the module.
void add_conform(pybind11::module_& module);

}  // namespace pfx::python
