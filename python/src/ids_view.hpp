#pragma once

/// \file
/// pfx.Ids: a read-only view, in O(1), of the ids a pfx.Machine holds. The sequence protocol (len,
/// index, slice, iteration, ==), and the buffer protocol (int32, read-only, no copy). While a buffer
/// is exported the machine refuses every event that would change the ids (BufferError), as a
/// bytearray refuses to resize. Any attempt to change the view raises TypeError naming record() and
/// clear().

#include "lane.hpp"

#include <Python.h>

namespace pfx::python {

/// Creates the type; call once at import. Returns a new reference, or nullptr with an error set.
PyObject* make_ids_type();

/// A view of `owner` (a Python pfx.Machine) whose C++ object is `lane`. New reference.
PyObject* make_ids_view(PyObject* ids_type, PyObject* owner, Lane* lane);

}  // namespace pfx::python
