// Elementwise op front-ends: unary maths, binary arithmetic with broadcasting
// and type promotion, comparisons, and conversions. Each checks its arguments,
// decides the result's dtype and shape, allocates it on the inputs' device and
// calls that device's kernel (tensor/backend.h).
#include <iterator>
#include <utility>

#include "tensor/backend.h"
#include "tensor/ops.h"

namespace phasor::ops {

const char* name(Unary op) {
  static const char* const names[] = {"neg",  "exp",  "log", "sqrt",       "rsqrt", "sin",   "cos",  "tanh",  "sigmoid",
                                      "silu", "gelu", "abs", "reciprocal", "conj",  "angle", "sign", "square",
                                      "gelu_derivative", "softplus"};
  static_assert(std::size(names) == static_cast<size_t>(Unary::Count), "one name per Unary op, in its order");
  return names[static_cast<int>(op)];
}
const char* name(Binary op) {
  static const char* const names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2"};
  static_assert(std::size(names) == static_cast<size_t>(Binary::Count), "one name per Binary op, in its order");
  return names[static_cast<int>(op)];
}

namespace {

// The operand of a kernel: `t` on `device`, converted to dtype and broadcast to shape.
Tensor operand(const Tensor& t, DType dtype, const Dims& shape, Device device) {
  return expand(to(on_device(t, device), dtype), shape);
}

bool complex_unsupported(Unary op) { return op == Unary::Gelu || op == Unary::GeluDerivative || op == Unary::Softplus; }

// Ops whose inputs are promoted to a floating type even when both are integers.
bool needs_inexact(Binary op) { return op == Binary::Div || op == Binary::Atan2; }

// The bytes [first, last) a view can touch.
std::pair<const char*, const char*> byte_span(const Tensor& t) {
  const char* first = static_cast<const char*>(t.raw_data());
  const char* last = first + itemsize(t.dtype());
  for (int d = 0; d < t.dim(); ++d) {
    const int64_t reach = (t.size(d) - 1) * t.stride(d) * static_cast<int64_t>(itemsize(t.dtype()));
    (reach < 0 ? first : last) += reach;
  }
  return {first, last};
}

// The written-to tensor of an in-place op: one whose elements share memory
// (an expanded view) would be written twice, in an order the threads decide
// (PyTorch refuses it the same way).
void check_writable(const Tensor& dst, const char* op) {
  for (int d = 0; d < dst.dim(); ++d)
    PHASOR_CHECK(dst.stride(d) != 0 || dst.size(d) < 2, op, ": unsupported operation: more than one element of the written-to ",
                 "tensor refers to a single memory location (an expanded view, shape ", dst.shape(), " strides ",
                 dst.strides(), "); clone() it first");
}

// `src` as an in-place op on `dst` may read it: src itself, or a copy of it
// when the two overlap in memory other than element for element (a shifted
// view, a broadcast row of dst), where writing dst would change src elements
// still to be read. NumPy's a[1:] = a[:-1] does the same.
Tensor unaliased(const Tensor& src, const Tensor& dst) {
  if (src.numel() == 0 || dst.numel() == 0 || !src.same_storage(dst)) return src;
  if (src.raw_data() == dst.raw_data() && src.dtype() == dst.dtype() && src.shape() == dst.shape() && src.strides() == dst.strides())
    return src;  // element i read and then written by the same step
  const auto [s0, s1] = byte_span(src);
  const auto [d0, d1] = byte_span(dst);
  return s0 < d1 && d0 < s1 ? clone(src) : src;
}

}  // namespace

Tensor unary(Unary op, const Tensor& x) {
  const Device device = op_device(name(op), x);
  const DType in = x.dtype();
  check_computes_in(in, name(op));
  PHASOR_CHECK(in != DType::Bool, name(op), ": not defined for bool tensors");
  PHASOR_CHECK(!(is_complex(in) && complex_unsupported(op)), name(op), ": not defined for complex dtype ", in);
  // These keep integer dtypes; the others compute in float32 for integer input.
  const bool keeps_int = op == Unary::Neg || op == Unary::Square || op == Unary::Conj || op == Unary::Sign || op == Unary::Abs;
  const DType work = (in == DType::Int64 && !keeps_int) ? DType::Float32 : in;
  const bool to_real = op == Unary::Abs || op == Unary::Angle;  // complex -> real results
  Tensor out = empty(x.shape(), to_real ? real_dtype(work) : work, device);
  backend(device).unary(op, out, to(x, work));
  return out;
}

Tensor binary(Binary op, const Tensor& a, const Tensor& b) {
  const Device device = op_device(name(op), a, {b});
  const Dims shape = broadcast_shapes(a.shape(), b.shape(), name(op));
  DType dt = promote(a.dtype(), b.dtype());
  if (dt == DType::Bool) dt = DType::Int64;
  if (needs_inexact(op) && !is_inexact(dt)) dt = DType::Float32;
  check_computes_in(dt, name(op));
  const bool real_only = op == Binary::Maximum || op == Binary::Minimum || op == Binary::Atan2;
  PHASOR_CHECK(!(real_only && is_complex(dt)), name(op), ": not defined for complex dtype ", dt, " (inputs ",
               a.dtype(), " and ", b.dtype(), ")");
  Tensor out = empty(shape, dt, device);
  backend(device).binary(op, out, operand(a, dt, shape, device), operand(b, dt, shape, device));
  return out;
}

void binary_(Binary op, const Tensor& dst, const Tensor& src) {
  const Device device = op_device(name(op), dst, {src});
  check_computes_in(dst.dtype(), name(op));
  PHASOR_CHECK(promote(dst.dtype(), src.dtype()) == dst.dtype(), name(op), "_: result dtype ",
               promote(dst.dtype(), src.dtype()), " cannot be stored in place in a ", dst.dtype(), " tensor");
  PHASOR_CHECK(dst.dtype() != DType::Bool, name(op), "_: not defined for bool tensors");
  check_writable(dst, name(op));
  backend(device).binary(op, dst, dst, unaliased(operand(src, dst.dtype(), dst.shape(), device), dst));
  dst.storage()->bump_version();
}

void axpy_(const Tensor& dst, const Tensor& src, double alpha) {
  const Device device = op_device("axpy_", dst, {src});
  check_computes_in(dst.dtype(), "axpy_");
  PHASOR_CHECK(is_inexact(dst.dtype()), "axpy_: not defined for dtype ", dst.dtype());
  check_writable(dst, "axpy_");
  backend(device).axpy(dst, unaliased(operand(src, dst.dtype(), dst.shape(), device), dst), alpha);
  dst.storage()->bump_version();
}

Tensor compare(Compare op, const Tensor& a, const Tensor& b) {
  const Device device = op_device("compare", a, {b});
  const Dims shape = broadcast_shapes(a.shape(), b.shape(), "compare");
  const DType dt = promote(a.dtype(), b.dtype());
  check_computes_in(dt, "compare");
  PHASOR_CHECK(!is_complex(dt) || op == Compare::Eq || op == Compare::Ne,
               "compare: ordering comparisons are not defined for complex dtype ", dt);
  Tensor out = empty(shape, DType::Bool, device);
  backend(device).compare(op, out, operand(a, dt, shape, device), operand(b, dt, shape, device));
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Device device = op_device("where", cond, {a, b});
  PHASOR_CHECK(cond.dtype() == DType::Bool, "where: condition must be bool, got ", cond.dtype());
  const Dims shape = broadcast_shapes(cond.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
  const DType dt = promote(a.dtype(), b.dtype());
  check_computes_in(dt, "where");
  Tensor out = empty(shape, dt, device);
  backend(device).where(out, operand(cond, DType::Bool, shape, device), operand(a, dt, shape, device), operand(b, dt, shape, device));
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, c128 value) {
  return where(mask, scalar_tensor(checked_scalar(value, x.dtype(), "masked_fill"), x.dtype()), x);
}

namespace {
// A complex tensor from two real ones: polar(abs, angle) or complex(re, im).
Tensor from_parts(const Tensor& a, const Tensor& b, bool is_polar) {
  const char* op = is_polar ? "polar" : "complex";
  const Device device = op_device(op, a, {b});
  const Dims shape = broadcast_shapes(a.shape(), b.shape(), op);
  const DType rt = promote(a.dtype(), b.dtype());
  PHASOR_CHECK(is_floating(rt), op, ": expected real floating inputs, got ", a.dtype(), " and ", b.dtype());
  Tensor out = empty(shape, complex_dtype(rt), device);
  const Tensor x = operand(a, rt, shape, device), y = operand(b, rt, shape, device);
  if (is_polar) backend(device).polar(out, x, y);
  else backend(device).complex(out, x, y);
  return out;
}
}  // namespace

Tensor polar(const Tensor& abs, const Tensor& angle) { return from_parts(abs, angle, true); }
Tensor complex(const Tensor& re, const Tensor& im) { return from_parts(re, im, false); }

Tensor pow_scalar(const Tensor& x, double p) {
  const Device device = op_device("pow", x);
  check_computes_in(x.dtype(), "pow");
  const DType dt = is_inexact(x.dtype()) ? x.dtype() : DType::Float32;
  Tensor out = empty(x.shape(), dt, device);
  backend(device).pow_scalar(out, to(x, dt), p);
  return out;
}

// ---- copies and conversion ----

void copy_(const Tensor& dst, const Tensor& src) {
  PHASOR_CHECK(dst.device() == src.device(), "copy_: devices differ (", dst.device(), " and ", src.device(), ")");
  check_writable(dst, "copy_");
  backend(dst.device()).copy(dst, unaliased(expand(src, dst.shape()), dst));
  dst.storage()->bump_version();
}

void fill_(const Tensor& dst, c128 value) {
  backend(dst.device()).fill(dst, checked_scalar(value, dst.dtype(), "fill_"));
  dst.storage()->bump_version();
}

Tensor contiguous(const Tensor& t) { return t.is_contiguous() ? t : clone(t); }

Tensor clone(const Tensor& t) {
  Tensor out = empty(t.shape(), t.dtype(), t.device());
  copy_(out, t);
  return out;
}

namespace {
DeviceCopy device_copy = nullptr;
}
void register_device_copy(DeviceCopy copy) { device_copy = copy; }

Tensor to_device(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  PHASOR_CHECK(device_copy != nullptr, "to: device ", device, " is not available (Phasor was built without CUDA or no GPU is present)");
  return device_copy(t, device);
}

Tensor to(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = empty(t.shape(), dtype, t.device());
  copy_(out, t);
  return out;
}

}  // namespace phasor::ops

namespace phasor {
Tensor contiguous_copy(const Tensor& t) { return ops::clone(t); }
}  // namespace phasor
