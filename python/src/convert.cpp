#include "convert.hpp"

#include <algorithm>
#include <cstdint>

namespace py = pybind11;

namespace pfx::python {
namespace {

std::string type_name(py::handle value) { return Py_TYPE(value.ptr())->tp_name; }

/// For messages: short, and never an error itself (a repr may raise, or be huge).
std::string shown(py::handle value) {
  constexpr std::size_t longest = 60;
  try {
    py::str text = py::repr(value);
    if (py::len(text) <= longest) return text.cast<std::string>();
    return py::str(text[py::slice(0, longest, 1)]).cast<std::string>() + "...";
  } catch (const std::exception&) {  // the repr raised, or is not valid UTF-8
    PyErr_Clear();
    return "<" + type_name(value) + ">";
  }
}

/// `value` as a Python int, via __index__ (so numpy integers and bools count, floats do not).
py::int_ as_int(py::handle value, const std::string& what) {
  if (PyIndex_Check(value.ptr()) == 0) {
    raise(PyExc_TypeError, what + " must be an integer, not " + type_name(value) + " (" + shown(value) + ")");
  }
  PyObject* integer = PyNumber_Index(value.ptr());
  if (integer == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::int_>(integer);
}

}  // namespace

void raise(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

std::vector<token> tokens(py::handle items, const char* argument) {
  PyObject* iterator = PyObject_GetIter(items.ptr());
  if (iterator == nullptr) {
    if (PyErr_ExceptionMatches(PyExc_TypeError) == 0) throw py::error_already_set();
    PyErr_Clear();
    raise(PyExc_TypeError, std::string(argument) + " must be a sequence of token ids, not " + type_name(items));
  }
  std::vector<token> out;
  // Only a hint (a class may claim any length), so the reservation is capped.
  out.reserve(std::min<std::size_t>(py::len_hint(items), std::size_t{1} << 20));
  for (py::handle item : py::reinterpret_steal<py::iterator>(iterator)) {
    const std::string what = std::string(argument) + "[" + std::to_string(out.size()) + "]";
    const py::int_ value = as_int(item, what);
    int overflow = 0;
    const long long id = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (id == -1 && PyErr_Occurred() != nullptr) throw py::error_already_set();
    if (overflow != 0 || id < INT32_MIN || id > INT32_MAX) {
      raise(PyExc_OverflowError, what + ": " + shown(value) + " does not fit a 32-bit token id");
    }
    out.push_back(static_cast<token>(id));
  }
  return out;
}

std::size_t count(py::handle value, const char* argument) {
  const py::int_ integer = as_int(value, argument);
  int overflow = 0;
  const long long small = PyLong_AsLongLongAndOverflow(integer.ptr(), &overflow);
  if (small == -1 && PyErr_Occurred() != nullptr) throw py::error_already_set();
  if (overflow < 0 || (overflow == 0 && small < 0)) {
    raise(PyExc_ValueError, std::string(argument) + " must be >= 0, not " + shown(integer));
  }
  const unsigned long long n = PyLong_AsUnsignedLongLong(integer.ptr());
  if (PyErr_Occurred() != nullptr || n > SIZE_MAX) {
    PyErr_Clear();
    raise(PyExc_OverflowError, std::string(argument) + ": " + shown(integer) + " does not fit 64 bits");
  }
  return static_cast<std::size_t>(n);
}

bool flag(py::handle value, const char* argument) {
  if (PyBool_Check(value.ptr()) == 0) {
    raise(PyExc_TypeError, std::string(argument) + " must be True or False, not " + type_name(value) + " (" +
                               shown(value) + ")");
  }
  return value.ptr() == Py_True;
}

}  // namespace pfx::python
