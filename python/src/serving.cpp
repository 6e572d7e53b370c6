// pfx.Lane and pfx.verify over an engine written in Python (serving.hpp).

#include "serving.hpp"

#include "convert.hpp"
#include "python_engine.hpp"

#include <pfx/driver/lane.hpp>
#include <pfx/driver/verify.hpp>

#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace pfx::python {
namespace {

/// A float32 buffer that numpy, torch and memoryview read without a copy of their own: an
/// array.array('f'), so that the module needs no numpy.
py::object float32_buffer(const std::vector<float>& values) {
  py::object buffer = py::module_::import("array").attr("array")("f");
  buffer.attr("frombytes")(py::bytes(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return buffer;
}

driver::LaneOptions lane_options(std::size_t keep_min, std::size_t capacity, bool enabled,
                                 std::optional<std::size_t> rule_chunk, bool poison) {
  return {.capacity = capacity, .config = {.enabled = enabled, .keep_min = keep_min}, .rule_chunk = rule_chunk.value_or(0),
          .poison = poison};
}

/// A C++ Lane over a Python engine. The members are destroyed in reverse order: the lane (and its
/// KV state, a view of the engine's cache) before the wrapper it refers to.
class ServingLane {
 public:
  ServingLane(py::object engine, const driver::LaneOptions& options, std::optional<std::size_t> chunk)
      : engine_(std::move(engine), chunk, "pfx.Lane"), lane_(std::make_unique<driver::Lane>(engine_, options)) {}

  driver::Response serve(py::handle prompt, std::size_t max_new_tokens) {
    Tokens tokens(prompt, "prompt");
    const std::span<const token> ids = tokens.all();
    const std::vector<token> copy(ids.begin(), ids.end());  // the engine's Python code may run the allocator
    return lane_->serve(copy, max_new_tokens);
  }
  void clear() { lane_->clear(); }
  [[nodiscard]] const driver::Lane& lane() const noexcept { return *lane_; }
  [[nodiscard]] const PythonEngine& engine() const noexcept { return engine_; }

 private:
  PythonEngine engine_;
  std::unique_ptr<driver::Lane> lane_;
};

/// One item of a trace: a sequence of token ids (a prompt, with the call's max_new_tokens), a
/// mapping with "prompt" and optionally "max_new_tokens", or a pair (prompt, max_new_tokens).
driver::TraceRequest trace_request(py::handle item, std::size_t index, std::size_t max_new_tokens) {
  const std::string name = "trace[" + std::to_string(index) + "]";
  py::object prompt;
  py::object count;
  if (py::isinstance<py::dict>(item)) {
    const auto mapping = py::reinterpret_borrow<py::dict>(item);
    if (!mapping.contains("prompt")) throw py::value_error("pfx.verify: " + name + " has no \"prompt\"");
    prompt = mapping["prompt"];
    if (mapping.contains("max_new_tokens")) count = mapping["max_new_tokens"];
  } else if (py::isinstance<py::tuple>(item) && py::len(item) == 2 &&
             !py::isinstance<py::int_>(py::reinterpret_borrow<py::tuple>(item)[0])) {
    prompt = py::reinterpret_borrow<py::tuple>(item)[0];
    count = py::reinterpret_borrow<py::tuple>(item)[1];
  } else {
    prompt = py::reinterpret_borrow<py::object>(item);
  }
  driver::TraceRequest request;
  Tokens tokens(prompt, name.c_str());
  const std::span<const token> ids = tokens.all();
  request.prompt.assign(ids.begin(), ids.end());
  request.max_new_tokens = max_new_tokens;
  if (count && !count.is_none()) {
    if (!py::isinstance<py::int_>(count) || py::isinstance<py::bool_>(count) || count.cast<long long>() < 0) {
      throw py::value_error("pfx.verify: " + name + "'s max_new_tokens must be an integer >= 0");
    }
    request.max_new_tokens = count.cast<std::size_t>();
  }
  return request;
}

std::string describe(const driver::VerifyReport& r) {
  std::string text = "pfx.verify: " + std::to_string(r.compared) + " of " + std::to_string(r.requests) +
                     " responses compared with a cold run, " + std::to_string(r.mismatches) + " mismatches, " +
                     std::to_string(r.rows_compared) + " KV rows compared, " + std::to_string(r.reused_tokens) +
                     " prompt tokens reused";
  if (r.first_mismatch) {
    text += "; first mismatch: request " + std::to_string(r.first_mismatch->request) + ": " + r.first_mismatch->what;
  }
  if (r.compared == 0) text += "; FAILED: nothing was compared";
  text += r.ok() ? " (ok)" : " (NOT ok)";
  return text;
}

/// The keyword arguments' defaults: the C++ Lane's, written once (driver/lane.hpp, core's config.hpp).
const driver::LaneOptions defaults{};

}  // namespace

void add_serving(py::module_& m) {
  py::class_<driver::Response>(m, "Response", "What pfx.Lane.serve answered for one request.")
      .def_readonly("generated", &driver::Response::generated, "the greedy tokens, max_new_tokens of them")
      .def_property_readonly("logits", [](const driver::Response& r) { return float32_buffer(r.logits); },
                             "the prompt's last row's logits: a float32 buffer (array.array('f'); numpy.asarray reads it)")
      .def_readonly("decision", &driver::Response::decision, "the offset the request began at, and why")
      .def_readonly("prefilled", &driver::Response::prefilled, "prompt tokens the engine computed")
      .def("__repr__", [](const driver::Response& r) {
        return "<Response offset=" + std::to_string(r.decision.offset) + " prefilled=" + std::to_string(r.prefilled) +
               " generated=" + std::to_string(r.generated.size()) + ">";
      });

  py::class_<ServingLane>(m, "Lane",
                          "The C++ Lane over an engine written in Python (docs/python.md, \"Serving with pfx.Lane\"): "
                          "serves one request at a time, reusing what the rule allows.")
      .def(py::init([](py::object engine, std::size_t keep_min, std::size_t capacity, bool enabled,
                       std::optional<std::size_t> chunk, std::optional<std::size_t> rule_chunk, bool poison) {
             if (chunk && *chunk == 0) throw py::value_error("pfx.Lane: chunk must be at least 1");
             return std::make_unique<ServingLane>(std::move(engine),
                                                  lane_options(keep_min, capacity, enabled, rule_chunk, poison), chunk);
           }),
           py::arg("engine"), py::kw_only(), py::arg("keep_min") = defaults.config.keep_min,
           py::arg("capacity") = defaults.capacity, py::arg("enabled") = defaults.config.enabled,
           py::arg("chunk") = py::none(), py::arg("rule_chunk") = py::none(),
           py::arg("poison") = true)
      .def("serve", &ServingLane::serve, py::arg("prompt"), py::arg("max_new_tokens") = 0,
           "Serves one request: the decision, prefill on the engine's grid from its offset, greedy decoding, "
           "commit. Returns a Response.")
      .def("clear", &ServingLane::clear, "Forgets the record (the rows are given up by the next request).")
      .def_property_readonly("chunk", [](const ServingLane& l) { return l.engine().chunk(); })
      .def_property_readonly("capacity", [](const ServingLane& l) { return l.lane().options().capacity; })
      .def_property_readonly("keep_min", [](const ServingLane& l) { return l.lane().options().config.keep_min; })
      .def_property_readonly("enabled", [](const ServingLane& l) { return l.lane().options().config.enabled; })
      .def_property_readonly("held", [](const ServingLane& l) {
        const auto& ids = l.lane().machine().held().ids;
        return std::vector<token>(ids.begin(), ids.end());
      }, "the record's token ids (a copy)");

  py::class_<driver::VerifyMismatch>(m, "VerifyMismatch", "The first response that differs from its cold run.")
      .def_readonly("request", &driver::VerifyMismatch::request)
      .def_readonly("what", &driver::VerifyMismatch::what)
      .def("__str__", [](const driver::VerifyMismatch& v) { return "request " + std::to_string(v.request) + ": " + v.what; })
      .def("__repr__", [](const driver::VerifyMismatch& v) {
        return "<VerifyMismatch request " + std::to_string(v.request) + ": " + v.what + ">";
      });
  py::class_<driver::VerifyReport>(m, "VerifyReport", "What pfx.verify found.")
      .def_readonly("requests", &driver::VerifyReport::requests)
      .def_readonly("compared", &driver::VerifyReport::compared)
      .def_readonly("mismatches", &driver::VerifyReport::mismatches)
      .def_readonly("rows_compared", &driver::VerifyReport::rows_compared)
      .def_readonly("reused_tokens", &driver::VerifyReport::reused_tokens)
      .def_readonly("first_mismatch", &driver::VerifyReport::first_mismatch)
      .def_property_readonly("ok", &driver::VerifyReport::ok,
                             "every response equalled its cold run, and at least one was compared")
      .def("__bool__", &driver::VerifyReport::ok)
      .def("__str__", &describe)
      .def("__repr__", [](const driver::VerifyReport& r) { return "<VerifyReport " + describe(r) + ">"; });

  m.def(
      "verify",
      [](py::object engine, const py::iterable& trace, std::size_t keep_min, std::size_t capacity, bool enabled,
         std::size_t max_new_tokens, std::optional<std::size_t> chunk, std::optional<std::size_t> rule_chunk,
         bool poison) {
        if (chunk && *chunk == 0) throw py::value_error("pfx.verify: chunk must be at least 1");
        std::vector<driver::TraceRequest> requests;
        std::size_t index = 0;
        for (const py::handle item : trace) requests.push_back(trace_request(item, index++, max_new_tokens));
        PythonEngine wrapped(std::move(engine), chunk, "pfx.verify");
        return driver::verify(wrapped, requests, lane_options(keep_min, capacity, enabled, rule_chunk, poison));
      },
      py::arg("engine"), py::arg("trace"), py::kw_only(), py::arg("keep_min") = defaults.config.keep_min,
      py::arg("capacity") = defaults.capacity, py::arg("enabled") = defaults.config.enabled,
      py::arg("max_new_tokens") = 0, py::arg("chunk") = py::none(),
      py::arg("rule_chunk") = py::none(), py::arg("poison") = true,
      "Serves `trace` through a pfx.Lane on `engine`, then each request cold, and compares every response "
      "(generated tokens, logits, KV rows where the engine can read them). Returns a VerifyReport; ok is False "
      "when anything differs or nothing was compared.");
}

}  // namespace pfx::python
