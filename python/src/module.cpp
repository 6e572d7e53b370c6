// pfx._native: pfx::core's Machine and its types, and the one reading of the environment
// (driver/src/environment.cpp, compiled in: the module does not link the driver). Every argument
// arrives as a Python object and goes through convert.hpp, so that a bad value gets an error naming
// it; a refused event raises pfx.Refused and, as in the core, changes nothing.

#include "conform.hpp"
#include "conform_observed.hpp"
#include "serving.hpp"
#include "convert.hpp"
#include "ids_view.hpp"
#include "llama_policy.hpp"
#include "llama_record.hpp"
#include "llama_state.hpp"

#include <pfx/core.hpp>
#include <pfx/driver/environment.hpp>
#include <pfx/driver/errors.hpp>

#include <pybind11/pytypes.h>

#include <pybind11/operators.h>
#include <pybind11/pybind11.h>

#include <cstring>
#include <optional>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace py = pybind11;

namespace pfx::python {
namespace {

// The exception classes, created once at import and kept for the life of the process (never
// released: the interpreter may tear the module down before static destructors run).
PyObject* refused_error = nullptr;
PyObject* config_error = nullptr;
PyObject* ids_type = nullptr;

PyObject* check(PyObject* result) {
  if (result == nullptr) throw py::error_already_set();
  return result;
}

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
         ", chunk=" + std::to_string(c.chunk) + ", prefill_step=" + std::to_string(c.prefill_step) +
         ", admission_padding=" + std::to_string(c.admission_padding) +
         ", decode_rows_exact=" + python_bool(c.decode_rows_exact) + ")";
}

/// The prompt the rule reads: without a prefill step it depends on a prompt only through lcp(held,
/// prompt) and, when the prompt is a prefix of held, its length, so the ids after the first that
/// differs are not read (convert.hpp); with one it depends on the prompt's length (INV-12), so the
/// whole prompt is read and checked.
std::span<const token> rule_prompt(Tokens& prompt, const Config& config, std::span<const token> held) {
  return config.prefill_step == 0 ? prompt.through_first_difference(held) : prompt.all();
}

std::string repr(const Decision& d) {
  return "Decision(offset=" + std::to_string(d.offset) + ", common_prefix=" + std::to_string(d.common_prefix) +
         ", reason=Reason." + py::cast(d.reason).attr("name").cast<std::string>() +
         ", bound=Bound." + py::cast(d.bound).attr("name").cast<std::string>() + ")";
}

/// The Python Machine's state for pickle: (version 4, enabled, keep_min, chunk, ids as int32 bytes,
/// canonical_end, prefill_step, admission_padding, decode_rows_exact). Version 3, of a machine pickled
/// before decode_rows_exact, has none: False; version 2, before the admission padding, neither that
/// nor admission_padding: 0; version 1, before the prefill step, none of the three: 0, 0 and False.
/// Only an idle machine: a request being written cannot continue elsewhere.
py::tuple machine_state(const Lane& self) {
  const pfx::Machine& m = self.machine;
  if (m.phase() != pfx::Phase::idle) {
    raise(PyExc_TypeError, "a pfx.Machine can be pickled only while idle: commit or abort the request first");
  }
  const std::vector<pfx::token>& ids = m.held().ids;
  return py::make_tuple(4, m.config().enabled, m.config().keep_min, m.config().chunk,
                        py::bytes(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(pfx::token)),
                        m.held().canonical_end, m.config().prefill_step, m.config().admission_padding,
                        m.config().decode_rows_exact);
}

Lane machine_from_state(const py::tuple& state) {
  const auto version = [&](int number, std::size_t fields) {
    return state.size() == fields && py::isinstance<py::int_>(state[0]) && state[0].cast<int>() == number;
  };
  const bool v1 = version(1, 6);
  const bool v2 = version(2, 7);
  const bool v3 = version(3, 8);
  const bool v4 = version(4, 9);
  if ((!v1 && !v2 && !v3 && !v4) || !py::isinstance<py::bytes>(state[4])) {
    raise(PyExc_ValueError, "not the state of a pickled pfx.Machine");
  }
  Lane lane;
  accepted(lane.machine.configure({flag(state[1], "enabled"), count(state[2], "keep_min"), count(state[3], "chunk"),
                                   v1 ? 0 : count(state[6], "prefill_step"),
                                   v3 || v4 ? count(state[7], "admission_padding") : 0,
                                   v4 && flag(state[8], "decode_rows_exact")}));
  // The bytes are read as int32 through a memoryview, so each id is checked like any other.
  const py::object ids = py::memoryview(state[4]).attr("cast")("i");
  Tokens tokens(ids, "ids");
  accepted(lane.machine.record(tokens.all(), count(state[5], "canonical_end")));
  return lane;
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
  using pfx::python::Lane;

  m.doc() = "pfx::core's Machine and its types (import pfx, not this module)";

  // pfx's one refusal type: the machine's refusal of an event (a ValueError, as the drop-in's callers catch it)
  // and an integration's refusal of what it cannot vouch for (a RuntimeError, as those callers catch it).
  py::tuple refused_bases = py::make_tuple(py::handle(PyExc_ValueError), py::handle(PyExc_RuntimeError));
  refused_error = PyErr_NewExceptionWithDoc(
      "pfx.Refused",
      "pfx refused and changed nothing: the machine an event, or an integration a configuration it cannot vouch "
      "for; .refusal names why. Both a ValueError and a RuntimeError.",
      refused_bases.ptr(), nullptr);
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
      .value("alignment", Bound::alignment)
      .value("prefill_step", Bound::prefill_step);
  py::enum_<Phase>(m, "Phase", "Whether a request is being written (between begin and commit or abort).")
      .value("idle", Phase::idle)
      .value("writing", Phase::writing);

  py::class_<Config>(m, "Config",
                     "The rule's knobs: Config(enabled=True, keep_min=64, chunk=1, prefill_step=0, admission_padding=0, "
                     "decode_rows_exact=False), the seed's defaults (prefill_step: the engine's prefill step, where it "
                     "computes a step of one token alone otherwise; 0: no such premise. admission_padding: rows the engine "
                     "adds to an admission that leaves one token to compute, as vLLM pads it to 1 + num_speculative_tokens "
                     "when speculating; 0: none. decode_rows_exact: the engine writes a decode row bit-equal to the row a "
                     "cold prefill of the same tokens writes, so rows decode wrote may be reused, and a commit names only "
                     "tokens whose rows were written; False: never past canonical_end).")
      .def(py::init([](py::handle enabled, py::handle keep_min, py::handle chunk, py::handle prefill_step,
                       py::handle admission_padding, py::handle decode_rows_exact) {
             return Config{flag(enabled, "enabled"),
                           count(keep_min, "keep_min"),
                           count(chunk, "chunk"),
                           count(prefill_step, "prefill_step"),
                           count(admission_padding, "admission_padding"),
                           flag(decode_rows_exact, "decode_rows_exact")};
           }),
           py::arg("enabled") = Config{}.enabled, py::arg("keep_min") = Config{}.keep_min,
           py::arg("chunk") = Config{}.chunk, py::arg("prefill_step") = Config{}.prefill_step,
           py::arg("admission_padding") = Config{}.admission_padding,
           py::arg("decode_rows_exact") = Config{}.decode_rows_exact)  // core's defaults, written once (config.hpp)
      .def_property(
          "enabled", [](const Config& c) { return c.enabled; },
          [](Config& c, py::handle v) { c.enabled = flag(v, "enabled"); })
      .def_property(
          "keep_min", [](const Config& c) { return c.keep_min; },
          [](Config& c, py::handle v) { c.keep_min = count(v, "keep_min"); })
      .def_property(
          "chunk", [](const Config& c) { return c.chunk; }, [](Config& c, py::handle v) { c.chunk = count(v, "chunk"); })
      .def_property(
          "prefill_step", [](const Config& c) { return c.prefill_step; },
          [](Config& c, py::handle v) { c.prefill_step = count(v, "prefill_step"); })
      .def_property(
          "admission_padding", [](const Config& c) { return c.admission_padding; },
          [](Config& c, py::handle v) { c.admission_padding = count(v, "admission_padding"); })
      .def_property(
          "decode_rows_exact", [](const Config& c) { return c.decode_rows_exact; },
          [](Config& c, py::handle v) { c.decode_rows_exact = flag(v, "decode_rows_exact"); })
      .def(py::self == py::self)  // NOLINT(misc-redundant-expression): pybind11's operator idiom
      // copy.copy and copy.deepcopy: a Config is a value, copied whole by C++ (every field, those to come too)
      .def("__copy__", [](const Config& c) { return c; })
      .def("__deepcopy__", [](const Config& c, const py::dict&) { return c; }, py::arg("memo"))
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

  ids_type = make_ids_type();
  if (ids_type == nullptr) throw py::error_already_set();
  m.attr("Ids") = py::handle(ids_type);

  py::class_<Lane> machine_class(m, "Machine", R"(The prefix-reuse state machine (docs/spec.md, "The protocol").

Machine(config=None): idle, nothing held, config or Config() (reuse on, keep_min 64, chunk 1).
A token sequence is a buffer of integers (array.array, memoryview, numpy arrays: read in place) or
any iterable of integers; ids are integers in 0..2147483647. Without a prefill step, query reads a
prompt only up to the first id that differs from the record; begin, commit and record, and query with a
prefill step (the rule then depends on the prompt's length), read and check every id.
Copy with copy.copy, copy.deepcopy or pickle (pickle: idle only).)");
  machine_class
      .def(py::init([](py::handle config) {
             Lane lane;
             if (!config.is_none()) accepted(lane.machine.configure(instance<Config>(config, "config", "pfx.Config")));
             return lane;
           }),
           py::arg("config") = py::none())
      .def(
          "query",
          [](const Lane& self, py::handle prompt) {
            Tokens p(prompt, "prompt");
            return accepted(self.machine.query(rule_prompt(p, self.machine.config(), self.machine.held().ids)));
          },
          py::arg("prompt"), "The decision for prompt. Idle only.")
      .def(
          "begin",
          [](Lane& self, py::handle prompt, py::handle offset) {
            Tokens p(prompt, "prompt");
            const std::size_t start = count(offset, "offset");
            // The whole prompt: the machine keeps it, so that commit can check its ids against it (INV-11).
            const std::span<const pfx::token> all = p.all();
            return accepted(unexported(self).machine.begin(all, start));
          },
          py::arg("prompt"), py::arg("offset"),
          "Start writing prompt from offset (0 or the granted offset); the record shrinks to ids[0:offset).")
      .def(
          "commit",
          [](Lane& self, py::handle ids, py::handle canonical_end) {
            Tokens i(ids, "ids");
            const std::span<const pfx::token> all = i.all();
            accepted(unexported(self).machine.commit(all, count(canonical_end, "canonical_end")));
          },
          py::arg("ids"), py::arg("canonical_end"), "Publish ids = prompt + generated, canonical_end = len(prompt). Refused when ids do not start "
          "with the begun prompt or canonical_end is past it; stores nothing after a clear during the write.")
      .def(
          "abort", [](Lane& self) { accepted(self.machine.abort()); }, "The request failed; keep ids[0:offset).")
      .def(
          "record",
          [](Lane& self, py::handle ids, py::handle canonical_end) {
            Tokens i(ids, "ids");
            const std::span<const pfx::token> all = i.all();
            accepted(unexported(self).machine.record(all, count(canonical_end, "canonical_end")));
          },
          py::arg("ids"), py::arg("canonical_end"), "The original class's one-shot publish. Idle only. Unchecked: the caller vouches that rows "
          "[0, canonical_end) are a cold prefill of ids[0:canonical_end) on the current chunk grid.")
      .def(
          "clear", [](Lane& self) { accepted(unexported(self).machine.clear()); }, "Forget everything held. Any phase.")
      .def(
          "configure",
          [](Lane& self, py::handle config) {
            accepted(unexported(self).machine.configure(instance<Config>(config, "config", "pfx.Config")));
          },
          py::arg("config"),
          "Change the knobs. Idle only; turning reuse off or changing chunk or decode_rows_exact forgets what is "
          "held; changing prefill_step or admission_padding keeps it.")
      .def(
          "reserve",
          [](Lane& self, py::handle tokens) {
            const std::size_t n = count(tokens, "tokens");
            Machine& machine = unexported(self).machine;
            // std::vector's own messages ("vector::reserve", a bare MemoryError) name neither the
            // call nor the capacity.
            try {
              machine.reserve(n);
            } catch (const std::length_error&) {
              throw py::value_error("Machine.reserve(" + std::to_string(n) + "): a capacity of " + std::to_string(n) +
                                    " tokens is past the largest a machine can hold; nothing changed");
            } catch (const std::bad_alloc&) {
              PyErr_SetString(PyExc_MemoryError, ("Machine.reserve(" + std::to_string(n) + "): cannot allocate room for " +
                                                  std::to_string(n) + " tokens (4 bytes each); nothing changed")
                                                     .c_str());
              throw py::error_already_set();
            }
          },
          py::arg("tokens"), "Keep room for this many ids, so that records within it never allocate.")
      .def_property_readonly("config", [](const Lane& self) { return self.machine.config(); }, "A copy of the knobs.")
      .def_property_readonly(
          "ids",
          [](py::object self) {
            return py::reinterpret_steal<py::object>(check(make_ids_view(ids_type, self.ptr(), &self.cast<Lane&>())));
          },
          "The ids held, as a read-only view (pfx.Ids) in O(1).")
      .def_property_readonly("canonical_end", [](const Lane& self) { return self.machine.held().canonical_end; })
      .def_property_readonly("phase", [](const Lane& self) { return self.machine.phase(); })
      .def_property_readonly("begin_offset", [](const Lane& self) { return self.machine.begin_offset(); })
      .def_property_readonly("capacity", [](const Lane& self) { return self.machine.capacity(); })
      .def_property_readonly("memory_bytes", [](const Lane& self) { return self.machine.memory_bytes(); },
                             "Bytes the machine occupies: 4 per token of capacity, plus a constant.")
      .def("__eq__", [](const Lane& a, py::handle b) -> py::object {
        if (!py::isinstance<Lane>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        return py::bool_(a.machine == b.cast<const Lane&>().machine);
      })
      .def("__copy__", [](const Lane& self) { return Lane(self); })
      .def("__deepcopy__", [](const Lane& self, py::handle /*memo*/) { return Lane(self); }, py::arg("memo"))
      .def(py::pickle([](const Lane& self) { return machine_state(self); },
                      [](const py::tuple& state) { return machine_from_state(state); }))
      .def("__repr__", [](const Lane& self) {
        const Machine& machine = self.machine;
        return "Machine(config=" + repr(machine.config()) + ", phase=Phase." +
               py::cast(machine.phase()).attr("name").cast<std::string>() +
               ", len(ids)=" + std::to_string(machine.held().ids.size()) +
               ", canonical_end=" + std::to_string(machine.held().canonical_end) + ")";
      });
  machine_class.attr("__hash__") = py::none();

  m.def(
      "decide",
      [](py::handle config, py::handle ids, py::handle canonical_end, py::handle prompt) {
        const Config& c = instance<Config>(config, "config", "pfx.Config");
        if (c.chunk == 0) raise_refused(pfx::Refusal::chunk_zero);  // the rule's precondition (INV-9)
        Tokens i(ids, "ids");
        const std::span<const pfx::token> held = i.all();
        const std::size_t end = count(canonical_end, "canonical_end");
        Tokens p(prompt, "prompt");
        return pfx::decide(c, held, end, rule_prompt(p, c, held));
      },
      py::arg("config"), py::arg("ids"), py::arg("canonical_end"), py::arg("prompt"),
      "The offset rule alone, without a machine: the final offset, every bound applied (the prefill step "
      "included), then keep_min.");
  m.def(
      "prefill_canonical_end",
      [](py::handle config, py::handle prompt_length) {
        const Config& c = instance<Config>(config, "config", "pfx.Config");
        return pfx::prefill_canonical_end(count(prompt_length, "prompt_length"), c.prefill_step);
      },
      py::arg("config"), py::arg("prompt_length"),
      "The canonical_end a commit of a prompt of prompt_length tokens may claim under config: the prompt's "
      "length, less its last row when config.prefill_step makes its prefill end with a step computing that "
      "row alone (a longer prompt computes it in a longer step: docs/spec.md, \"THM-1 with a one-token step\").");
  m.def(
      "common_prefix",
      [](py::handle a, py::handle b) {
        Tokens first(a, "a");
        const std::span<const pfx::token> all = first.all();
        Tokens second(b, "b");
        return pfx::common_prefix(all, second.through_first_difference(all));
      },
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
  m.def(
      "read_environment_flag",
      [](const std::string& variable, py::handle value) {
        const std::optional<std::string> text = environment_value(value, "value");
        if (!text) raise(PyExc_TypeError, "value must be a str or bytes, not None");
        return pfx::driver::read_flag(variable, *text);
      },
      py::arg("variable"), py::arg("value"),
      "value of the environment variable `variable` read as a flag, as TF_GLM53_PREFIX_CACHE is;"
      " a malformed value raises pfx.ConfigError naming the variable.");
  m.def(
      "read_environment_count",
      [](const std::string& variable, py::handle value) {
        const std::optional<std::string> text = environment_value(value, "value");
        if (!text) raise(PyExc_TypeError, "value must be a str or bytes, not None");
        return pfx::driver::read_count(variable, *text);
      },
      py::arg("variable"), py::arg("value"),
      "value of the environment variable `variable` read as a count of tokens, as"
      " TF_GLM53_PREFIX_CACHE_MIN is; a malformed value raises pfx.ConfigError naming the variable.");

  add_conform(m);
  add_conform_observed(m);
  add_serving(m);
  add_llama_state(m);
  add_llama_policy(m);
  add_llama_record(m);
}
