#pragma once
// Shapes and strides: a small inline vector (no heap allocation per tensor).
#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <vector>

#include "tensor/error.h"

namespace phasor {

constexpr int kMaxDims = 8;

class Dims {
 public:
  Dims() = default;
  Dims(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  explicit Dims(const std::vector<int64_t>& values) { assign(values.begin(), values.end()); }
  static Dims filled(int n, int64_t value) {
    Dims d;
    d.resize(n, value);
    return d;
  }

  int size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t& operator[](int i) { return data_[i]; }
  int64_t operator[](int i) const { return data_[i]; }
  int64_t back() const { return data_[size_ - 1]; }
  const int64_t* begin() const { return data_.data(); }
  const int64_t* end() const { return data_.data() + size_; }
  int64_t* begin() { return data_.data(); }
  int64_t* end() { return data_.data() + size_; }

  void push_back(int64_t v) {
    PHASOR_CHECK(size_ < kMaxDims, "tensors have at most ", kMaxDims, " dimensions");
    data_[size_++] = v;
  }
  void insert(int pos, int64_t v) {
    PHASOR_CHECK(pos >= 0 && pos <= size_, "Dims::insert: position ", pos, " out of range for ", size_, " dims");
    push_back(0);
    for (int i = size_ - 1; i > pos; --i) data_[i] = data_[i - 1];
    data_[pos] = v;
  }
  void erase(int pos) {
    // A 0-d shape has no dim to drop (its size would become -1).
    PHASOR_CHECK(pos >= 0 && pos < size_, "Dims::erase: position ", pos, " out of range for ", size_, " dims");
    for (int i = pos; i + 1 < size_; ++i) data_[i] = data_[i + 1];
    --size_;
  }
  void resize(int n, int64_t fill = 0) {
    PHASOR_CHECK(n >= 0 && n <= kMaxDims, "tensors have at most ", kMaxDims, " dimensions, got ", n);
    for (int i = size_; i < n; ++i) data_[i] = fill;
    size_ = n;
  }
  std::vector<int64_t> vec() const { return {begin(), end()}; }

  // The element count; an error when it does not fit in int64 (a shape such
  // as [2^40, 2^40] must not wrap around to a small allocation).
  int64_t numel() const {
    int64_t n = 1;
    bool overflow = false;
    for (int i = 0; i < size_; ++i) overflow |= __builtin_mul_overflow(n, data_[i], &n);
    if (overflow) {
      for (int i = 0; i < size_; ++i)
        if (data_[i] == 0) return 0;
      too_many_elements();
    }
    return n;
  }
  friend bool operator==(const Dims& a, const Dims& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const Dims& a, const Dims& b) { return !(a == b); }

 private:
  [[noreturn]] void too_many_elements() const;
  template <class It>
  void assign(It first, It last) {
    size_ = 0;
    for (; first != last; ++first) push_back(*first);
  }
  std::array<int64_t, kMaxDims> data_{};
  int size_ = 0;
};

inline std::ostream& operator<<(std::ostream& os, const Dims& d) {
  os << '[';
  for (int i = 0; i < d.size(); ++i) os << (i ? ", " : "") << d[i];
  return os << ']';
}

inline void Dims::too_many_elements() const { fail("shape ", *this, " has more elements than an int64 can count"); }

// Row-major strides of a shape, in elements.
inline Dims contiguous_strides(const Dims& shape) {
  Dims s = Dims::filled(shape.size(), 1);
  for (int i = shape.size() - 2; i >= 0; --i) s[i] = s[i + 1] * std::max<int64_t>(shape[i + 1], 1);
  return s;
}

// Normalises a possibly negative dim against `ndim`; `op` names the caller.
// As in PyTorch, a 0-d tensor accepts dim 0 and -1, meaning the tensor itself
// (a reduction over it reduces its one element): the result is then 0, which
// is NOT an index into its (empty) shape. Ops that index the shape with it
// handle ndim == 0 first, or refuse it with wrap_dim_not_0d.
inline int wrap_dim(int64_t dim, int ndim, const char* op) {
  const int64_t n = std::max(ndim, 1);
  PHASOR_CHECK(dim >= -n && dim < n, op, ": dim ", dim, " out of range for a tensor with ", ndim, " dims");
  return static_cast<int>(dim < 0 ? dim + n : dim);
}

// wrap_dim for ops that have no meaning on a 0-d tensor (select, narrow, cat,
// split: PyTorch's "cannot be applied to a 0-dim tensor").
inline int wrap_dim_not_0d(int64_t dim, int ndim, const char* op) {
  PHASOR_CHECK(ndim > 0, op, "() cannot be applied to a 0-dim tensor");
  return wrap_dim(dim, ndim, op);
}

// `shape` folded to a matrix [product of the leading dims, last dim]: the
// explicit form of reshape(t, {-1, k}), which cannot infer -1 when k is 0.
inline Dims fold_to_matrix(const Dims& shape) {
  int64_t rows = 1;
  for (int i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  return Dims{rows, shape.back()};
}

// NumPy broadcasting of two shapes.
inline Dims broadcast_shapes(const Dims& a, const Dims& b, const char* op) {
  const int n = std::max(a.size(), b.size());
  Dims out = Dims::filled(n, 1);
  for (int i = 0; i < n; ++i) {
    const int ia = a.size() - n + i, ib = b.size() - n + i;
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    PHASOR_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b, " cannot be broadcast (dim ", i,
                 ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace phasor
