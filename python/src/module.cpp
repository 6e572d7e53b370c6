// pfx._native: pfx::core's Machine and its types, and the driver's one reading of the environment.
// Every argument arrives as a Python object and goes through convert.hpp, so that a bad value gets
// an error naming it; a refused event raises pfx.Refused and, as in the core, changes nothing.

#include "convert.hpp"

#include <pfx/core.hpp>
#include <pfx/driver/environment.hpp>
#include <pfx/driver/errors.hpp>

#include <pybind11/operators.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <string_view>

namespace py = pybind11;

namespace pfx::python {
namespace {

// The exception classes, created once at import and kept for the life of the process (never
// released: the interpreter may tear the module down before static destructors run).
PyObject* refused_error = nullptr;
PyObject* config_error = nullptr;

/// pfx.Refused(describe(refusal)), with .refusal = name(refusal).
[[noreturn]] void raise_refused(Refusal refusal) {
  py::object error = py::reinterpret_borrow<py::object>(refused_error)(std::string(describe(refusal)));
  error.attr("refusal") = std::string(name(refusal));
  PyErr_SetObject(refused_error, error.ptr());
  throw py::error_already_set();
}

/// The decision of an accepted query or begin; raises pfx.Refused otherwise.
Decision accepted(const Outcome& outcome) {
  if (!outcome.accepted()) raise_refused(outcome.refusal);
  return outcome.decision;
}

template <class T>
const T& instance(py::handle value, const char* argument, const char* type) {
  if (!py::isinstance<T>(value)) {
    raise(PyExc_TypeError, std::string(argument) + " must be a " + type + ", not " + Py_TYPE(value.ptr())->tp_name);
  }
  return value.cast<const T&>();
}

std::string python_bool(bool value) { return value ? "True" : "False"; }

std::string repr(const Config& c) {
  return "Config(enabled=" + python_bool(c.enabled) + ", keep_min=" + std::to_string(c.keep_min) +
         ", chunk=" + std::to_string(c.chunk) + ")";
}

std::string repr(const Decision& d) {
  return "Decision(offset=" + std::to_string(d.offset) + ", common_prefix=" + std::to_string(d.common_prefix) +
         ", reason=Reason." + py::cast(d.reason).attr("name").cast<std::string>() +
         ", bound=Bound." + py::cast(d.bound).attr("name").cast<std::string>() + ")";
}

py::list to_list(const std::vector<token>& ids) {
  py::list out(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) out[i] = py::int_(ids[i]);
  return out;
}

/// The environment value as text (None: unset). Bytes are accepted so that any value os.environb
/// holds can be passed, even one that is not valid UTF-8.
std::optional<std::string> environment_value(py::handle value, const char* variable) {
  if (value.is_none()) return std::nullopt;
  if (!py::isinstance<py::str>(value) && !py::isinstance<py::bytes>(value)) {
    raise(PyExc_TypeError, std::string(variable) + " must be a str, bytes or None");
  }
  return value.cast<std::string>();
}

}  // namespace
}  // namespace pfx::python

PYBIND11_MODULE(_native, m) {
  using namespace pfx::python;
  using pfx::Bound;
  using pfx::Config;
  using pfx::Decision;
  using pfx::Machine;
  using pfx::Phase;
  using pfx::Reason;

  m.doc() = "pfx::core's Machine and its types (import pfx, not this module)";

  refused_error = PyErr_NewExceptionWithDoc(
      "pfx.Refused", "The machine refused an event and changed nothing; .refusal names why.", PyExc_ValueError,
      nullptr);
  config_error = PyErr_NewExceptionWithDoc(
      "pfx.ConfigError", "A malformed setting; the message names the variable.", PyExc_ValueError, nullptr);
  if (refused_error == nullptr || config_error == nullptr) throw py::error_already_set();
  m.attr("Refused") = py::handle(refused_error);
  m.attr("ConfigError") = py::handle(config_error);
  // pybind11 takes a plain function pointer of this exact signature, so the parameter is by value.
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const pfx::driver::ConfigError& e) {
      PyErr_SetString(config_error, e.what());
    }
  });

  py::enum_<Reason>(m, "Reason", "What decided a Decision (docs/spec.md, \"The rule\").")
      .value("reused", Reason::reused)
      .value("disabled", Reason::disabled)
      .value("empty_record", Reason::empty_record)
      .value("nothing_reusable", Reason::nothing_reusable)
      .value("below_keep_min", Reason::below_keep_min);
  py::enum_<Bound>(m, "Bound", "Which bound cut the reusable length (docs/spec.md, \"The rule\").")
      .value("none", Bound::none)
      .value("common_prefix", Bound::common_prefix)
      .value("canonical_end", Bound::canonical_end)
      .value("one_token_left", Bound::one_token_left)
      .value("alignment", Bound::alignment);
  py::enum_<Phase>(m, "Phase", "Whether a request is being written (between begin and commit or abort).")
      .value("idle", Phase::idle)
      .value("writing", Phase::writing);

  py::class_<Config>(m, "Config", "The rule's knobs: Config(enabled=True, keep_min=64, chunk=1), the seed's defaults.")
      .def(py::init([](py::handle enabled, py::handle keep_min, py::handle chunk) {
             return Config{flag(enabled, "enabled"), count(keep_min, "keep_min"), count(chunk, "chunk")};
           }),
           py::arg("enabled") = true, py::arg("keep_min") = 64, py::arg("chunk") = 1)
      .def_property(
          "enabled", [](const Config& c) { return c.enabled; },
          [](Config& c, py::handle v) { c.enabled = flag(v, "enabled"); })
      .def_property(
          "keep_min", [](const Config& c) { return c.keep_min; },
          [](Config& c, py::handle v) { c.keep_min = count(v, "keep_min"); })
      .def_property(
          "chunk", [](const Config& c) { return c.chunk; }, [](Config& c, py::handle v) { c.chunk = count(v, "chunk"); })
      .def(py::self == py::self)  // NOLINT(misc-redundant-expression): pybind11's operator idiom
      .def("__repr__", [](const Config& c) { return repr(c); });

  py::class_<Decision>(m, "Decision", "The answer to a query: offset, common_prefix, reason, bound.")
      .def(py::init([](py::handle offset, py::handle common_prefix, py::handle reason, py::handle bound) {
             return Decision{count(offset, "offset"), count(common_prefix, "common_prefix"),
                             instance<Reason>(reason, "reason", "pfx.Reason"),
                             instance<Bound>(bound, "bound", "pfx.Bound")};
           }),
           py::arg("offset") = 0, py::arg("common_prefix") = 0, py::arg("reason") = Reason::disabled,
           py::arg("bound") = Bound::none)
      // By value: a Decision is small, and a result must not keep its source alive.
      .def_property_readonly("offset", [](const Decision& d) { return d.offset; })
      .def_property_readonly("common_prefix", [](const Decision& d) { return d.common_prefix; })
      .def_property_readonly("reason", [](const Decision& d) { return d.reason; })
      .def_property_readonly("bound", [](const Decision& d) { return d.bound; })
      .def(py::self == py::self)  // NOLINT(misc-redundant-expression): pybind11's operator idiom
      .def("__repr__", [](const Decision& d) { return repr(d); });

  py::class_<Machine>(m, "Machine", "The prefix-reuse state machine (docs/spec.md, \"The protocol\").")
      .def(py::init([](py::handle config) {
             Machine machine;
             if (!config.is_none()) accepted(machine.configure(instance<Config>(config, "config", "pfx.Config")));
             return machine;
           }),
           py::arg("config") = py::none())
      .def(
          "query", [](const Machine& self, py::handle prompt) { return accepted(self.query(tokens(prompt, "prompt"))); },
          py::arg("prompt"), "The decision for prompt. Idle only.")
      .def(
          "begin",
          [](Machine& self, py::handle prompt, py::handle offset) {
            const std::vector<pfx::token> p = tokens(prompt, "prompt");
            return accepted(self.begin(p, count(offset, "offset")));
          },
          py::arg("prompt"), py::arg("offset"),
          "Start writing prompt from offset (0 or the granted offset); the record shrinks to ids[0:offset).")
      .def(
          "commit",
          [](Machine& self, py::handle ids, py::handle canonical_end) {
            const std::vector<pfx::token> i = tokens(ids, "ids");
            accepted(self.commit(i, count(canonical_end, "canonical_end")));
          },
          py::arg("ids"), py::arg("canonical_end"), "Publish ids = prompt + generated, canonical_end = len(prompt).")
      .def(
          "abort", [](Machine& self) { accepted(self.abort()); }, "The request failed; keep ids[0:offset).")
      .def(
          "record",
          [](Machine& self, py::handle ids, py::handle canonical_end) {
            const std::vector<pfx::token> i = tokens(ids, "ids");
            accepted(self.record(i, count(canonical_end, "canonical_end")));
          },
          py::arg("ids"), py::arg("canonical_end"), "The seed's one-shot publish. Idle only.")
      .def(
          "clear", [](Machine& self) { accepted(self.clear()); }, "Forget everything held. Any phase.")
      .def(
          "configure",
          [](Machine& self, py::handle config) {
            accepted(self.configure(instance<Config>(config, "config", "pfx.Config")));
          },
          py::arg("config"), "Change the knobs. Idle only; turning reuse off forgets what is held.")
      .def(
          "reserve", [](Machine& self, py::handle tokens) { self.reserve(count(tokens, "tokens")); },
          py::arg("tokens"), "Keep room for this many ids, so that records within it never allocate.")
      .def_property_readonly("config", [](const Machine& self) { return self.config(); })
      .def_property_readonly("ids", [](const Machine& self) { return to_list(self.held().ids); },
                             "A copy of the ids held: changing it changes nothing.")
      .def_property_readonly("canonical_end", [](const Machine& self) { return self.held().canonical_end; })
      .def_property_readonly("phase", &Machine::phase)
      .def_property_readonly("begin_offset", &Machine::begin_offset)
      .def_property_readonly("capacity", &Machine::capacity)
      .def_property_readonly("memory_bytes", &Machine::memory_bytes)
      .def(py::self == py::self)  // NOLINT(misc-redundant-expression): pybind11's operator idiom
      .def("__repr__", [](const Machine& self) {
        return "Machine(config=" + repr(self.config()) + ", phase=Phase." +
               py::cast(self.phase()).attr("name").cast<std::string>() +
               ", len(ids)=" + std::to_string(self.held().ids.size()) +
               ", canonical_end=" + std::to_string(self.held().canonical_end) + ")";
      });

  m.def(
      "decide",
      [](py::handle config, py::handle ids, py::handle canonical_end, py::handle prompt) {
        const Config& c = instance<Config>(config, "config", "pfx.Config");
        if (c.chunk == 0) raise_refused(pfx::Refusal::chunk_zero);  // the rule's precondition (INV-9)
        const std::vector<pfx::token> i = tokens(ids, "ids");
        const std::size_t end = count(canonical_end, "canonical_end");
        return pfx::decide(c, i, end, tokens(prompt, "prompt"));
      },
      py::arg("config"), py::arg("ids"), py::arg("canonical_end"), py::arg("prompt"),
      "The offset rule alone, without a machine.");
  m.def(
      "common_prefix",
      [](py::handle a, py::handle b) { return pfx::common_prefix(tokens(a, "a"), tokens(b, "b")); },
      py::arg("a"), py::arg("b"), "How many leading tokens a and b share.");
  m.def(
      "apply_environment",
      [](py::handle config, py::handle prefix_cache, py::handle prefix_cache_min) {
        Config c = instance<Config>(config, "config", "pfx.Config");
        const std::optional<std::string> cache = environment_value(prefix_cache, "prefix_cache");
        const std::optional<std::string> cache_min = environment_value(prefix_cache_min, "prefix_cache_min");
        c = pfx::driver::apply_environment(
            c, cache ? std::optional<std::string_view>(*cache) : std::nullopt,
            cache_min ? std::optional<std::string_view>(*cache_min) : std::nullopt);
        return c;
      },
      py::arg("config"), py::arg("prefix_cache"), py::arg("prefix_cache_min"),
      "config with the values of TF_GLM53_PREFIX_CACHE and TF_GLM53_PREFIX_CACHE_MIN applied (None: unset);"
      " a malformed value raises pfx.ConfigError naming the variable.");
}
