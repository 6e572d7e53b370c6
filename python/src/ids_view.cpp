#include "ids_view.hpp"

#include <pfx/token.hpp>

#include <string>
#include <vector>

namespace pfx::python {
namespace {

struct IdsView {
  PyObject_HEAD
  PyObject* owner;  // the pfx.Machine: kept alive while the view is
  Lane* lane;
};

IdsView* as_view(PyObject* self) { return reinterpret_cast<IdsView*>(self); }
const std::vector<token>& ids_of(PyObject* self) { return as_view(self)->lane->machine.held().ids; }

void dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  Py_CLEAR(as_view(self)->owner);
  type->tp_free(self);
  Py_DECREF(type);
}

Py_ssize_t length(PyObject* self) { return static_cast<Py_ssize_t>(ids_of(self).size()); }

PyObject* item(PyObject* self, Py_ssize_t i) {
  const std::vector<token>& ids = ids_of(self);
  if (i < 0 || static_cast<std::size_t>(i) >= ids.size()) {
    PyErr_SetString(PyExc_IndexError, "ids index out of range");
    return nullptr;
  }
  return PyLong_FromLong(ids[static_cast<std::size_t>(i)]);
}

PyObject* to_list(const std::vector<token>& ids, Py_ssize_t start, Py_ssize_t step, Py_ssize_t n) {
  PyObject* list = PyList_New(n);
  if (list == nullptr) return nullptr;
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject* value = PyLong_FromLong(ids[static_cast<std::size_t>(start + k * step)]);
    if (value == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, k, value);
  }
  return list;
}

/// view[i] (negative counts from the end) and view[a:b:c] (a list, as a list's slice is).
PyObject* subscript(PyObject* self, PyObject* key) {
  if (PySlice_Check(key) != 0) {
    Py_ssize_t start = 0;
    Py_ssize_t stop = 0;
    Py_ssize_t step = 0;
    if (PySlice_Unpack(key, &start, &stop, &step) < 0) return nullptr;
    const Py_ssize_t n = PySlice_AdjustIndices(length(self), &start, &stop, step);
    return to_list(ids_of(self), start, step, n);
  }
  if (PyIndex_Check(key) == 0) {
    PyErr_Format(PyExc_TypeError, "ids indices must be integers or slices, not %.200s", Py_TYPE(key)->tp_name);
    return nullptr;
  }
  Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
  if (i == -1 && PyErr_Occurred() != nullptr) return nullptr;
  if (i < 0) i += length(self);
  return item(self, i);
}

constexpr const char* read_only =
    "ids are read-only (a view of what the machine holds): publish with record(ids, canonical_end) or "
    "commit, forget with clear(); list(ids) is a copy you may change";

PyObject* refuse(PyObject* /*self*/, PyObject* /*args*/) {
  PyErr_SetString(PyExc_TypeError, read_only);
  return nullptr;
}

int refuse_assignment(PyObject* /*self*/, PyObject* /*key*/, PyObject* /*value*/) {
  PyErr_SetString(PyExc_TypeError, read_only);
  return -1;
}

PyObject* refuse_inplace(PyObject* /*self*/, PyObject* /*other*/) {
  PyErr_SetString(PyExc_TypeError, read_only);
  return nullptr;
}

PyObject* refuse_repeat(PyObject* /*self*/, Py_ssize_t /*n*/) {
  PyErr_SetString(PyExc_TypeError, read_only);
  return nullptr;
}

PyObject* tolist(PyObject* self, PyObject* /*unused*/) { return to_list(ids_of(self), 0, 1, length(self)); }

PyObject* concat(PyObject* self, PyObject* other) {
  PyObject* list = tolist(self, nullptr);
  if (list == nullptr) return nullptr;
  PyObject* sum = PySequence_Concat(list, other);
  Py_DECREF(list);
  return sum;
}

/// The id `value` stands for, or -1 when it is no integer in range (then no element equals it).
long long wanted(PyObject* value) {
  if (PyLong_Check(value) == 0) return -1;
  int overflow = 0;
  const long long id = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (id == -1 && PyErr_Occurred() != nullptr) PyErr_Clear();
  return overflow != 0 || !valid_token_id(id) ? -1 : id;
}

int contains(PyObject* self, PyObject* value) {
  const long long id = wanted(value);
  if (id < 0) return 0;
  for (const token t : ids_of(self)) {
    if (t == id) return 1;
  }
  return 0;
}

PyObject* index(PyObject* self, PyObject* value) {
  const long long id = wanted(value);
  const std::vector<token>& ids = ids_of(self);
  for (std::size_t i = 0; id >= 0 && i < ids.size(); ++i) {
    if (ids[i] == id) return PyLong_FromSize_t(i);
  }
  PyErr_SetString(PyExc_ValueError, "the value is not in ids");
  return nullptr;
}

PyObject* count(PyObject* self, PyObject* value) {
  const long long id = wanted(value);
  std::size_t n = 0;
  for (const token t : ids_of(self)) n += static_cast<std::size_t>(id >= 0 && t == id);
  return PyLong_FromSize_t(n);
}

/// For copy and pickle: a list, as the original class's ids are.
PyObject* reduce(PyObject* self, PyObject* /*unused*/) {
  PyObject* list = tolist(self, nullptr);
  if (list == nullptr) return nullptr;
  return Py_BuildValue("(O(N))", reinterpret_cast<PyObject*>(&PyList_Type), list);
}

/// == and != with a list, a tuple or another view: the same ids in the same order.
PyObject* compare(PyObject* self, PyObject* other, int op) {
  if ((op != Py_EQ && op != Py_NE) ||
      (PyList_Check(other) == 0 && PyTuple_Check(other) == 0 && Py_TYPE(other) != Py_TYPE(self))) {
    Py_RETURN_NOTIMPLEMENTED;
  }
  const std::vector<token>& ids = ids_of(self);
  bool equal = true;
  if (Py_TYPE(other) == Py_TYPE(self)) {
    equal = ids == ids_of(other);
  } else {
    PyObject* fast = PySequence_Fast(other, "");
    if (fast == nullptr) return nullptr;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    equal = static_cast<std::size_t>(n) == ids.size();
    for (Py_ssize_t i = 0; equal && i < n; ++i) {
      PyObject* value = PyLong_FromLong(ids[static_cast<std::size_t>(i)]);
      if (value == nullptr) {
        Py_DECREF(fast);
        return nullptr;
      }
      const int same = PyObject_RichCompareBool(value, PySequence_Fast_ITEMS(fast)[i], Py_EQ);
      Py_DECREF(value);
      if (same < 0) {
        Py_DECREF(fast);
        return nullptr;
      }
      equal = same == 1;
    }
    Py_DECREF(fast);
  }
  return PyBool_FromLong(static_cast<long>(equal == (op == Py_EQ)));
}

PyObject* repr(PyObject* self) {
  const std::vector<token>& ids = ids_of(self);
  constexpr std::size_t shown = 8;
  std::string text = "pfx.Ids([";
  for (std::size_t i = 0; i < ids.size() && i < shown; ++i) {
    if (i > 0) text.append(", ");
    text.append(std::to_string(ids[i]));
  }
  if (ids.size() > shown) {
    text.append(", ...], len=");
    text.append(std::to_string(ids.size()));
    text.append(")");
  } else {
    text.append("])");
  }
  return PyUnicode_FromString(text.c_str());
}

/// The ids in place: int32 ('i'), one dimension, read-only.
int get_buffer(PyObject* self, Py_buffer* view, int flags) {
  if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE) {
    PyErr_SetString(PyExc_BufferError, read_only);
    return -1;
  }
  static token empty = 0;
  IdsView* v = as_view(self);
  const std::vector<token>& ids = ids_of(self);
  auto* shape = new Py_ssize_t[2]{static_cast<Py_ssize_t>(ids.size()), static_cast<Py_ssize_t>(sizeof(token))};
  view->buf = ids.empty() ? &empty : const_cast<token*>(ids.data());  // NOLINT(cppcoreguidelines-pro-type-const-cast): read-only
  view->obj = Py_NewRef(self);
  view->len = shape[0] * shape[1];
  view->readonly = 1;
  view->itemsize = sizeof(token);
  view->format = (flags & PyBUF_FORMAT) == PyBUF_FORMAT ? const_cast<char*>("i") : nullptr;  // NOLINT
  view->ndim = 1;
  view->shape = (flags & PyBUF_ND) == PyBUF_ND ? shape : nullptr;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? shape + 1 : nullptr;
  view->suboffsets = nullptr;
  view->internal = shape;
  ++v->lane->exports;
  return 0;
}

void release_buffer(PyObject* self, Py_buffer* view) {
  delete[] static_cast<Py_ssize_t*>(view->internal);
  --as_view(self)->lane->exports;
}

PyObject* no_new(PyTypeObject* /*type*/, PyObject* /*args*/, PyObject* /*kwargs*/) {
  PyErr_SetString(PyExc_TypeError, "pfx.Ids is a view of a machine's ids: read it from Machine.ids or PromptPrefix.ids");
  return nullptr;
}

PyMethodDef methods[] = {
    {"tolist", tolist, METH_NOARGS, "A new list of the ids."},
    {"index", index, METH_O, "The first position of a value (ValueError when absent)."},
    {"count", count, METH_O, "How many times a value occurs."},
    {"__reduce__", reduce, METH_NOARGS, "Copied and pickled as a list."},
    {"append", refuse, METH_VARARGS, "Refused: ids are read-only."},
    {"extend", refuse, METH_VARARGS, "Refused: ids are read-only."},
    {"insert", refuse, METH_VARARGS, "Refused: ids are read-only."},
    {"pop", refuse, METH_VARARGS, "Refused: ids are read-only."},
    {"remove", refuse, METH_VARARGS, "Refused: ids are read-only."},
    {"clear", refuse, METH_VARARGS, "Refused: ids are read-only; PromptPrefix.clear() forgets the record."},
    {"sort", refuse, METH_VARARGS | METH_KEYWORDS, "Refused: ids are read-only."},
    {"reverse", refuse, METH_VARARGS, "Refused: ids are read-only."},
    {nullptr, nullptr, 0, nullptr}};

PyType_Slot slots[] = {
    {Py_tp_doc, const_cast<char*>(  // NOLINT(cppcoreguidelines-pro-type-const-cast): the C API's type
                    "A read-only view of the ids a machine holds, in O(1): len, index, slices (lists), iteration,\n"
                    "== with a list, tuple or view, `in`, index(), count(), tolist(), and the buffer protocol\n"
                    "(int32, no copy: memoryview(ids), numpy.asarray(ids)). It follows the machine: after the next\n"
                    "record it shows the new ids; list(ids) keeps a copy. While a buffer of it is alive, the\n"
                    "machine refuses events that would change the ids (BufferError).")},
    {Py_tp_dealloc, reinterpret_cast<void*>(dealloc)},
    {Py_tp_repr, reinterpret_cast<void*>(repr)},
    {Py_tp_hash, reinterpret_cast<void*>(PyObject_HashNotImplemented)},
    {Py_tp_richcompare, reinterpret_cast<void*>(compare)},
    {Py_tp_methods, methods},
    {Py_tp_new, reinterpret_cast<void*>(no_new)},
    {Py_sq_length, reinterpret_cast<void*>(length)},
    {Py_sq_item, reinterpret_cast<void*>(item)},
    {Py_sq_contains, reinterpret_cast<void*>(contains)},
    {Py_sq_concat, reinterpret_cast<void*>(concat)},
    {Py_sq_inplace_concat, reinterpret_cast<void*>(refuse_inplace)},
    {Py_sq_inplace_repeat, reinterpret_cast<void*>(refuse_repeat)},
    {Py_sq_ass_item, reinterpret_cast<void*>(+[](PyObject* s, Py_ssize_t, PyObject* v) { return refuse_assignment(s, nullptr, v); })},
    {Py_mp_length, reinterpret_cast<void*>(length)},
    {Py_mp_subscript, reinterpret_cast<void*>(subscript)},
    {Py_mp_ass_subscript, reinterpret_cast<void*>(refuse_assignment)},
    {Py_bf_getbuffer, reinterpret_cast<void*>(get_buffer)},
    {Py_bf_releasebuffer, reinterpret_cast<void*>(release_buffer)},
    {0, nullptr}};

PyType_Spec spec = {"pfx.Ids", sizeof(IdsView), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_SEQUENCE, slots};

PyTypeObject* ids_type = nullptr;  // the type, made once at import

}  // namespace

PyObject* make_ids_type() {
  PyObject* type = PyType_FromSpec(&spec);
  ids_type = reinterpret_cast<PyTypeObject*>(type);
  return type;
}

const token* ids_of_view(PyObject* object, std::size_t& size) {
  if (ids_type == nullptr || Py_TYPE(object) != ids_type) return nullptr;
  const std::vector<token>& ids = ids_of(object);
  size = ids.size();
  return ids.data();
}

PyObject* make_ids_view(PyObject* view_type, PyObject* owner, Lane* lane) {
  auto* type = reinterpret_cast<PyTypeObject*>(view_type);
  auto* view = reinterpret_cast<IdsView*>(type->tp_alloc(type, 0));
  if (view == nullptr) return nullptr;
  view->owner = Py_NewRef(owner);
  view->lane = lane;
  return reinterpret_cast<PyObject*>(view);
}

}  // namespace pfx::python
