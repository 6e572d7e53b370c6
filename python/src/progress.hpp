#pragma once

/// \file
/// The `progress` argument of pfx.conform and pfx.verify (docs/python.md): None, the `pfx` program's
/// bar on standard error when it is a terminal (pfx._progress) and nothing otherwise; False, nothing;
/// or a callable, called with (done, total).

#include <pybind11/pybind11.h>

#include <cstddef>
#include <functional>
#include <string>

namespace pfx::python {

class ProgressArgument {
 public:
  /// TypeError naming `caller` for anything else. `unit` names what the bar counts ("prompts").
  ProgressArgument(const pybind11::object& progress, const char* unit, const std::string& caller);
  /// Erases the bar, if drawn, however the run ended.
  ~ProgressArgument();
  ProgressArgument(const ProgressArgument&) = delete;
  ProgressArgument& operator=(const ProgressArgument&) = delete;
  ProgressArgument(ProgressArgument&&) = delete;
  ProgressArgument& operator=(ProgressArgument&&) = delete;

  /// What a C++ run tells of its progress: an empty function when nothing is to be told. It refers
  /// to this object, which must outlive the run.
  [[nodiscard]] std::function<void(std::size_t, std::size_t)> callback() const;

 private:
  pybind11::object told_ = pybind11::none();
  pybind11::object bar_ = pybind11::none();
};

}  // namespace pfx::python
