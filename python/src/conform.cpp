// pfx.conform: a Python engine, of either form (python_engine.hpp), checked by the one C++ check,
// pfx::conform::check.

#include "conform.hpp"
#include "convert.hpp"
#include "progress.hpp"
#include "python_engine.hpp"

#include <pfx/conform/check.hpp>

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

const char* plane_name(driver::Plane plane) { return plane == driver::Plane::key ? "key" : "value"; }

}  // namespace

void add_conform(py::module_& m) {
  using conform::Difference;
  using conform::GridResult;
  using conform::Mismatch;
  using conform::Report;
  py::class_<Difference>(m, "ConformDifference", "Where two runs first differ: a KV row, or the logits.")
      .def_property_readonly("where", [](const Difference& d) { return conform::to_string(d.where); })
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
      .def_readonly("difference", &Mismatch::difference)
      .def("__repr__", [](const Mismatch& mm) {
        return "<ConformMismatch prompt " + std::to_string(mm.prompt_number) + " (" + std::to_string(mm.prompt.size()) +
               " tokens), offset " + std::to_string(mm.offset) + ", after " + std::to_string(mm.held.size()) +
               " held tokens: " + mm.difference.describe() + ">";
      });
  py::class_<conform::ColdDisagreement>(m, "ConformColdDisagreement", "Two cold runs of one prompt that differ.")
      .def_readonly("prompt_number", &conform::ColdDisagreement::prompt_number)
      .def_readonly("prompt", &conform::ColdDisagreement::prompt)
      .def_readonly("run", &conform::ColdDisagreement::run)
      .def_readonly("difference", &conform::ColdDisagreement::difference);
  py::class_<conform::PremiseFailure>(m, "ConformPremiseFailure",
                                      "A premise of the check that failed: the engine is degenerate.")
      .def_property_readonly("premise", [](const conform::PremiseFailure& p) { return std::string(conform::to_string(p.premise)); },
                             "\"rows written\", \"finite logits\" or \"logits depend on tokens\"")
      .def_readonly("detail", &conform::PremiseFailure::detail)
      .def("__str__", [](const conform::PremiseFailure& p) { return std::string(conform::to_string(p.premise)) + ": " + p.detail; })
      .def("__repr__", [](const conform::PremiseFailure& p) {
        return "<ConformPremiseFailure " + std::string(conform::to_string(p.premise)) + ": " + p.detail + ">";
      });
  py::class_<GridResult>(m, "ConformGrid",
                         "One candidate grid: its resumes, its skipped offsets, and the first mismatch if any.")
      .def_readonly("grid", &GridResult::grid)
      .def_readonly("resumes", &GridResult::resumes)
      .def_readonly("skipped", &GridResult::skipped, "offsets not resumed at because the rule never resumes there")
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
      .def_readonly("premise_failure", &Report::premise_failure,
                    "None, or the premise that failed (the verdict is then \"degenerate\")")
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
      .def("to_json", &conform::to_json,
           "The report as the JSON text `pfx conform --json` prints: the same fields, the same shape.")
      .def("__repr__", [](const Report& r) {
        return "<ConformReport verdict=" + std::string(conform::to_string(r.verdict)) + " recommended=" +
               (r.recommended ? std::to_string(*r.recommended) : std::string("None")) + ">";
      });

  m.def(
      "conform",
      [](py::object engine, std::optional<std::size_t> chunk, std::optional<std::size_t> rule_chunk,
         py::handle prefill_step, const std::string& budget, std::optional<std::uint64_t> seed, std::optional<std::size_t> max_grid,
         std::optional<std::size_t> prompts, bool decode_rows, const std::string& name, const py::object& progress) {
        if (chunk && *chunk == 0) throw py::value_error("pfx.conform: chunk must be at least 1");
        if (rule_chunk && *rule_chunk == 0) {  // one meaning everywhere: None is the engine's chunk (pfx.Lane, pfx.verify)
          throw py::value_error("pfx.conform: rule_chunk must be at least 1 (None: the engine's chunk), not 0");
        }
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
        options.prefill_step = count(prefill_step, "pfx.conform: prefill_step");
        options.decode_rows = decode_rows;
        options.engine_name = name.empty() ? std::string(py::str(py::type::of(engine).attr("__name__"))) : name;
        const ProgressArgument told(progress, "prompts", "pfx.conform");
        options.progress = told.callback();
        PythonEngine wrapped(std::move(engine), chunk, "pfx.conform");
        return conform::check(wrapped, options);
      },
      py::arg("engine"), py::kw_only(), py::arg("chunk") = py::none(), py::arg("rule_chunk") = py::none(),
      py::arg("prefill_step") = 0, py::arg("budget") = "default", py::arg("seed") = py::none(), py::arg("max_grid") = py::none(),
      py::arg("prompts") = py::none(), py::arg("decode_rows") = false, py::arg("name") = "",
      py::arg("progress") = py::none(),
      "Checks a Python engine (docs/python.md, \"Checking an engine\"): on which chunk grid a resume equals a "
      "cold run bit for bit; prefill_step (the rule's, INV-12; 0: none) skips the offsets the rule never resumes "
      "at under it; decode_rows adds the finding whether rows the engine's decode wrote equal a cold prefill's "
      "(docs/conform.md, \"Rows decode wrote\"). Returns a ConformReport.");
}

}  // namespace pfx::python
