#include <pfx/llama/sequence_state.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>

namespace pfx::llama {
namespace {

/// What newer llama.cpp writes first in a sequence's state (llama-context.cpp, io_magic).
constexpr std::uint32_t sequence_state_magic = 0xaf143cd8;

/// The bytes of a state's sequence, read in order; every read checks that the bytes are there.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  template <class T>
  T read() {
    T value;
    std::memcpy(&value, take(sizeof(T)).data(), sizeof(T));
    return value;
  }
  std::span<const std::byte> take(std::size_t n) {
    if (n > bytes_.size() - at_) throw std::runtime_error("llama.cpp's sequence state ends early: not a format pfx::llama reads");
    const std::span<const std::byte> part = bytes_.subspan(at_, n);
    at_ += n;
    return part;
  }
  [[nodiscard]] bool done() const noexcept { return at_ == bytes_.size(); }

 private:
  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
};

/// One layer's keys or values in the state: every cell's row of it.
struct Plane {
  std::span<const std::byte> block;  // every cell's data of one layer
  std::size_t row = 0;               // bytes of one cell's row
  std::size_t element = 0;           // transposed: bytes of one element (0: not transposed)
};

/// The state's planes (every layer's keys, then every layer's values) and the cells of positions
/// [from, to), parsed once whatever the number of rows.
struct Parsed {
  std::vector<Plane> planes;
  std::vector<std::size_t> order;  // the cells of positions from .. to - 1
  std::size_t cells = 0;

  /// Appends cell c's row of `plane` to `out`.
  void append(const Plane& plane, std::size_t c, std::vector<std::byte>& out) const {
    if (plane.element == 0) {
      const auto row = plane.block.subspan(c * plane.row, plane.row);
      out.insert(out.end(), row.begin(), row.end());
      return;
    }
    // Transposed: column j of cell c is element j * cells + c of the block.
    for (std::size_t j = 0; j < plane.row / plane.element; ++j) {
      const auto at = plane.block.subspan((j * cells + c) * plane.element, plane.element);
      out.insert(out.end(), at.begin(), at.end());
    }
  }
};

Parsed parse(std::span<const std::byte> state, std::size_t from, std::size_t to) {
  // The format of llama_kv_cache(_unified)::state_write, after llama_context's header where there is
  // one (a magic number and the sequence): the number of streams; per stream the cells'
  // count, each cell's position and sequences, then each layer's key rows, then each layer's value
  // rows, or, for a transposed value cache, each value column across the cells.
  Parsed parsed;
  Reader in(state);
  std::map<std::size_t, std::size_t> cell_of;  // position -> cell, in the one stream that holds rows
  auto streams = in.read<std::uint32_t>();
  if (streams == sequence_state_magic) {  // newer llama.cpp: the magic, the sequence, then the cache
    (void)in.read<std::int32_t>();
    streams = in.read<std::uint32_t>();
  }
  for (std::uint32_t s = 0; s < streams; ++s) {
    const auto count = in.read<std::uint32_t>();
    if (count == 0) continue;
    if (parsed.cells != 0) throw std::runtime_error("llama.cpp's sequence state holds rows in two streams");
    parsed.cells = count;
    for (std::size_t c = 0; c < parsed.cells; ++c) {
      const auto pos = in.read<std::int32_t>();
      const auto sequences = in.read<std::uint32_t>();
      (void)in.take(std::size_t{sequences} * sizeof(std::int32_t));
      if (pos < 0 || !cell_of.emplace(static_cast<std::size_t>(pos), c).second) {
        throw std::runtime_error("llama.cpp's sequence state holds position " + std::to_string(pos) + " twice");
      }
    }
    const auto transposed = in.read<std::uint32_t>();
    const auto layers = in.read<std::uint32_t>();
    for (int value_plane = 0; value_plane < 2; ++value_plane) {
      for (std::uint32_t l = 0; l < layers; ++l) {
        (void)in.read<std::int32_t>();  // the element type: the same on both sides of a comparison
        Plane plane;
        if (value_plane == 1 && transposed != 0) {
          plane.element = in.read<std::uint32_t>();
          plane.row = plane.element * in.read<std::uint32_t>();
        } else {
          plane.row = static_cast<std::size_t>(in.read<std::uint64_t>());
        }
        plane.block = in.take(plane.row * parsed.cells);
        parsed.planes.push_back(plane);
      }
    }
  }
  if (!in.done()) throw std::runtime_error("llama.cpp's sequence state has bytes after its rows: not a format pfx::llama reads");
  for (std::size_t p = from; p < to; ++p) {
    const auto found = cell_of.find(p);
    if (found == cell_of.end()) throw std::runtime_error("llama.cpp's KV cache holds no row at position " + std::to_string(p));
    parsed.order.push_back(found->second);
  }
  return parsed;
}

}  // namespace

std::vector<std::byte> rows_of_sequence_state(std::span<const std::byte> state, std::size_t from, std::size_t to) {
  const Parsed parsed = parse(state, from, to);
  std::vector<std::byte> out;
  for (const Plane& plane : parsed.planes) {
    for (const std::size_t c : parsed.order) parsed.append(plane, c, out);
  }
  return out;
}

void for_each_row_of_sequence_state(std::span<const std::byte> state, std::size_t from, std::size_t to,
                                    const std::function<void(std::size_t, std::span<const std::byte>)>& visit) {
  const Parsed parsed = parse(state, from, to);
  std::vector<std::byte> row;  // one row at a time beside the state
  for (std::size_t i = 0; i < parsed.order.size(); ++i) {
    row.clear();
    for (const Plane& plane : parsed.planes) parsed.append(plane, parsed.order[i], row);
    visit(from + i, row);
  }
}

}  // namespace pfx::llama
