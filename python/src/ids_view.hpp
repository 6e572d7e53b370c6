#pragma once

/// \file
/// pfx.Ids: a read-only view, in O(1), of the ids a pfx.Machine holds. The sequence protocol (len,
/// index, slice, iteration, ==), and the buffer protocol (int32, read-only, no copy). While a buffer
/// is exported the machine refuses every event that would change the ids (BufferError), as a
/// bytearray refuses to resize. Any attempt to change the view raises TypeError naming record() and
/// clear().

#include "lane.hpp"

#include <pfx/token.hpp>

#include <Python.h>

#include <cstddef>

namespace pfx::python {

/// Creates the type; call once at import. Returns a new reference, or nullptr with an error set.
PyObject* make_ids_type();

/// The ids `object` shows when it is a pfx.Ids view, else nullptr (then `size` is untouched).
const token* ids_of_view(PyObject* object, std::size_t& size);

/// A view of `owner` (a Python pfx.Machine) whose C++ object is `lane`. New reference.
PyObject* make_ids_view(PyObject* view_type, PyObject* owner, Lane* lane);

}  // namespace pfx::python
