#pragma once

/// \file
/// A conformance report as one JSON object: what `pfx conform --json` prints and what Python's
/// pfx.ConformReport.to_json() returns (docs/conform.md, "JSON"; docs/schemas/conform.schema.json).
/// Needs the standard library and nlohmann_json alone, so that the Python module compiles it too.

#include <pfx/conform/report.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>

namespace pfx::cli {

/// The report as one JSON object.
[[nodiscard]] nlohmann::ordered_json conform_json(const conform::Report& report);

/// How many runs the check compared with a cold run bit for bit: every resume, and every repeated
/// cold run. The summary states it; a safe verdict with none would vouch for nothing.
[[nodiscard]] std::size_t comparisons(const conform::Report& report);

}  // namespace pfx::cli
