#include <pfx/cli/lane_options.hpp>

#include <fmt/format.h>

namespace pfx::cli {

std::string describe_engine(const engines::ReferenceModelShape& shape) {
  return fmt::format("reference engine (vocab {}, width {}, {} layers, chunk {})", shape.vocab, shape.width,
                     shape.layers, shape.chunk);
}

}  // namespace pfx::cli
