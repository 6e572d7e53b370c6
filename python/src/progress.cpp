// The `progress` argument of long Python runs (progress.hpp).

#include "progress.hpp"

namespace py = pybind11;

namespace pfx::python {

ProgressArgument::ProgressArgument(const py::object& progress, const char* unit, const std::string& caller) {
  if (progress.is_none()) {
    bar_ = py::module_::import("pfx._progress").attr("on_terminal")(unit);
    told_ = bar_;
  } else if (py::isinstance<py::bool_>(progress)) {
    if (progress.cast<bool>()) {
      throw py::type_error(caller + ": progress must be None (a bar on a terminal), False (none) or a callable "
                           "(done, total), not True");
    }
  } else if (PyCallable_Check(progress.ptr()) != 0) {
    told_ = progress;
  } else {
    throw py::type_error(caller + ": progress must be None (a bar on a terminal), False (none) or a callable "
                         "(done, total), not " + std::string(Py_TYPE(progress.ptr())->tp_name));
  }
}

ProgressArgument::~ProgressArgument() {
  if (bar_.is_none()) return;
  try {
    bar_.attr("close")();
  } catch (...) {  // a bar left on the terminal must not hide how the run ended
    PyErr_Clear();
  }
}

std::function<void(std::size_t, std::size_t)> ProgressArgument::callback() const {
  if (told_.is_none()) return {};
  return [this](std::size_t done, std::size_t total) { told_(done, total); };
}

}  // namespace pfx::python
