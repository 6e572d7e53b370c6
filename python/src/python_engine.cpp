// An engine written in Python as a pfx::driver::Engine: the wrapper pfx.Lane, pfx.conform and
// pfx.verify share (python_engine.hpp).

#include "python_engine.hpp"

#include <pfx/driver/host_kv_state.hpp>

#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace pfx::python {
namespace {

constexpr const char* forms =
    " (an engine that owns its cache has chunk, vocab, prefill(tokens, start), decode(token, position) and "
    "forget(position); one that writes pfx's KV state has chunk, vocab, layers, width and prefill(tokens, start, kv))";

/// A positive integer attribute of the engine; TypeError or ValueError naming it otherwise.
std::size_t positive_attribute(const py::object& engine, const char* name, const std::string& caller) {
  if (!py::hasattr(engine, name)) {
    throw py::type_error(caller + ": the engine has no attribute '" + name + "'" + forms);
  }
  const py::object value = engine.attr(name);
  if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value)) {
    throw py::type_error(caller + ": engine." + name + " must be an int, not " + Py_TYPE(value.ptr())->tp_name);
  }
  const long long n = value.cast<long long>();
  if (n < 1) throw py::value_error(caller + ": engine." + name + " must be at least 1, got " + std::to_string(n));
  return static_cast<std::size_t>(n);
}

py::list token_list(std::span<const token> tokens) {
  py::list ids(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) ids[i] = py::int_(tokens[i]);
  return ids;
}

/// A callable attribute, or None when the engine has none (or it is None).
py::object optional_method(const py::object& engine, const char* name) {
  if (!py::hasattr(engine, name)) return py::none();
  py::object method = engine.attr(name);
  return method.is_none() ? py::none() : method;
}

/// For each Python engine that owns its cache, the view that took it over last. Kept here, not in a
/// wrapper, because two lanes (or a lane and a check) wrap the same Python object each in their own
/// PythonEngine. Every view holds a reference to its engine, so no key outlives its object while a
/// view names it; the GIL serializes every access.
std::unordered_map<const PyObject*, const void*>& holders() {
  static std::unordered_map<const PyObject*, const void*> map;
  return map;
}

}  // namespace

/// A view of the one cache a Python engine owns, `capacity` rows of it.
class CacheView final : public driver::KvState {
 public:
  CacheView(const PythonEngine& owner, std::size_t capacity)
      : owner_(owner), engine_(owner.engine_), shape_{.capacity = capacity, .layers = 0, .width = 0},
        forget_(owner.engine_.attr("forget")), read_rows_(optional_method(owner.engine_, "read_rows")),
        read_each_row_(optional_method(owner.engine_, "read_each_row")),
        synchronize_(optional_method(owner.engine_, "synchronize")) {}
  ~CacheView() override {
    const auto it = holders().find(engine_.ptr());
    if (it != holders().end() && it->second == this) holders().erase(it);
  }
  CacheView(const CacheView&) = delete;
  CacheView& operator=(const CacheView&) = delete;

  [[nodiscard]] const driver::KvShape& shape() const noexcept override { return shape_; }

  void forget(std::size_t from) override {
    driver::check_rows(shape_, from, shape_.capacity, "forget");
    if (from == 0) holders()[engine_.ptr()] = this;  // forgetting everything takes the cache over
    require_current("forget");
    forget_(from);
  }

  void synchronize() override {
    if (!synchronize_.is_none()) synchronize_();
  }

  [[nodiscard]] bool readable() const noexcept override { return !read_rows_.is_none(); }

  [[nodiscard]] std::vector<std::byte> read_rows(std::size_t from, std::size_t to) const override {
    driver::check_rows(shape_, from, to, "read_rows");
    if (read_rows_.is_none()) throw std::logic_error(owner_.caller_ + ": the engine has no read_rows");
    require_current("read_rows");
    return bytes_of(read_rows_(from, to), "engine.read_rows must return bytes or a buffer");
  }

  /// The bytes of `result` (bytes or any buffer); TypeError saying `expected` otherwise.
  [[nodiscard]] std::vector<std::byte> bytes_of(const py::object& result, const char* expected) const {
    PyObject* bytes = PyBytes_FromObject(result.ptr());
    if (bytes == nullptr) {
      PyErr_Clear();
      throw py::type_error(owner_.caller_ + ": " + expected + ", not " + Py_TYPE(result.ptr())->tp_name);
    }
    const py::object owned = py::reinterpret_steal<py::object>(bytes);
    const auto* data = reinterpret_cast<const std::byte*>(PyBytes_AS_STRING(bytes));
    return {data, data + PyBytes_GET_SIZE(bytes)};
  }

  /// Throws unless this view holds the cache: another view of the same engine forgot it from 0 since.
  void require_current(const char* what) const {
    const auto it = holders().find(engine_.ptr());
    if (it == holders().end() || it->second != this) {
      throw std::logic_error(owner_.caller_ + ": " + what + " on a KV state whose cache the engine has since "
                             "given to another (one engine's cache serves one lane or check at a time)");
    }
  }

 protected:
  /// The engine's read_each_row where it has one (one call: its cache is read once), else a
  /// read_rows a row.
  void visit_rows(std::size_t from, std::size_t to, const RowVisitor& visit) const override {
    if (read_each_row_.is_none() || read_rows_.is_none()) return driver::KvState::visit_rows(from, to, visit);
    require_current("read_each_row");
    const char* expected = "engine.read_each_row must return a sequence of one bytes or buffer a row";
    const py::object result = read_each_row_(from, to);
    if (!py::isinstance<py::sequence>(result) || py::len(result) != to - from) {
      throw py::type_error(owner_.caller_ + ": " + expected + " (" + std::to_string(to - from) + " rows), " +
                           (py::isinstance<py::sequence>(result) ? "got " + std::to_string(py::len(result))
                                                                 : "not " + std::string(Py_TYPE(result.ptr())->tp_name)));
    }
    std::size_t row = from;
    for (const py::handle bytes : result) visit(row++, bytes_of(py::reinterpret_borrow<py::object>(bytes), expected));
  }

 private:
  const PythonEngine& owner_;
  py::object engine_;  ///< keeps the engine, the key of holders(), alive
  driver::KvShape shape_;
  py::object forget_, read_rows_, read_each_row_, synchronize_;
};

PythonEngine::PythonEngine(py::object engine, std::optional<std::size_t> chunk, std::string caller)
    : engine_(std::move(engine)),
      caller_(std::move(caller)),
      chunk_(chunk.value_or(positive_attribute(engine_, "chunk", caller_))),
      vocab_(positive_attribute(engine_, "vocab", caller_)),
      owns_cache_(py::hasattr(engine_, "forget") && !engine_.attr("forget").is_none()) {
  if (!owns_cache_) {
    layers_ = positive_attribute(engine_, "layers", caller_);
    width_ = positive_attribute(engine_, "width", caller_);
  }
  if (!py::hasattr(engine_, "prefill")) throw py::type_error(caller_ + ": the engine has no attribute 'prefill'" + forms);
  prefill_ = engine_.attr("prefill");
  decode_ = optional_method(engine_, "decode");
}

PythonEngine::~PythonEngine() = default;

std::optional<std::size_t> PythonEngine::capacity() const {
  if (!owns_cache_ || !py::hasattr(engine_, "capacity") || engine_.attr("capacity").is_none()) return std::nullopt;
  return positive_attribute(engine_, "capacity", caller_);
}

std::unique_ptr<driver::KvState> PythonEngine::make_kv_state(std::size_t capacity) const {
  if (!owns_cache_) {
    return std::make_unique<driver::HostKvState>(driver::KvShape{.capacity = capacity, .layers = layers_, .width = width_});
  }
  if (const std::optional<std::size_t> rows = this->capacity()) {
    if (*rows < capacity) {
      throw std::length_error(caller_ + ": the engine's cache holds " + std::to_string(*rows) + " rows (engine.capacity), "
                              "fewer than the " + std::to_string(capacity) + " asked for");
    }
  }
  return std::make_unique<CacheView>(*this, capacity);
}

void PythonEngine::prefill(driver::KvState& kv, std::span<const token> tokens, std::size_t position,
                           std::span<float> logits) {
  if (owns_cache_) {
    dynamic_cast<const CacheView&>(kv).require_current("prefill");
    store_logits(prefill_(token_list(tokens), position), logits, "prefill");
    return;
  }
  host_call(kv, prefill_, token_list(tokens), position, logits, "prefill");
}

void PythonEngine::decode(driver::KvState& kv, token next, std::size_t position, std::span<float> logits) {
  if (decode_.is_none()) {  // a one-token prefill: it writes row `position` from the rows before it
    prefill(kv, std::span(&next, 1), position, logits);
    return;
  }
  if (owns_cache_) {
    dynamic_cast<const CacheView&>(kv).require_current("decode");
    store_logits(decode_(next, position), logits, "decode");
    return;
  }
  host_call(kv, decode_, py::int_(next), position, logits, "decode");
}

void PythonEngine::host_call(driver::KvState& kv, const py::object& method, const py::object& first,
                             std::size_t position, std::span<float> logits, const char* name) {
  auto& host = dynamic_cast<driver::HostKvState&>(kv);
  const driver::KvShape& shape = host.shape();
  const auto f = static_cast<py::ssize_t>(sizeof(float));
  const auto width = static_cast<py::ssize_t>(shape.width);
  const auto capacity = static_cast<py::ssize_t>(shape.capacity);
  py::memoryview view = py::memoryview::from_buffer(
      host.row(0, driver::Plane::key, 0),
      {static_cast<py::ssize_t>(shape.layers), py::ssize_t{2}, capacity, width},
      {2 * capacity * width * f, capacity * width * f, width * f, f}, false);
  const py::object result = method(first, position, view);
  // The rows are pfx's: no view of them may outlive the call. A buffer taken from kv (numpy.asarray)
  // holds a reference to kv, as does an object that keeps kv itself (torch.frombuffer's tensor keeps
  // kv and the rows' address, not an export); a memoryview made from kv (cast, a slice) shares kv's
  // managed buffer instead. Any of them, still alive, is refused.
  const auto* memory = reinterpret_cast<PyMemoryViewObject*>(view.ptr());
  if (Py_REFCNT(view.ptr()) > 1 || memory->mbuf->exports > 1) {
    throw py::value_error(caller_ + ": engine." + name + " kept a view of kv after it returned (a numpy array, "
                          "tensor or memoryview made from it): make such views inside " + name + " only");
  }
  view.attr("release")();
  store_logits(result, logits, name);
}

/// The logits a call returned: a buffer of vocab float32 or float64 values, or a sequence of vocab
/// numbers.
void PythonEngine::store_logits(const py::object& result, std::span<float> logits, const char* name) const {
  const std::string wrong = caller_ + ": engine." + name + " must return the last row's logits, " +
                            std::to_string(vocab_) + " numbers (a float32 buffer or a sequence of floats)";
  if (PyObject_CheckBuffer(result.ptr()) != 0) {
    const py::buffer_info info = py::reinterpret_borrow<py::buffer>(result).request();
    if (static_cast<std::size_t>(info.size) != vocab_) throw py::value_error(wrong + ", got " + std::to_string(info.size));
    if (info.ndim == 1 && info.strides[0] == static_cast<py::ssize_t>(sizeof(float)) &&
        info.format == py::format_descriptor<float>::format()) {
      std::memcpy(logits.data(), info.ptr, vocab_ * sizeof(float));
      return;
    }
  }
  if (!py::isinstance<py::sequence>(result) && !py::hasattr(result, "tolist") && PyObject_CheckBuffer(result.ptr()) == 0) {
    throw py::type_error(wrong + ", got " + Py_TYPE(result.ptr())->tp_name);
  }
  const py::object values = py::hasattr(result, "tolist") ? result.attr("tolist")() : result;
  const auto sequence = py::reinterpret_borrow<py::sequence>(values);
  if (sequence.size() != vocab_) throw py::value_error(wrong + ", got " + std::to_string(sequence.size()));
  for (std::size_t i = 0; i < vocab_; ++i) logits[i] = static_cast<float>(sequence[i].cast<double>());
}

}  // namespace pfx::python
