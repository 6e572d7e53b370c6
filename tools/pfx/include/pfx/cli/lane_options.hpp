#pragma once

/// \file
/// How the program names the reference engine it runs (the lane line and "engine" setting of
/// `pfx replay` and `pfx soak`, docs/cli.md).

#include <pfx/driver/lane.hpp>
#include <pfx/engines/reference_model.hpp>

#include <string>

namespace pfx::cli {

/// "reference engine (vocab V, width W, L layers, chunk C)".
[[nodiscard]] std::string describe_engine(const engines::ReferenceModelShape& shape);

}  // namespace pfx::cli
