#include <pfx/llama/sequence_state.hpp>

#include <cstdint>
#include <cstring>
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

/// Calls part(i, bytes) with the bytes of row from + i, for each plane of `state` (every layer's
/// keys, then every layer's values) and in it for each row of [from, to): a row's parts, in call
/// order, are its bytes. The format is parsed once, whatever the number of rows.
template <class Part>
void for_each_part(std::span<const std::byte> state, std::size_t from, std::size_t to, Part part) {
  // The format of llama_kv_cache(_unified)::state_write, after llama_context's header where there is
  // one (a magic number and the sequence): the number of streams; per stream the cells'
  // count, each cell's position and sequences, then each layer's key rows, then each layer's value
  // rows, or, for a transposed value cache, each value column across the cells.
  struct Plane {
    std::span<const std::byte> block;  // every cell's data of one layer
    std::size_t row = 0;               // bytes of one cell's row
    std::size_t element = 0;           // transposed: bytes of one element (0: not transposed)
  };
  Reader in(state);
  std::map<std::size_t, std::size_t> cell_of;  // position -> cell, in the one stream that holds rows
  std::vector<Plane> planes;                   // every layer's keys, then every layer's values
  std::size_t cells = 0;
  auto streams = in.read<std::uint32_t>();
  if (streams == sequence_state_magic) {  // newer llama.cpp: the magic, the sequence, then the cache
    (void)in.read<std::int32_t>();
    streams = in.read<std::uint32_t>();
  }
  for (std::uint32_t s = 0; s < streams; ++s) {
    const auto count = in.read<std::uint32_t>();
    if (count == 0) continue;
    if (cells != 0) throw std::runtime_error("llama.cpp's sequence state holds rows in two streams");
    cells = count;
    for (std::size_t c = 0; c < cells; ++c) {
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
        plane.block = in.take(plane.row * cells);
        planes.push_back(plane);
      }
    }
  }
  if (!in.done()) throw std::runtime_error("llama.cpp's sequence state has bytes after its rows: not a format pfx::llama reads");
  std::vector<std::size_t> order;  // the cells of positions from .. to - 1
  for (std::size_t p = from; p < to; ++p) {
    const auto found = cell_of.find(p);
    if (found == cell_of.end()) throw std::runtime_error("llama.cpp's KV cache holds no row at position " + std::to_string(p));
    order.push_back(found->second);
  }
  for (const Plane& plane : planes) {
    for (std::size_t i = 0; i < order.size(); ++i) {
      const std::size_t c = order[i];
      if (plane.element == 0) {
        part(i, plane.block.subspan(c * plane.row, plane.row));
        continue;
      }
      // Transposed: column j of cell c is element j * cells + c of the block.
      for (std::size_t j = 0; j < plane.row / plane.element; ++j) {
        part(i, plane.block.subspan((j * cells + c) * plane.element, plane.element));
      }
    }
  }
}

}  // namespace

std::vector<std::byte> rows_of_sequence_state(std::span<const std::byte> state, std::size_t from, std::size_t to) {
  std::vector<std::byte> out;
  for_each_part(state, from, to, [&out](std::size_t, std::span<const std::byte> bytes) {
    out.insert(out.end(), bytes.begin(), bytes.end());
  });
  return out;
}

std::vector<std::vector<std::byte>> each_row_of_sequence_state(std::span<const std::byte> state, std::size_t from,
                                                               std::size_t to) {
  std::vector<std::vector<std::byte>> each(to > from ? to - from : 0);
  for_each_part(state, from, to, [&each](std::size_t i, std::span<const std::byte> bytes) {
    each[i].insert(each[i].end(), bytes.begin(), bytes.end());
  });
  return each;
}

}  // namespace pfx::llama
