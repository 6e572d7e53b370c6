#include "convert.hpp"

#include "ids_view.hpp"

#include <pfx/common_prefix.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <vector>

namespace py = pybind11;

namespace pfx::python {
namespace {

std::string type_name(py::handle value) { return Py_TYPE(value.ptr())->tp_name; }

/// For messages: short, and never an error itself (a repr may raise, or be huge).
std::string shown(py::handle value) {
  constexpr std::size_t longest = 60;
  try {
    py::str text = py::repr(value);
    if (py::len(text) <= longest) return text.cast<std::string>();
    return py::str(text[py::slice(0, longest, 1)]).cast<std::string>() + "...";
  } catch (const std::exception&) {  // the repr raised, or is not valid UTF-8
    PyErr_Clear();
    return "<" + type_name(value) + ">";
  }
}

/// `value` as a Python int, via __index__ (so numpy integers and bools count, floats do not).
py::int_ as_int(py::handle value, const std::string& what) {
  if (PyIndex_Check(value.ptr()) == 0) {
    raise(PyExc_TypeError, what + " must be an integer, not " + type_name(value) + " (" + shown(value) + ")");
  }
  PyObject* integer = PyNumber_Index(value.ptr());
  if (integer == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::int_>(integer);
}

/// Ids read per block of a buffer: the conversion of a block vectorizes, and only the block that
/// differs from the held ids is scanned one by one.
constexpr std::size_t block = 1024;

/// The value's bits as 64 unsigned bits: a negative value sets the top ones. A value is in range
/// iff its bits from 31 up are clear, so a block is checked by OR-ing its values (which vectorizes
/// even where the instruction set has no 64-bit comparison) and testing once.
template <class T>
constexpr std::uint64_t bits(T value) noexcept {
  using Wide = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;
  return static_cast<std::uint64_t>(static_cast<Wide>(value));
}

static_assert(max_token_id == (std::int64_t{1} << 31) - 1, "in_range tests the bits from 31 up");

template <class T>
constexpr bool in_range(T value) noexcept {
  return (bits(value) >> 31U) == 0;
}

/// The id of a Python object, or -1 when it is not an integer in range (its error, if any, cleared).
token object_token(PyObject* item) {
  if (PyLong_CheckExact(item) == 0) return -1;
  int overflow = 0;
  const long value = PyLong_AsLongAndOverflow(item, &overflow);
  if (overflow != 0 || value < 0 || value > max_token_id) return -1;
  return static_cast<token>(value);
}

// Two buffers per thread, reused (a call converts at most two arguments at once: decide,
// common_prefix): a fresh buffer would cost a page fault per 4 KiB on every call. A buffer much
// larger than the argument of the moment is given back, so none stays far larger than the calls.
thread_local std::array<std::vector<token>, 2> buffers;
thread_local std::size_t buffers_in_use = 0;

}  // namespace

void raise(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

Tokens::Tokens(py::handle items, const char* argument) : argument_(argument) {
  // A machine's own ids (p.record(p.ids, n)): copied, not exported, since the event that reads them
  // changes them, and a live export would refuse it.
  std::size_t held = 0;
  if (const token* ids = ids_of_view(items.ptr(), held)) {
    token* copy = storage(held);
    std::copy(ids, ids + held, copy);
    data_ = copy;
    size_ = held;
    kind_ = Kind::i32;
    return;
  }
  if (PyObject_CheckBuffer(items.ptr()) != 0 &&
      PyObject_GetBuffer(items.ptr(), &view_, PyBUF_FORMAT | PyBUF_STRIDES) == 0) {
    has_view_ = true;
    std::string_view format = view_.format != nullptr ? view_.format : "B";
    if (!format.empty() && (format[0] == '@' || (std::endian::native == std::endian::little &&
                                                 (format[0] == '=' || format[0] == '<')))) {
      format.remove_prefix(1);
    }
    const bool integers = format.size() == 1 && std::string_view("bhilqnBHILQN").find(format[0]) != std::string_view::npos;
    const bool contiguous = view_.ndim == 1 && view_.strides != nullptr && view_.strides[0] == view_.itemsize;
    if (integers && contiguous) {
      const bool is_signed = format[0] >= 'a';
      switch (view_.itemsize) {
        case 1: kind_ = is_signed ? Kind::i8 : Kind::u8; break;
        case 2: kind_ = is_signed ? Kind::i16 : Kind::u16; break;
        case 4: kind_ = is_signed ? Kind::i32 : Kind::u32; break;
        case 8: kind_ = is_signed ? Kind::i64 : Kind::u64; break;
        default: break;
      }
    }
    if (kind_ != Kind::objects) {
      data_ = view_.buf;
      size_ = static_cast<std::size_t>(view_.shape[0]);
      return;
    }
    // Floats, big-endian or strided data: read element by element below, with the same errors.
    PyBuffer_Release(&view_);
    has_view_ = false;
  } else {
    PyErr_Clear();  // an exporter that refuses these flags is read by iteration
  }
  const std::string not_a_sequence = std::string(argument) + " must be a sequence of token ids, not " + type_name(items);
  PyObject* sequence = PySequence_Fast(items.ptr(), not_a_sequence.c_str());
  if (sequence == nullptr) throw py::error_already_set();
  sequence_ = py::reinterpret_steal<py::object>(sequence);
  size_ = static_cast<std::size_t>(PySequence_Fast_GET_SIZE(sequence));
}

Tokens::~Tokens() {
  if (has_view_) PyBuffer_Release(&view_);
  if (slot_ >= 0) --buffers_in_use;  // Tokens live on the stack: released in the reverse order
}

std::span<const token> Tokens::all() { return read(nullptr); }

std::span<const token> Tokens::through_first_difference(std::span<const token> held) { return read(&held); }

std::span<const token> Tokens::read(const std::span<const token>* held) {
  switch (kind_) {
    case Kind::objects: return read_objects(held);
    case Kind::i8: return read_buffer<std::int8_t>(held);
    case Kind::u8: return read_buffer<std::uint8_t>(held);
    case Kind::i16: return read_buffer<std::int16_t>(held);
    case Kind::u16: return read_buffer<std::uint16_t>(held);
    case Kind::i32: return read_buffer<std::int32_t>(held);
    case Kind::u32: return read_buffer<std::uint32_t>(held);
    case Kind::i64: return read_buffer<std::int64_t>(held);
    case Kind::u64: return read_buffer<std::uint64_t>(held);
  }
  return {};
}

template <class T>
std::span<const token> Tokens::read_buffer(const std::span<const token>* held) {
  const T* in = static_cast<const T*>(data_);
  const std::size_t n = size_;
  if constexpr (std::is_same_v<T, token>) {
    // Already ids: compare in place, and check only what the answer reads.
    if (held != nullptr) {
      // ids[0:lcp) equal held ids, which are valid: only the one after them needs a check.
      const std::size_t end = std::min(n, common_prefix(*held, std::span<const token>(in, n)) + 1);
      if (end > 0 && in[end - 1] < 0) bad_number(end - 1, in[end - 1]);
      return {in, end};
    }
    const std::size_t end = n;
    for (std::size_t start = 0; start < end; start += block) {
      const std::size_t stop = std::min(end, start + block);
      bool bad = false;
      for (std::size_t i = start; i < stop; ++i) bad |= in[i] < 0;
      if (bad) {
        for (std::size_t i = start; i < stop; ++i) {
          if (in[i] < 0) bad_number(i, in[i]);
        }
      }
    }
    return {in, end};
  } else {
    token* out = storage(n);
    for (std::size_t start = 0; start < n; start += block) {
      const std::size_t stop = std::min(n, start + block);
      std::uint64_t seen = 0;
      for (std::size_t i = start; i < stop; ++i) {
        seen |= bits(in[i]);
        out[i] = static_cast<token>(in[i]);  // NOLINT(bugprone-signed-char-misuse): int8 token ids are signed; a negative one is refused below
      }
      const bool bad = (seen >> 31U) != 0;
      std::size_t end = stop;
      if (held != nullptr) {
        const std::size_t same = start < held->size() ? std::min(stop, held->size()) - start : 0;
        if (same < stop - start || std::memcmp(out + start, held->data() + start, same * sizeof(token)) != 0) {
          end = start + common_prefix(std::span<const token>(out + start, same), held->subspan(start, same)) + 1;
        }
      }
      if (bad) {
        for (std::size_t i = start; i < end; ++i) {
          if (!in_range(in[i])) bad_number(i, in[i]);
        }
      }
      if (end < stop) return {out, end};
    }
    return {out, n};
  }
}

std::span<const token> Tokens::read_objects(const std::span<const token>* held) {
  PyObject* sequence = sequence_.ptr();
  const std::size_t n = size_;
  const std::size_t most = held != nullptr ? std::min(n, held->size() + 1) : n;
  token* out = storage(most);
  for (std::size_t i = 0; i < most; ++i) {
    // An element's __index__ may change a list: never read past its current end.
    if (static_cast<std::size_t>(PySequence_Fast_GET_SIZE(sequence)) != n) {
      raise(PyExc_RuntimeError, std::string(argument_) + " changed size while it was read");
    }
    PyObject* item = PySequence_Fast_ITEMS(sequence)[i];
    token id = object_token(item);
    if (id < 0) {
      if (PyErr_Occurred() != nullptr) PyErr_Clear();
      if (PyIndex_Check(item) == 0) {
        raise(PyExc_TypeError, std::string(argument_) + "[" + std::to_string(i) + "]: " +
                                   std::string(token_id_expected) + ", got " + type_name(item) + " (" + shown(item) + ")");
      }
      const py::int_ value = as_int(item, std::string(argument_) + "[" + std::to_string(i) + "]");
      int overflow = 0;
      const long long wide = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
      if (wide == -1 && PyErr_Occurred() != nullptr) throw py::error_already_set();
      if (overflow != 0 || !valid_token_id(wide)) bad_element(i, value);
      id = static_cast<token>(wide);
    }
    out[i] = id;
    if (held != nullptr && (i >= held->size() || id != (*held)[i])) return {out, i + 1};
  }
  return {out, most};
}

token* Tokens::storage(std::size_t n) {
  n = std::max<std::size_t>(n, 1);
  if (slot_ < 0 && buffers_in_use < buffers.size()) slot_ = static_cast<int>(buffers_in_use++);
  if (slot_ < 0) {  // a conversion within a conversion (an element's __index__ called pfx)
    owned_ = std::make_unique_for_overwrite<token[]>(n);
    return owned_.get();
  }
  std::vector<token>& buffer = buffers[static_cast<std::size_t>(slot_)];
  if (n > buffer.size() || buffer.size() > 4 * std::max<std::size_t>(n, std::size_t{1} << 16)) {
    std::vector<token>().swap(buffer);
    buffer.resize(n);
  }
  return buffer.data();
}

void Tokens::bad_element(std::size_t index, py::handle value) const {
  raise(PyExc_ValueError, std::string(argument_) + "[" + std::to_string(index) + "]: " + std::string(token_id_expected) +
                              ", got " + shown(value));
}

template <class T>
void Tokens::bad_number(std::size_t index, T value) const {
  raise(PyExc_ValueError, std::string(argument_) + "[" + std::to_string(index) + "]: " + std::string(token_id_expected) +
                              ", got " + std::to_string(value));
}

std::size_t count(py::handle value, const char* argument) {
  const py::int_ integer = as_int(value, argument);
  int overflow = 0;
  const long long small = PyLong_AsLongLongAndOverflow(integer.ptr(), &overflow);
  if (small == -1 && PyErr_Occurred() != nullptr) throw py::error_already_set();
  if (overflow < 0 || (overflow == 0 && small < 0)) {
    raise(PyExc_ValueError, std::string(argument) + " must be >= 0, not " + shown(integer));
  }
  const unsigned long long n = PyLong_AsUnsignedLongLong(integer.ptr());
  if (PyErr_Occurred() != nullptr || n > SIZE_MAX) {
    PyErr_Clear();
    raise(PyExc_OverflowError, std::string(argument) + ": " + shown(integer) + " does not fit 64 bits");
  }
  return static_cast<std::size_t>(n);
}

bool flag(py::handle value, const char* argument) {
  if (PyBool_Check(value.ptr()) == 0) {
    raise(PyExc_TypeError, std::string(argument) + " must be True or False, not " + type_name(value) + " (" +
                               shown(value) + ")");
  }
  return value.ptr() == Py_True;
}

}  // namespace pfx::python
