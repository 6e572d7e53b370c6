// pfx.conform: a Python engine (an object with chunk, vocab, layers, width and
// prefill(tokens, start, kv)) as a pfx::driver::Engine on host KV states, checked by the one C++
// check, pfx::conform::check.

#include "conform.hpp"

#include <pfx/conform/check.hpp>
#include <pfx/driver/engine.hpp>
#include <pfx/driver/host_kv_state.hpp>

#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace pfx::python {
namespace {

/// A positive integer attribute of the engine; TypeError or ValueError naming it otherwise.
std::size_t positive_attribute(const py::object& engine, const char* name) {
  if (!py::hasattr(engine, name)) {
    throw py::type_error(std::string("pfx.conform: the engine has no attribute '") + name +
                         "' (an engine has chunk, vocab, layers, width and prefill(tokens, start, kv))");
  }
  const py::object value = engine.attr(name);
  if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value)) {
    throw py::type_error(std::string("pfx.conform: engine.") + name + " must be an int, not " +
                         Py_TYPE(value.ptr())->tp_name);
  }
  const long long n = value.cast<long long>();
  if (n < 1) throw py::value_error(std::string("pfx.conform: engine.") + name + " must be at least 1, got " + std::to_string(n));
  return static_cast<std::size_t>(n);
}

class PythonEngine final : public driver::Engine {
 public:
  PythonEngine(py::object engine, std::optional<std::size_t> chunk)
      : engine_(std::move(engine)),
        chunk_(chunk.value_or(positive_attribute(engine_, "chunk"))),
        vocab_(positive_attribute(engine_, "vocab")),
        layers_(positive_attribute(engine_, "layers")),
        width_(positive_attribute(engine_, "width")),
        prefill_(engine_.attr("prefill")) {}

  [[nodiscard]] std::size_t chunk() const noexcept override { return chunk_; }
  [[nodiscard]] std::size_t vocab() const noexcept override { return vocab_; }
  [[nodiscard]] std::unique_ptr<driver::KvState> make_kv_state(std::size_t capacity) const override {
    return std::make_unique<driver::HostKvState>(driver::KvShape{.capacity = capacity, .layers = layers_, .width = width_});
  }

  void prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override {
    auto& host = dynamic_cast<driver::HostKvState&>(kv);
    const driver::KvShape& shape = host.shape();
    const auto f = static_cast<py::ssize_t>(sizeof(float));
    const auto width = static_cast<py::ssize_t>(shape.width);
    const auto capacity = static_cast<py::ssize_t>(shape.capacity);
    py::memoryview view = py::memoryview::from_buffer(
        host.row(0, driver::Plane::key, 0),
        {static_cast<py::ssize_t>(shape.layers), py::ssize_t{2}, capacity, width},
        {2 * capacity * width * f, capacity * width * f, width * f, f}, false);
    py::list ids(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) ids[i] = py::int_(tokens[i]);
    const py::object result = prefill_(ids, position, view);
    // The rows are pfx's: no view of them may outlive the call. A buffer taken from kv (numpy.asarray,
    // torch.frombuffer) is an export of kv; a memoryview made from it (cast, a slice) is another view of
    // kv's managed buffer. Either, still alive, is refused.
    const auto* memory = reinterpret_cast<PyMemoryViewObject*>(view.ptr());
    if (memory->exports > 0 || memory->mbuf->exports > 1) {
      throw py::value_error("pfx.conform: engine.prefill kept a view of kv after it returned (a numpy array, "
                            "tensor or memoryview made from it): make such views inside prefill only");
    }
    view.attr("release")();
    store_logits(result, logits);
  }

  void decode(driver::KvState&, token, std::size_t, std::span<float>) override {
    throw std::logic_error("pfx.conform: a Python engine has no decode path, and the check needs none");
  }

 private:
  /// The logits prefill returned: a buffer of vocab float32 or float64 values, or a sequence of vocab
  /// numbers.
  void store_logits(const py::object& result, std::span<float> logits) const {
    const std::string wrong = "pfx.conform: engine.prefill must return the last row's logits, " +
                              std::to_string(vocab_) + " numbers (a float32 buffer or a sequence of floats)";
    if (PyObject_CheckBuffer(result.ptr()) != 0) {
      const py::buffer_info info = py::reinterpret_borrow<py::buffer>(result).request();
      if (static_cast<std::size_t>(info.size) != vocab_) throw py::value_error(wrong + ", got " + std::to_string(info.size));
      if (info.ndim == 1 && info.strides[0] == static_cast<py::ssize_t>(sizeof(float)) &&
          info.format == py::format_descriptor<float>::format()) {
        std::memcpy(logits.data(), info.ptr, vocab_ * sizeof(float));
        return;
      }
    }
    if (!py::isinstance<py::sequence>(result) && !py::hasattr(result, "tolist") && PyObject_CheckBuffer(result.ptr()) == 0) {
      throw py::type_error(wrong + ", got " + Py_TYPE(result.ptr())->tp_name);
    }
    const py::object values = py::hasattr(result, "tolist") ? result.attr("tolist")() : result;
    const auto sequence = py::reinterpret_borrow<py::sequence>(values);
    if (sequence.size() != vocab_) throw py::value_error(wrong + ", got " + std::to_string(sequence.size()));
    for (std::size_t i = 0; i < vocab_; ++i) logits[i] = static_cast<float>(sequence[i].cast<double>());
  }

  py::object engine_;
  std::size_t chunk_, vocab_, layers_, width_;
  py::object prefill_;
};

const char* plane_name(driver::Plane plane) { return plane == driver::Plane::key ? "key" : "value"; }

}  // namespace

void add_conform(py::module_& m) {
  using conform::Difference;
  using conform::GridResult;
  using conform::Mismatch;
  using conform::Report;
  py::class_<Difference>(m, "ConformDifference", "Where two runs first differ: a KV row, or the logits.")
      .def_property_readonly("where", [](const Difference& d) {
        return d.where == Difference::Where::row ? "row" : d.where == Difference::Where::logits ? "logits" : "row bytes";
      })
      .def_readonly("row", &Difference::row)
      .def_readonly("layer", &Difference::layer)
      .def_property_readonly("plane", [](const Difference& d) { return plane_name(d.plane); })
      .def_readonly("index", &Difference::index, "the column within the row, or the logit's index")
      .def_readonly("got", &Difference::got)
      .def_readonly("expected", &Difference::expected)
      .def("__str__", &Difference::describe)
      .def("__repr__", [](const Difference& d) { return "<ConformDifference " + d.describe() + ">"; });
  py::class_<Mismatch>(m, "ConformMismatch", "A resume that differs from its cold run.")
      .def_readonly("prompt_number", &Mismatch::prompt_number)
      .def_readonly("prompt", &Mismatch::prompt)
      .def_readonly("held", &Mismatch::held, "the tokens whose cold run the resume started from")
      .def_readonly("offset", &Mismatch::offset)
      .def_readonly("difference", &Mismatch::difference);
  py::class_<conform::ColdDisagreement>(m, "ConformColdDisagreement", "Two cold runs of one prompt that differ.")
      .def_readonly("prompt_number", &conform::ColdDisagreement::prompt_number)
      .def_readonly("prompt", &conform::ColdDisagreement::prompt)
      .def_readonly("run", &conform::ColdDisagreement::run)
      .def_readonly("difference", &conform::ColdDisagreement::difference);
  py::class_<GridResult>(m, "ConformGrid", "One candidate grid: its resumes, and the first mismatch if any.")
      .def_readonly("grid", &GridResult::grid)
      .def_readonly("resumes", &GridResult::resumes)
      .def_property_readonly("exact", &GridResult::exact)
      .def_readonly("mismatch", &GridResult::mismatch);
  py::class_<Report>(m, "ConformReport", "What pfx.conform found (docs/conform.md, \"Reading a report\").")
      .def_readonly("engine", &Report::engine)
      .def_readonly("chunk", &Report::chunk)
      .def_readonly("rule_chunk", &Report::rule_chunk)
      .def_readonly("vocab", &Report::vocab)
      .def_readonly("lengths", &Report::lengths)
      .def_readonly("prompts", &Report::prompts)
      .def_readonly("cold_runs", &Report::cold_runs)
      .def_readonly("prefilled_tokens", &Report::prefilled_tokens)
      .def_readonly("cold_disagreement", &Report::cold_disagreement)
      .def_property_readonly("deterministic", [](const Report& r) { return !r.cold_disagreement.has_value(); })
      .def_readonly("grids", &Report::grids)
      .def_readonly("recommended", &Report::recommended)
      .def_property_readonly("verdict", [](const Report& r) { return std::string(conform::to_string(r.verdict)); })
      .def_property_readonly("exit_status", [](const Report& r) { return conform::exit_status(r.verdict); })
      .def_property_readonly("explanation", &Report::explanation)
      .def_readonly("elapsed_s", &Report::elapsed_s)
      .def("grid", [](const Report& r, std::size_t g) -> std::optional<GridResult> {
        const GridResult* found = r.find(g);
        return found == nullptr ? std::nullopt : std::optional<GridResult>(*found);
      }, py::arg("grid"), "The result for one grid, or None when it was not a candidate.")
      .def("__str__", &conform::to_text)
      .def("__repr__", [](const Report& r) {
        return "<ConformReport verdict=" + std::string(conform::to_string(r.verdict)) + " recommended=" +
               (r.recommended ? std::to_string(*r.recommended) : std::string("None")) + ">";
      });

  m.def(
      "conform",
      [](py::object engine, std::optional<std::size_t> chunk, std::optional<std::size_t> rule_chunk,
         const std::string& budget, std::optional<std::uint64_t> seed, std::optional<std::size_t> max_grid,
         std::optional<std::size_t> prompts, const std::string& name) {
        if (chunk && *chunk == 0) throw py::value_error("pfx.conform: chunk must be at least 1");
        conform::CheckOptions options;
        try {
          options.budget = conform::Budget::named(budget);
        } catch (const std::invalid_argument& e) {
          throw py::value_error(std::string("pfx.conform: ") + e.what());
        }
        if (seed) options.budget.seed = *seed;
        if (max_grid) options.budget.max_grid = *max_grid;
        if (prompts) options.budget.prompts = *prompts;
        options.rule_chunk = rule_chunk;
        options.engine_name = name.empty() ? std::string(py::str(py::type::of(engine).attr("__name__"))) : name;
        PythonEngine wrapped(std::move(engine), chunk);
        return conform::check(wrapped, options);
      },
      py::arg("engine"), py::kw_only(), py::arg("chunk") = py::none(), py::arg("rule_chunk") = py::none(),
      py::arg("budget") = "default", py::arg("seed") = py::none(), py::arg("max_grid") = py::none(),
      py::arg("prompts") = py::none(), py::arg("name") = "",
      "Checks a Python engine (docs/python.md, \"Checking an engine\"): on which chunk grid a resume equals a "
      "cold run bit for bit. Returns a ConformReport.");
}

}  // namespace pfx::python
