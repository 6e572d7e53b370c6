#pragma once

/// \file
/// Python values to the core's types, with errors that name the argument (and the index) so that a
/// caller can find the bad value. pybind11's own casters would answer a bad element with a generic
/// "incompatible function arguments", and silently accept values the core cannot represent.

#include <pfx/token.hpp>

#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace pfx::python {

/// Raises `type` (a Python exception class) with `message`.
[[noreturn]] void raise(PyObject* type, const std::string& message);

/// A Python argument read as token ids, each in 0..max_token_id (pfx/token.hpp):
///   - an object that exports a one-dimensional, contiguous buffer of integers (array.array 'i', 'l',
///     'q', ..., memoryview, bytes, numpy integer arrays): read in place, no Python object per token;
///     a buffer of int32 is not even copied;
///   - any other iterable of integers (int, or anything with __index__): a list or tuple is read in
///     place, anything else is first made a list.
/// A bad element raises TypeError (not an integer) or ValueError (outside the range), with the same
/// words as every other entry point: "prompt[3]: expected a token id (an integer in 0..2147483647),
/// got -1". The buffer, when there is one, is held until the object is destroyed.
class Tokens {
 public:
  Tokens(pybind11::handle items, const char* argument);
  ~Tokens();
  Tokens(const Tokens&) = delete;
  Tokens& operator=(const Tokens&) = delete;
  Tokens(Tokens&&) = delete;
  Tokens& operator=(Tokens&&) = delete;

  /// How many ids the argument holds.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

  /// Every id, each checked.
  [[nodiscard]] std::span<const token> all();

  /// ids[0 : min(size(), lcp(held, ids) + 1)]: the ids up to and including the first that differs from
  /// `held` (or the first past its end), each checked; the rest are not read. Without a prefill step
  /// the offset rule depends on a prompt only through lcp(held, prompt) and, when the prompt is a
  /// prefix of held, its length, so it answers this prefix exactly as it answers the whole prompt;
  /// with one it depends on the whole length (INV-12), and module.cpp reads all() instead.
  [[nodiscard]] std::span<const token> through_first_difference(std::span<const token> held);

 private:
  enum class Kind { objects, i8, u8, i16, u16, i32, u32, i64, u64 };

  /// Converts ids[0:n) into storage (or, for i32, checks them in place); with `held`, stops after the
  /// first id that differs from it. Returns how many were read.
  std::span<const token> read(const std::span<const token>* held);
  template <class T>
  std::span<const token> read_buffer(const std::span<const token>* held);
  std::span<const token> read_objects(const std::span<const token>* held);
  [[noreturn]] void bad_element(std::size_t index, pybind11::handle value) const;
  template <class T>
  [[noreturn]] void bad_number(std::size_t index, T value) const;

  const char* argument_;
  Kind kind_ = Kind::objects;
  Py_buffer view_{};
  const void* data_ = nullptr;  // the ids of a buffer, or of a copy
  bool has_view_ = false;
  pybind11::object sequence_;  // the list or tuple read, for Kind::objects
  std::size_t size_ = 0;
  /// Room for n converted ids: a per-thread buffer reused between calls (convert.cpp).
  token* storage(std::size_t n);
  int slot_ = -1;
  std::unique_ptr<token[]> owned_;
};

/// A count (an offset, canonical_end, keep_min, chunk): an integer >= 0 that fits std::size_t.
/// TypeError when not an integer, ValueError when negative, OverflowError when too large.
[[nodiscard]] std::size_t count(pybind11::handle value, const char* argument);

/// True or False, nothing else: TypeError otherwise (1, None and "no" are not flags).
[[nodiscard]] bool flag(pybind11::handle value, const char* argument);

}  // namespace pfx::python
