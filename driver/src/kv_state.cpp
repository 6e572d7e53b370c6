#include <pfx/driver/kv_state.hpp>

#include <stdexcept>
#include <string>

namespace pfx::driver {

void check_rows(const KvShape& shape, std::size_t from, std::size_t to, const char* what) {
  if (from > to || to > shape.capacity) {
    throw std::out_of_range(std::string(what) + ": rows [" + std::to_string(from) + ", " +
                            std::to_string(to) + ") are not within the KV state's " +
                            std::to_string(shape.capacity) + " rows");
  }
}

}  // namespace pfx::driver
