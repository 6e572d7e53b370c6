#pragma once

/// \file
/// The token type shared by every part of pfx.

#include <cstdint>

namespace pfx {

/// One prompt or generated token id, as the engine's tokenizer produces it.
using token = std::int32_t;

}  // namespace pfx
