#pragma once

/// \file
/// The C++ object behind a Python pfx.Machine: the core's machine, and how many buffers of its ids
/// are exported (pfx.Ids' buffer protocol), so that no event moves the ids under a live memoryview.

#include "convert.hpp"

#include <pfx/machine.hpp>

#include <Python.h>

namespace pfx::python {

struct Lane {
  Machine machine;
  /// Buffers of machine.held().ids handed out (memoryview, numpy.asarray) and not yet released.
  Py_ssize_t exports = 0;

  Lane() = default;
  /// A copy starts with no exports (copying moves nothing: it is also pybind11's move).
  Lane(const Lane& other) : machine(other.machine) {}
  Lane& operator=(const Lane&) = delete;
  ~Lane() = default;
};

/// Raises BufferError when a buffer of the ids is alive: the event would change them under it.
inline Lane& unexported(Lane& self) {
  if (self.exports > 0) {
    raise(PyExc_BufferError,
          "the machine's ids are exported as a buffer (a memoryview or numpy array of ids is alive): "
          "release it (del it, or memoryview.release()) before an event that changes the ids");
  }
  return self;
}

}  // namespace pfx::python
