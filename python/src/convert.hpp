#pragma once

/// \file
/// Python values to the core's types, with errors that name the argument (and the index) so that a
/// caller can find the bad value. pybind11's own casters would answer a bad element with a generic
/// "incompatible function arguments", and silently accept values the core cannot represent.

#include <pfx/token.hpp>

#include <pybind11/pybind11.h>

#include <cstddef>
#include <string>
#include <vector>

namespace pfx::python {

/// Raises `type` (a Python exception class) with `message`.
[[noreturn]] void raise(PyObject* type, const std::string& message);

/// Any iterable of integers (int, or anything with __index__) that fit 32 bits. TypeError for an
/// argument that is not iterable or an element that is not an integer, OverflowError for one that
/// does not fit: "prompt[3]: 1099511627776 does not fit a 32-bit token id".
[[nodiscard]] std::vector<token> tokens(pybind11::handle items, const char* argument);

/// A count (an offset, canonical_end, keep_min, chunk): an integer >= 0 that fits std::size_t.
/// TypeError when not an integer, ValueError when negative, OverflowError when too large.
[[nodiscard]] std::size_t count(pybind11::handle value, const char* argument);

/// True or False, nothing else: TypeError otherwise (1, None and "no" are not flags).
[[nodiscard]] bool flag(pybind11::handle value, const char* argument);

}  // namespace pfx::python
