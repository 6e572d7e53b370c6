#pragma once

/// \file
/// The rows of llama.cpp's KV cache in the bytes llama_state_seq_get_data writes for one sequence:
/// the format of llama_kv_cache(_unified)::state_write, parsed without llama.cpp (pfx::llama reads its
/// contexts through it, and the Python module compiles it in for pfx.integrations.llama_cpp).

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

namespace pfx::llama {

/// The rows [from, to) of sequence 0 in the bytes of llama_state_seq_get_data (`state`): for each
/// layer its key rows, then for each layer its value rows, each row in the cache's own element type
/// and ordered by position (a transposed value cache is gathered back into rows). Throws
/// std::runtime_error when the bytes are not in the format of llama.cpp's unified KV cache, or when a
/// position in [from, to) is missing or held twice.
[[nodiscard]] std::vector<std::byte> rows_of_sequence_state(std::span<const std::byte> state, std::size_t from,
                                                            std::size_t to);

/// Calls visit(position, bytes) for each position of [from, to) in order, `bytes` being
/// rows_of_sequence_state(state, position, position + 1), valid during the call only: each row apart
/// from one parse, one row held at a time. Throws as rows_of_sequence_state does, before any call.
void for_each_row_of_sequence_state(std::span<const std::byte> state, std::size_t from, std::size_t to,
                                    const std::function<void(std::size_t, std::span<const std::byte>)>& visit);

}  // namespace pfx::llama
