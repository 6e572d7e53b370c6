#pragma once

/// \file
/// The token type shared by every part of pfx, and the one range of token ids every entry point
/// accepts (the pfx program's readers, the Python module).

#include <cstdint>
#include <limits>
#include <string_view>

namespace pfx {

/// One prompt or generated token id, as the engine's tokenizer produces it.
using token = std::int32_t;

/// The largest token id: ids are integers in 0..max_token_id (2^31 - 1). A negative id, or one
/// past it, is refused wherever ids come from outside, with token_id_expected in the message.
inline constexpr std::int64_t max_token_id = std::numeric_limits<token>::max();

/// The words every entry point uses to refuse a bad id, followed by ", got <what it got>".
inline constexpr std::string_view token_id_expected = "expected a token id (an integer in 0..2147483647)";

/// Whether `id` is in the one range of token ids.
[[nodiscard]] constexpr bool valid_token_id(std::int64_t id) noexcept { return id >= 0 && id <= max_token_id; }

static_assert(max_token_id == 2147483647, "token_id_expected spells the range out");

}  // namespace pfx
