#include <pfx/driver/host_kv_state.hpp>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace pfx::driver {

HostKvState::HostKvState(const KvShape& shape) : shape_(shape) {
  check_shape(shape, "HostKvState");
  data_ = std::make_unique<float[]>(shape.floats());
  std::fill_n(data_.get(), shape.floats(), std::numeric_limits<float>::quiet_NaN());
}

void HostKvState::fill(std::size_t from, std::size_t to, float value) {
  check_rows(shape_, from, to, "HostKvState::fill");
  for (std::size_t layer = 0; layer < shape_.layers; ++layer) {
    for (const Plane plane : {Plane::key, Plane::value}) {
      std::fill(row(layer, plane, from), row(layer, plane, to), value);
    }
  }
}

std::vector<float> HostKvState::copy_rows(std::size_t from, std::size_t to) const {
  check_rows(shape_, from, to, "HostKvState::copy_rows");
  std::vector<float> out;
  out.reserve(shape_.layers * 2 * (to - from) * shape_.width);
  for (std::size_t layer = 0; layer < shape_.layers; ++layer) {
    for (const Plane plane : {Plane::key, Plane::value}) {
      out.insert(out.end(), row(layer, plane, from), row(layer, plane, to));
    }
  }
  return out;
}

}  // namespace pfx::driver
