#include <pfx/driver/kv_state.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace pfx::driver {

void KvState::fill(std::size_t from, std::size_t to, float) {
  check_rows(shape(), from, to, "KvState::fill");
  throw std::logic_error("KvState::fill: this KV state is a view of a cache its engine owns; pfx cannot write its rows");
}

std::vector<float> KvState::copy_rows(std::size_t from, std::size_t to) const {
  check_rows(shape(), from, to, "KvState::copy_rows");
  throw std::logic_error("KvState::copy_rows: this KV state is a view of a cache its engine owns; read_rows reads its "
                         "rows in the engine's format where readable()");
}

std::vector<std::byte> KvState::read_rows(std::size_t from, std::size_t to) const {
  check_rows(shape(), from, to, "KvState::read_rows");
  if (!owns_rows()) throw std::logic_error("KvState::read_rows: this KV state's rows cannot be read (readable() is false)");
  const std::vector<float> floats = copy_rows(from, to);
  std::vector<std::byte> bytes(floats.size() * sizeof(float));
  if (!floats.empty()) std::memcpy(bytes.data(), floats.data(), bytes.size());
  return bytes;
}

void KvState::for_each_row(std::size_t from, std::size_t to, const RowVisitor& visit) const {
  check_rows(shape(), from, to, "KvState::for_each_row");
  const auto refuse = [from, to](const std::string& what) {
    return std::logic_error("KvState::for_each_row: the read of rows [" + std::to_string(from) + ", " +
                            std::to_string(to) + ") " + what);
  };
  const auto held_from = [&](std::size_t p) {  // the first row at or past p that the state holds
    while (p < to && !holds(p)) ++p;
    return p;
  };
  std::size_t next = held_from(from);  // the row the read owes next
  std::size_t yielded = 0;
  visit_rows(from, to, [&](std::size_t row, std::span<const std::byte> bytes) {
    if (row >= to) throw refuse("yielded row " + std::to_string(row) + ", past its end");
    if (row != next) throw refuse("yielded row " + std::to_string(row) + " where row " + std::to_string(next) + " was next");
    if (bytes.empty()) {
      throw refuse("yielded row " + std::to_string(row) + " with no bytes: an empty row would compare equal to any other");
    }
    visit(row, bytes);
    ++yielded;
    next = held_from(row + 1);
  });
  const auto held = [&] {  // the rows of [from, to) that the state holds: those the read owes
    std::size_t count = 0;
    for (std::size_t p = from; p < to; ++p) count += holds(p) ? 1 : 0;
    return count;
  };
  if (next != to) {
    throw refuse("yielded " + std::to_string(yielded) + " of its " + std::to_string(held()) +
                 " rows: the rest would go uncompared");
  }
}

void KvState::visit_rows(std::size_t from, std::size_t to, const RowVisitor& visit) const {
  if (!owns_rows()) {
    for (std::size_t row = from; row < to; ++row) visit(row, read_rows(row, row + 1));
    return;
  }
  // copy_rows's layout: 2 x layers planes of `rows` rows of `width` floats; a row's own read is its
  // row of each plane, in plane order.
  const std::vector<float> floats = copy_rows(from, to);
  const std::size_t rows = to - from;
  const std::size_t width = shape().width;
  const std::size_t planes = 2 * shape().layers;
  std::vector<float> row(planes * width);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t plane = 0; plane < planes; ++plane) {
      std::copy_n(floats.begin() + static_cast<std::ptrdiff_t>((plane * rows + i) * width), width,
                  row.begin() + static_cast<std::ptrdiff_t>(plane * width));
    }
    visit(from + i, std::as_bytes(std::span(row)));
  }
}

void forget_rows(KvState& kv, std::size_t from, std::size_t end, bool poison) {
  kv.forget(from);
  if (poison && kv.owns_rows() && from < end) kv.fill(from, end, std::numeric_limits<float>::quiet_NaN());
}

void check_shape(const KvShape& shape, const char* what) {
  if (shape.capacity == 0 || shape.layers == 0 || shape.width == 0) {
    throw std::invalid_argument(std::string(what) + ": capacity, layers and width must all be at least 1");
  }
  // bytes() = capacity x width x layers x 2 x sizeof(float), each step checked against SIZE_MAX.
  std::size_t bytes = shape.capacity;
  for (const std::size_t factor : {shape.width, shape.layers, std::size_t{2}, sizeof(float)}) {
    if (bytes > std::numeric_limits<std::size_t>::max() / factor) {
      throw std::length_error(std::string(what) + ": a KV state of " + std::to_string(shape.capacity) +
                              " rows x " + std::to_string(shape.layers) + " layers x " +
                              std::to_string(shape.width) + " floats (keys and values) does not fit 64 bits of bytes");
    }
    bytes *= factor;
  }
}

void check_rows(const KvShape& shape, std::size_t from, std::size_t to, const char* what) {
  if (from > to || to > shape.capacity) {
    throw std::out_of_range(std::string(what) + ": rows [" + std::to_string(from) + ", " +
                            std::to_string(to) + ") are not within the KV state's " +
                            std::to_string(shape.capacity) + " rows");
  }
}

}  // namespace pfx::driver
