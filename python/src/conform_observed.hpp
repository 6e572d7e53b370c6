#pragma once

/// \file
/// pfx._native.conform_observed: a conformance report (pfx::conform::Report) from what a check
/// written in Python saw of an engine it drives through its own cache (pfx.integrations.vllm.conform),
/// judged and printed by pfx::conform's one verdict and writers; with conform_budget,
/// conform_prompt_lengths and conform_offsets, the budgets, prompt lengths and offsets of
/// docs/conform.md.

#include <pybind11/pybind11.h>

namespace pfx::python {

/// Adds conform_observed(), conform_budget(), conform_prompt_lengths() and conform_offsets() to the
/// module.
void add_conform_observed(pybind11::module_& module);

}  // namespace pfx::python
