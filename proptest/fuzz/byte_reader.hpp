#pragma once

/// \file
/// Reads a fuzz input as a stream of small decisions. Past the end every read answers 0, so that
/// every input, however short, decodes to something, and a longer input only adds to it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace pfx::fuzz {

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::uint8_t> bytes) noexcept : bytes_(bytes) {}

  [[nodiscard]] bool exhausted() const noexcept { return next_ >= bytes_.size(); }

  /// The next byte, or 0 past the end.
  std::uint8_t byte() noexcept { return exhausted() ? 0 : bytes_[next_++]; }

  /// A value in [0, bound) (bound > 0), from one byte, or from as many as a bound above 256 takes:
  /// biased, but every value is reachable.
  std::size_t below(std::size_t bound) noexcept {
    std::size_t value = byte();
    for (std::size_t reach = 256; reach < bound && reach <= SIZE_MAX / 256; reach *= 256) value = value * 256 + byte();
    return value % bound;
  }

  /// Everything not read yet, as text (an empty view past the end).
  std::string_view rest() noexcept {
    if (exhausted()) return {};
    const std::span<const std::uint8_t> left = bytes_.subspan(next_);
    next_ = bytes_.size();
    return {reinterpret_cast<const char*>(left.data()), left.size()};
  }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t next_ = 0;
};

}  // namespace pfx::fuzz
