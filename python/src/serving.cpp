// pfx.Lane and pfx.verify over an engine written in Python (serving.hpp).

#include "serving.hpp"

#include "convert.hpp"
#include "progress.hpp"
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

/// The keyword arguments' defaults: the C++ Lane's, written once (driver/lane.hpp, core's config.hpp).
const driver::LaneOptions defaults{};

/// The knobs of pfx.Lane and pfx.verify, each read as its argument names it (`caller`: "pfx.Lane").
struct LaneArguments {
  std::optional<std::size_t> chunk;     ///< None: the engine's
  std::optional<std::size_t> capacity;  ///< None: the engine's capacity, else the C++ lane's default
  driver::LaneOptions options;

  LaneArguments(const std::string& caller, py::handle keep_min, py::handle capacity_rows, py::handle enabled,
                py::handle chunk_size, py::handle rule_chunk, py::handle poison) {
    chunk = positive_or_none(chunk_size, caller + ": chunk", "the engine's chunk");
    capacity = positive_or_none(capacity_rows, caller + ": capacity", "the engine's capacity");
    options.config.keep_min = count(keep_min, (caller + ": keep_min").c_str());
    options.config.enabled = flag(enabled, (caller + ": enabled").c_str());
    // One meaning everywhere (`pfx replay --rule-chunk`, pfx.conform): None is the engine's chunk, 0 is refused.
    options.rule_chunk = positive_or_none(rule_chunk, caller + ": rule_chunk", "the engine's chunk");
    options.poison = flag(poison, (caller + ": poison").c_str());
  }

  /// The options on `engine`: without a capacity, the rows its own cache holds, else the default.
  [[nodiscard]] driver::LaneOptions on(const PythonEngine& engine) const {
    driver::LaneOptions chosen = options;
    chosen.capacity = capacity.value_or(engine.capacity().value_or(defaults.capacity));
    return chosen;
  }

  /// None, or an integer >= 1; TypeError or ValueError naming `argument` otherwise.
  static std::optional<std::size_t> positive_or_none(py::handle value, const std::string& argument,
                                                     const char* none_means) {
    if (value.is_none()) return std::nullopt;
    const std::size_t n = count(value, argument.c_str());
    if (n == 0) throw py::value_error(argument + " must be at least 1 (None: " + none_means + "), not 0");
    return n;
  }
};

/// A C++ Lane over a Python engine. The members are destroyed in reverse order: the lane (and its
/// KV state, a view of the engine's cache) before the wrapper it refers to.
class ServingLane {
 public:
  ServingLane(py::object engine, const LaneArguments& arguments)
      : engine_(std::move(engine), arguments.chunk, "pfx.Lane"),
        lane_(std::make_unique<driver::Lane>(engine_, arguments.on(engine_))) {}

  driver::Response serve(py::handle prompt, py::handle max_new_tokens) {
    const std::size_t count_new = count(max_new_tokens, "pfx.Lane.serve: max_new_tokens");
    Tokens tokens(prompt, "prompt");
    const std::span<const token> ids = tokens.all();
    const std::vector<token> copy(ids.begin(), ids.end());  // the engine's Python code may run the allocator
    return lane_->serve(copy, count_new);
  }
  void clear() { lane_->clear(); }
  [[nodiscard]] const driver::Lane& lane() const noexcept { return *lane_; }
  [[nodiscard]] const PythonEngine& engine() const noexcept { return engine_; }

 private:
  PythonEngine engine_;
  std::unique_ptr<driver::Lane> lane_;
};

/// One item of a trace, as `pfx replay` reads a line: a request (a sequence of token ids, served with
/// the call's max_new_tokens; a pair (prompt, max_new_tokens); a mapping with "prompt" and optionally
/// "max_new_tokens" and "label") or a clear ({"op": "clear"}), at `line`. `element` names it in the
/// errors of its ids ("trace[3]"), `name` in the others ("pfx.verify: trace[3] (line 4)").
/// Returns the request, or none for a clear.
std::optional<driver::TraceRequest> trace_item(py::handle item, const std::string& element, const std::string& name,
                                               std::size_t line, std::size_t max_new_tokens) {
  driver::TraceRequest request;
  request.max_new_tokens = max_new_tokens;
  request.line = line;
  py::object prompt;
  py::object count_new;
  if (py::isinstance<py::dict>(item)) {
    const auto mapping = py::reinterpret_borrow<py::dict>(item);
    if (mapping.contains("op")) {
      const py::object op = mapping["op"];
      if (!py::isinstance<py::str>(op) || op.cast<std::string>() != "clear") {
        throw py::value_error(name + ": \"op\": expected \"clear\", got " + py::repr(op).cast<std::string>());
      }
      for (const char* field : {"prompt", "max_new_tokens"}) {
        if (mapping.contains(field)) {
          throw py::value_error(name + ": \"" + field + "\": a clear takes no request fields (an item is a request or "
                                "{\"op\": \"clear\"})");
        }
      }
      return std::nullopt;
    }
    if (!mapping.contains("prompt")) throw py::value_error(name + " has no \"prompt\"");
    prompt = mapping["prompt"];
    if (mapping.contains("max_new_tokens")) count_new = mapping["max_new_tokens"];
    if (mapping.contains("label")) {
      const py::object label = mapping["label"];
      if (!py::isinstance<py::str>(label)) {
        throw py::type_error(name + ": \"label\" must be a str, not " + std::string(Py_TYPE(label.ptr())->tp_name));
      }
      request.label = label.cast<std::string>();
    }
  } else if (py::isinstance<py::tuple>(item) && py::len(item) == 2 &&
             !py::isinstance<py::int_>(py::reinterpret_borrow<py::tuple>(item)[0])) {
    prompt = py::reinterpret_borrow<py::tuple>(item)[0];
    count_new = py::reinterpret_borrow<py::tuple>(item)[1];
  } else {
    prompt = py::reinterpret_borrow<py::object>(item);
  }
  Tokens tokens(prompt, element.c_str());
  const std::span<const token> ids = tokens.all();
  request.prompt.assign(ids.begin(), ids.end());
  if (count_new && !count_new.is_none()) request.max_new_tokens = count(count_new, (name + ": max_new_tokens").c_str());
  return request;
}

/// The items of a JSON Lines file, as `pfx replay` reads one: (line, item) for each line that is not
/// blank, in order; ValueError naming `caller` and the line for one that is not a JSON object.
std::vector<std::pair<std::size_t, py::object>> trace_file(const py::object& path, const std::string& caller) {
  const std::string file = py::str(py::module_::import("os").attr("fspath")(path));
  const py::object text = py::module_::import("pathlib").attr("Path")(path).attr("read_text")(py::arg("encoding") = "utf-8");
  const py::object loads = py::module_::import("json").attr("loads");
  std::vector<std::pair<std::size_t, py::object>> items;
  std::size_t line = 0;
  for (const py::handle text_line : text.attr("splitlines")()) {
    ++line;
    if (py::str(text_line).attr("strip")().cast<std::string>().empty()) continue;  // blank, as the program skips it
    py::object item;
    try {
      item = loads(text_line);
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_ValueError)) throw;  // json.JSONDecodeError is a ValueError
      throw py::value_error(std::string(caller) + ": " + file + ":" + std::to_string(line) + ": " +
                            std::string(py::str(e.value())));
    }
    if (!py::isinstance<py::dict>(item)) {
      throw py::value_error(std::string(caller) + ": " + file + ":" + std::to_string(line) + ": expected a JSON object");
    }
    items.emplace_back(line, std::move(item));
  }
  return items;
}

/// The trace's requests, each clear marked on the request after it. A str or path is a JSON Lines
/// file of `pfx replay`'s format; anything else an iterable of items, item i being line i + 1. A bad
/// item's error starts with `caller` ("pfx.verify").
std::vector<driver::TraceRequest> trace_requests(const py::object& trace, std::size_t max_new_tokens,
                                                 const std::string& caller) {
  std::vector<driver::TraceRequest> requests;
  bool clear = false;
  const auto add = [&](py::handle item, const std::string& element, const std::string& name, std::size_t line) {
    std::optional<driver::TraceRequest> request = trace_item(item, element, name, line, max_new_tokens);
    if (!request) {
      clear = true;
      return;
    }
    request->clear_first = std::exchange(clear, false);
    requests.push_back(std::move(*request));
  };
  if (py::isinstance<py::str>(trace) || py::hasattr(trace, "__fspath__")) {
    const std::string file = py::str(py::module_::import("os").attr("fspath")(trace));
    for (const auto& [line, item] : trace_file(trace, caller)) {
      const std::string where = file + ":" + std::to_string(line);
      add(item, where, std::string(caller) + ": " + where, line);
    }
    return requests;
  }
  std::size_t index = 0;
  for (const py::handle item : py::iter(trace)) {
    const std::string element = "trace[" + std::to_string(index) + "]";
    add(item, element, std::string(caller) + ": " + element + " (line " + std::to_string(index + 1) + ")", index + 1);
    ++index;
  }
  return requests;
}

/// "N" and the noun, in the singular for one: "1 request", "2 requests".
std::string counted(std::size_t n, const std::string& noun, const std::string& plural = "") {
  return std::to_string(n) + " " + (n == 1 ? noun : plural.empty() ? noun + "s" : plural);
}

/// The report in one line, in `pfx replay --verify`'s words (driver::describe_mismatches).
std::string describe(const driver::VerifyReport& r) {
  std::string text = "pfx.verify: " + counted(r.requests, "request") + ", " + counted(r.compared, "response") +
                     " compared with a cold run, " + counted(r.mismatches, "mismatch", "mismatches") + ", " + counted(r.rows_compared, "KV row") + " compared, " +
                     counted(r.reused_tokens, "prompt token") + " reused";
  if (r.first_mismatch) text += "; MISMATCH: " + driver::describe_mismatches(r.mismatches, *r.first_mismatch);
  if (r.compared == 0) text += "; FAILED: nothing was compared";
  text += r.ok() ? " (ok)" : " (NOT ok)";
  return text;
}

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
      .def(py::init([](py::object engine, py::handle keep_min, py::handle capacity, py::handle enabled,
                       py::handle chunk, py::handle rule_chunk, py::handle poison) {
             return std::make_unique<ServingLane>(
                 std::move(engine), LaneArguments("pfx.Lane", keep_min, capacity, enabled, chunk, rule_chunk, poison));
           }),
           py::arg("engine"), py::kw_only(), py::arg("keep_min") = defaults.config.keep_min,
           py::arg("capacity") = py::none(), py::arg("enabled") = defaults.config.enabled,
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
      .def_readonly("request", &driver::VerifyMismatch::request, "its number among the trace's requests, from 1")
      .def_readonly("line", &driver::VerifyMismatch::line, "its item's place in the trace, from 1, clears counted")
      .def_readonly("label", &driver::VerifyMismatch::label, "its item's \"label\", or \"\"")
      .def_readonly("what", &driver::VerifyMismatch::what)
      .def("__str__", [](const driver::VerifyMismatch& v) { return driver::describe_mismatches(1, v); })
      .def("__repr__", [](const driver::VerifyMismatch& v) {
        return "<VerifyMismatch request " + std::to_string(v.request) + " (line " + std::to_string(v.line) + "): " +
               v.what + ">";
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
      [](py::object engine, const py::object& trace, py::handle keep_min, py::handle capacity, py::handle enabled,
         py::handle max_new_tokens, py::handle chunk, py::handle rule_chunk, py::handle poison,
         const py::object& progress) {
        const LaneArguments arguments("pfx.verify", keep_min, capacity, enabled, chunk, rule_chunk, poison);
        const std::vector<driver::TraceRequest> requests =
            trace_requests(trace, count(max_new_tokens, "pfx.verify: max_new_tokens"), "pfx.verify");
        PythonEngine wrapped(std::move(engine), arguments.chunk, "pfx.verify");
        const ProgressArgument told(progress, "runs", "pfx.verify");
        return driver::verify(wrapped, requests, arguments.on(wrapped), nullptr, told.callback());
      },
      py::arg("engine"), py::arg("trace"), py::kw_only(), py::arg("keep_min") = defaults.config.keep_min,
      py::arg("capacity") = py::none(), py::arg("enabled") = defaults.config.enabled,
      py::arg("max_new_tokens") = 0, py::arg("chunk") = py::none(),
      py::arg("rule_chunk") = py::none(), py::arg("poison") = true, py::arg("progress") = py::none(),
      "Serves `trace` through a pfx.Lane on `engine`, then each request cold, and compares every response "
      "(generated tokens, logits, KV rows where the engine can read them). Returns a VerifyReport; ok is False "
      "when anything differs or nothing was compared.");

  // What a check outside the C++ driver (pfx.integrations.vllm.verify, over vLLM's server) shares with
  // pfx.verify and `pfx replay`: the trace read as pfx.verify reads one, and the first mismatch told in
  // their words.
  m.def(
      "_read_trace",
      [](const py::object& trace, py::handle max_new_tokens, const std::string& caller) {
        py::list requests;
        for (const driver::TraceRequest& request :
             trace_requests(trace, count(max_new_tokens, (caller + ": max_new_tokens").c_str()), caller)) {
          py::dict item;
          item["prompt"] = request.prompt;
          item["max_new_tokens"] = request.max_new_tokens;
          item["line"] = request.line;
          item["label"] = request.label;
          item["clear_first"] = request.clear_first;
          requests.append(std::move(item));
        }
        return requests;
      },
      py::arg("trace"), py::kw_only(), py::arg("max_new_tokens"), py::arg("caller"),
      "The requests of `trace`, read as pfx.verify reads one: a dict each (prompt, max_new_tokens, line, label, "
      "clear_first: a clear came just before it). A bad item raises ValueError or TypeError naming it after "
      "`caller`.");
  m.def(
      "_describe_mismatches",
      [](std::size_t mismatches, std::size_t request, std::size_t line, const std::string& label,
         const std::string& what) {
        return driver::describe_mismatches(mismatches, {.request = request, .line = line, .label = label, .what = what});
      },
      py::arg("mismatches"), py::arg("request"), py::arg("line"), py::arg("label"), py::arg("what"),
      "`pfx replay`'s words for its mismatches: \"N responses differ from their cold run; the first is request R "
      "(line L, label): what\".");
}

}  // namespace pfx::python
