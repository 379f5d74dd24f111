// NumPy's indexing on phasor.Tensor, composed from the library's differentiable
// views (select, narrow, unsqueeze) and index_select; the one view the library
// lacks, a slice with a step, is recorded here with its adjoint.
#include "python/indexing.h"

#include <algorithm>
#include <string>
#include <variant>
#include <vector>

#include <pybind11/numpy.h>

#include "autograd/functions.h"
#include "autograd/node.h"
#include "python/numpy_bridge.h"

namespace py = pybind11;

namespace phasor::python {

namespace {

using Grads = std::vector<Tensor>;

// Elements start, start + step, ... (count of them, step > 0) along dim d, as a view.
Tensor raw_strided_slice(const Tensor& t, int d, int64_t start, int64_t step, int64_t count) {
  Dims shape = t.shape(), strides = t.strides();
  shape[d] = count;
  strides[d] *= step;
  return as_strided(t, shape, strides, t.offset() + start * t.stride(d));
}

// The same, recorded: the gradient is g at the picked elements and zero elsewhere,
// and that embedding is itself recorded (its adjoint is the slice again) for create_graph.
Tensor strided_slice(const Tensor& t, int d, int64_t start, int64_t step, int64_t count) {
  return record("strided_slice", raw_strided_slice(t, d, start, step, count), {t}, [=, in = t.shape()](const Tensor& g) -> Grads {
    Tensor out = zeros(in, g.dtype(), g.device());
    ops::copy_(raw_strided_slice(out, d, start, step, count), g);
    return {record("strided_slice_backward", out, {g},
                   [=](const Tensor& gg) -> Grads { return {strided_slice(gg, d, start, step, count)}; })};
  });
}

Tensor flip(const Tensor& t, int d) {
  return index_select(t, d, arange(static_cast<double>(t.size(d) - 1), -1.0, -1.0, DType::Int64));
}

struct Select {
  int64_t i;
};
struct Slice {
  py::slice s;
};
struct NewAxis {};
struct Ellipsis {};
struct Array {
  Tensor values;  // int64 (positions) or bool (a mask), on the CPU
  int dims() const { return values.dtype() == DType::Bool ? values.dim() : 1; }
};
using Entry = std::variant<Select, Slice, NewAxis, Ellipsis, Array>;

constexpr const char* kValidIndices =
    "only integers, slices (`:`), ellipsis (`...`), None and integer or boolean arrays are valid indices";

Array index_array(const py::handle& h) {
  Tensor a = py::isinstance<Tensor>(h) ? h.cast<Tensor>().detach() : tensor_copy(py::reinterpret_borrow<py::object>(h));
  if (a.numel() == 0 && a.dtype() == DType::Float64) a = zeros(a.shape(), DType::Int64);  // [] is an empty index, as in NumPy
  if (a.dtype() != DType::Int64 && a.dtype() != DType::Bool)
    throw py::index_error("arrays used as indices must be of integer or boolean type, not " + std::string(dtype_name(a.dtype())));
  return Array{to_cpu(a)};
}

Entry entry(const py::handle& h) {
  if (h.is_none()) return NewAxis{};
  if (h.ptr() == Py_Ellipsis) return Ellipsis{};
  if (PySlice_Check(h.ptr())) return Slice{py::reinterpret_borrow<py::slice>(h)};
  if (PyBool_Check(h.ptr())) throw py::index_error("a Python bool is not an index: use a boolean tensor or array as a mask");
  if (py::isinstance<Tensor>(h) || py::isinstance<py::array>(h) || PyList_Check(h.ptr())) {
    Array a = index_array(h);
    if (a.values.dim() == 0 && a.values.dtype() == DType::Int64) return Select{a.values.item<int64_t>()};  // NumPy's rule
    if (a.values.dim() == 0) throw py::index_error("a 0-d boolean index is not supported");
    return a;
  }
  if (PyIndex_Check(h.ptr())) {  // int, NumPy's integer scalars
    const Py_ssize_t i = PyNumber_AsSsize_t(h.ptr(), PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) throw py::error_already_set();
    return Select{i};
  }
  throw py::index_error(kValidIndices);
}

int dims_taken(const Entry& e) {
  if (std::holds_alternative<Select>(e) || std::holds_alternative<Slice>(e)) return 1;
  if (const Array* a = std::get_if<Array>(&e)) return a->dims();
  return 0;
}

// The index as entries, its `...` replaced by full slices, checked against t's rank.
std::vector<Entry> entries(const Tensor& t, const py::handle& index) {
  std::vector<Entry> out;
  if (PyTuple_Check(index.ptr())) {
    for (const py::handle h : py::reinterpret_borrow<py::tuple>(index)) out.push_back(entry(h));
  } else {
    out.push_back(entry(index));
  }
  int taken = 0, ellipses = 0;
  for (const Entry& e : out) {
    taken += dims_taken(e);
    ellipses += std::holds_alternative<Ellipsis>(e);
  }
  if (ellipses > 1) throw py::index_error("an index can only have a single ellipsis ('...')");
  if (taken > t.dim())
    throw py::index_error("too many indices for tensor: tensor is " + std::to_string(t.dim()) + "-dimensional, but " +
                          std::to_string(taken) + " were indexed");
  std::vector<Entry> expanded;
  for (const Entry& e : out) {
    if (!std::holds_alternative<Ellipsis>(e)) {
      expanded.push_back(e);
      continue;
    }
    for (int i = taken; i < t.dim(); ++i) expanded.push_back(Slice{py::slice(py::none(), py::none(), py::none())});
  }
  return expanded;
}

// The basic entries applied; the array entries left for later, their
// dimensions kept whole in `view`.
struct Basic {
  Tensor view;
  std::vector<std::pair<int, const Array*>> arrays;  // each array and the first dim of `view` it indexes
  std::vector<int> reversed;  // dims of `view` read backwards (negative steps), when not flipped
  // NumPy's rule: when the advanced indices (arrays and ints) are apart (a
  // slice or None between them), the picked dims go first in the result, not
  // in the arrays' place.
  bool array_first = false;
};

bool advanced(const Entry& e) { return std::holds_alternative<Select>(e) || std::holds_alternative<Array>(e); }

bool advanced_apart(const std::vector<Entry>& es) {
  int first = -1, last = -1;
  for (int i = 0; i < static_cast<int>(es.size()); ++i)
    if (advanced(es[i])) {
      if (first < 0) first = i;
      last = i;
    }
  for (int i = first + 1; i < last; ++i)
    if (!advanced(es[i])) return true;
  return false;
}

// The order of dims that moves the `n` dims at `at` to the front (to_front),
// or moves the first `n` back to `at` (the inverse).
Dims move_order(int rank, int at, int n, bool to_front) {
  Dims order;
  if (to_front) {
    for (int i = at; i < at + n; ++i) order.push_back(i);
    for (int i = 0; i < at; ++i) order.push_back(i);
  } else {
    for (int i = n; i < n + at; ++i) order.push_back(i);
    for (int i = 0; i < n; ++i) order.push_back(i);
  }
  for (int i = at + n; i < rank; ++i) order.push_back(i);
  return order;
}

Basic apply_basic(const Tensor& t, const std::vector<Entry>& es, bool flip_negative_steps) {
  Basic b;
  b.view = t;
  int d = 0, axis = 0;  // the dimension of the result, and of t, that the next entry indexes
  for (const Entry& e : es) {
    if (const Select* s = std::get_if<Select>(&e)) {
      const int64_t n = b.view.size(d);
      if (s->i < -n || s->i >= n)
        throw py::index_error("index " + std::to_string(s->i) + " is out of bounds for dimension " + std::to_string(axis) +
                              " with size " + std::to_string(n));
      b.view = select(b.view, d, s->i < 0 ? s->i + n : s->i);
      ++axis;
    } else if (const Slice* s = std::get_if<Slice>(&e)) {
      Py_ssize_t start = 0, stop = 0, step = 0;
      if (PySlice_Unpack(s->s.ptr(), &start, &stop, &step) < 0) throw py::error_already_set();  // step 0: ValueError
      const int64_t count = PySlice_AdjustIndices(b.view.size(d), &start, &stop, step);
      // The first element in memory order (an empty slice: 0, as AdjustIndices may leave start at -1).
      const int64_t lowest = count == 0 ? 0 : step > 0 ? start : start + (count - 1) * step;
      const int64_t stride = step > 0 ? step : -step;
      b.view = stride == 1 || count <= 1 ? narrow(b.view, d, lowest, count) : strided_slice(b.view, d, lowest, stride, count);
      if (step < 0 && count > 1) {
        if (flip_negative_steps) b.view = flip(b.view, d);
        else b.reversed.push_back(d);
      }
      ++d, ++axis;
    } else if (std::holds_alternative<NewAxis>(e)) {
      b.view = unsqueeze(b.view, d++);
    } else if (const Array* a = std::get_if<Array>(&e)) {
      b.arrays.emplace_back(d, a);
      b.array_first = b.array_first || advanced_apart(es);
      d += a->dims();
      axis += a->dims();
    }
  }
  return b;
}

// What the array entries pick together. Each integer array indexes one dim of
// the view and a boolean one as many as it has (as the integer arrays of its
// true positions, NumPy's nonzero()); all of them broadcast to one shape.
struct Picks {
  std::vector<int> dims;       // the dims of the view they index, in order
  Dims over;                   // those dims' sizes
  Dims shape;                  // the broadcast shape of the picked positions
  std::vector<int64_t> flat;   // each picked position (row-major in `shape`) as a row-major offset in `over`
};

std::string shape_text(const Dims& shape) {
  std::string out = "(";
  for (int i = 0; i < shape.size(); ++i) out += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
  return out + ")";
}

Picks picks(const Tensor& view, const std::vector<std::pair<int, const Array*>>& arrays) {
  struct Coordinates {
    Dims shape;
    std::vector<int64_t> values;  // row-major in shape, within [0, size of the dim)
  };
  Picks p;
  std::vector<Coordinates> coords;
  for (const auto& [at, a] : arrays) {
    if (a->values.dtype() == DType::Int64) {
      const int64_t n = view.size(at);
      Coordinates c{a->values.shape(), {}};
      for (int64_t i : a->values.to_vector<int64_t>()) {
        if (i < -n || i >= n)
          throw py::index_error("index " + std::to_string(i) + " is out of bounds for dimension " + std::to_string(at) + " with size " +
                                std::to_string(n));
        c.values.push_back(i < 0 ? i + n : i);
      }
      p.dims.push_back(at), p.over.push_back(n);
      coords.push_back(std::move(c));
      continue;
    }
    const int k = a->values.dim();
    for (int i = 0; i < k; ++i)
      if (a->values.size(i) != view.size(at + i))
        throw py::index_error("boolean index did not match indexed tensor along dimension " + std::to_string(at + i) + "; dimension is " +
                              std::to_string(view.size(at + i)) + " but corresponding boolean dimension is " +
                              std::to_string(a->values.size(i)));
    const std::vector<uint8_t> mask = a->values.to_vector<uint8_t>();
    std::vector<Coordinates> mine(k);
    for (size_t flat = 0; flat < mask.size(); ++flat) {
      if (!mask[flat]) continue;
      int64_t rest = static_cast<int64_t>(flat);
      for (int i = k - 1; i >= 0; --i) {
        mine[i].values.push_back(rest % a->values.size(i));
        rest /= a->values.size(i);
      }
    }
    for (int i = 0; i < k; ++i) {
      mine[i].shape = Dims{static_cast<int64_t>(mine[i].values.size())};
      p.dims.push_back(at + i), p.over.push_back(view.size(at + i));
      coords.push_back(std::move(mine[i]));
    }
  }
  // NumPy's broadcast of the index arrays, aligned at their last dims.
  int rank = 0;
  for (const Coordinates& c : coords) rank = std::max(rank, static_cast<int>(c.shape.size()));
  std::vector<int64_t> shape(rank, 1);
  for (const Coordinates& c : coords)
    for (int i = 0; i < c.shape.size(); ++i) {
      int64_t& s = shape[rank - c.shape.size() + i];
      if (c.shape[i] != s && c.shape[i] != 1 && s != 1) {
        std::string shapes;
        for (const Coordinates& each : coords) shapes += " " + shape_text(each.shape);
        throw py::index_error("shape mismatch: indexing arrays could not be broadcast together with shapes" + shapes);
      }
      if (s == 1) s = c.shape[i];
    }
  p.shape = Dims(shape);
  const int64_t count = p.shape.numel();
  p.flat.assign(count, 0);
  for (size_t j = 0; j < coords.size(); ++j) {
    const Coordinates& c = coords[j];
    for (int64_t out = 0; out < count; ++out) {  // the position in c that broadcasting reads for `out`
      int64_t rest = out, at = 0, stride = 1;
      for (int i = rank - 1; i >= 0; --i) {
        const int64_t coordinate = rest % shape[i];
        rest /= shape[i];
        const int own = i - (rank - static_cast<int>(c.shape.size()));
        if (own >= 0) {
          if (c.shape[own] != 1) at += coordinate * stride;
          stride *= c.shape[own];
        }
      }
      p.flat[out] = p.flat[out] * p.over[j] + c.values[at];
    }
  }
  return p;
}

// The order of dims that puts `first` in front, the others after them in order.
Dims front_order(int rank, const std::vector<int>& first) {
  Dims order;
  for (int d : first) order.push_back(d);
  for (int d = 0; d < rank; ++d)
    if (std::find(first.begin(), first.end(), d) == first.end()) order.push_back(d);
  return order;
}

// `shape` with dims [at, at + k) replaced by `middle`.
Dims splice(const Dims& shape, int at, int k, const Dims& middle) {
  Dims out;
  for (int i = 0; i < at; ++i) out.push_back(shape[i]);
  for (int64_t m : middle) out.push_back(m);
  for (int i = at + k; i < shape.size(); ++i) out.push_back(shape[i]);
  return out;
}

Tensor positions(const std::vector<int64_t>& flat) { return from_vector(flat, Dims{static_cast<int64_t>(flat.size())}); }

Tensor value_tensor(const py::handle& value) {
  if (py::isinstance<Tensor>(value)) return value.cast<Tensor>().detach();  // values are written, not recorded
  return tensor_copy(py::reinterpret_borrow<py::object>(value));
}

}  // namespace

Tensor get_item(const Tensor& t, const py::handle& index) {
  const std::vector<Entry> es = entries(t, index);
  const Basic b = apply_basic(t, es, /*flip_negative_steps=*/true);
  if (b.arrays.empty()) return b.view;
  // The indexed dims to the front, flattened into one, and the picked rows taken.
  const Picks p = picks(b.view, b.arrays);
  const int k = p.dims.size(), n = p.shape.size();
  const Tensor front = permute(b.view, front_order(b.view.dim(), p.dims));
  const Tensor rows = k == 1 ? front : flatten(front, 0, k - 1);
  const Tensor picked = index_select(rows, 0, positions(p.flat));
  const Tensor out = reshape(picked, splice(rows.shape(), 0, 1, p.shape));
  // NumPy's place for them: first where the advanced indices are apart, else where the first array was.
  return b.array_first || p.dims.front() == 0 ? out : permute(out, move_order(out.dim(), p.dims.front(), n, false));
}

void set_item(const Tensor& t, const py::handle& index, const py::handle& value) {
  const std::vector<Entry> es = entries(t, index);
  const Basic b = apply_basic(t, es, /*flip_negative_steps=*/false);
  Tensor v = value_tensor(value);
  if (v.is_complex() && !t.is_complex())  // a conversion would drop the imaginary parts without a word
    throw py::type_error(std::string("cannot write complex values into a ") + dtype_name(t.dtype()) + " tensor: write their .real");
  if (b.arrays.empty()) {  // the value broadcast to the view, read backwards where the view is
    if (!b.reversed.empty()) v = ops::expand(v, b.view.shape());
    for (int d : b.reversed) v = flip(v, d);
    ops::copy_(b.view, v);
    return;
  }
  const Picks p = picks(b.view, b.arrays);
  const int k = p.dims.size(), n = p.shape.size();
  const Tensor front = ops::permute(b.view, front_order(b.view.dim(), p.dims));
  // The value broadcast to NumPy's result shape, then laid out as `front` with the picked dims first.
  const Dims picked_first = splice(front.shape(), 0, k, p.shape);
  const int at = b.array_first ? 0 : p.dims.front();
  const Dims numpy_order = at == 0 ? Dims() : move_order(picked_first.size(), at, n, false);
  Dims numpy_shape = picked_first;
  if (at != 0) {
    numpy_shape = Dims();
    for (int64_t d : numpy_order) numpy_shape.push_back(picked_first[static_cast<int>(d)]);
  }
  v = ops::expand(v, numpy_shape);
  if (at != 0) v = ops::permute(v, move_order(numpy_shape.size(), at, n, true));
  for (int d : b.reversed) {  // a dim of the view read backwards: its place among the dims after the picked ones
    const int before = static_cast<int>(std::count_if(p.dims.begin(), p.dims.end(), [d](int x) { return x < d; }));
    v = flip(v, n + d - before);
  }
  // One write per picked position (the last one wins where positions repeat, as in NumPy).
  v = reshape(v, splice(picked_first, 0, n, Dims{static_cast<int64_t>(p.flat.size())}));
  for (size_t j = 0; j < p.flat.size(); ++j) {
    Tensor dst = front;
    int64_t rest = p.flat[j], block = p.over.numel();
    for (int i = 0; i < k; ++i) {  // the flat position as one coordinate per indexed dim
      block /= p.over[i];
      dst = ops::select(dst, 0, rest / block);
      rest %= block;
    }
    ops::copy_(dst, ops::select(v, 0, static_cast<int64_t>(j)));
  }
}

}  // namespace phasor::python
