// phasor.Tensor (zero-copy with NumPy), the dtypes, the differentiable ops,
// requires_grad / backward / grad, no_grad, gradcheck, and the second order
// (create_graph, grad, hvp, jvp, gradgradcheck).
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>

#include <pybind11/eval.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/functional.h"
#include "autograd/gradcheck.h"
#include "python/bindings.h"
#include "python/gil.h"
#include "python/indexing.h"
#include "python/numpy_bridge.h"

namespace py = pybind11;
using namespace py::literals;

namespace phasor::python {

namespace {

// The right-hand side of an arithmetic op: a tensor (or array) or a Python number.
using Operand = std::variant<Tensor, c128>;
Tensor operand(const Operand& x, const Tensor& like) {
  if (const Tensor* t = std::get_if<Tensor>(&x)) return *t;
  return scalar_like(like, std::get<c128>(x));  // the dtype that combines with `like`, as C++'s t * 2.0 does
}

// An in-place write records nothing, so it is refused where autograd would
// need it: on a leaf that requires grad (PyTorch's rule: a parameter is
// updated under no_grad), and on a result that carries a graph (PyTorch
// records the write there; Phasor cannot, so it asks for the out-of-place op).
void check_in_place(const Tensor& t, const char* op) {
  if (!t.requires_grad() || !GradMode::enabled()) return;
  PHASOR_CHECK(!t.is_leaf(), op, ": a leaf tensor that requires grad cannot be changed in place: do it under phasor.no_grad()");
  PHASOR_CHECK(false, op, ": an in-place write to a tensor that requires grad is not recorded: use the out-of-place op, "
                          "or write under phasor.no_grad()");
}

// The right-hand side of an in-place op, in a dtype the tensor can hold: a
// Python int stays an integer for an int64 tensor (t += 1), as in PyTorch.
Tensor in_place_operand(const Operand& x, const Tensor& dst) {
  const c128* v = std::get_if<c128>(&x);
  if (v && dst.dtype() == DType::Int64 && v->imag() == 0 && v->real() == std::trunc(v->real())) return scalar_tensor(*v, DType::Int64);
  return operand(x, dst);
}

// t (op)= alpha * x in place, the same Python object returned.
py::object in_place(py::object self, ops::Binary op, const Operand& x, double alpha, const char* name) {
  const Tensor& t = self.cast<const Tensor&>();
  check_in_place(t, name);
  without_gil([&] {
    Tensor src = op == ops::Binary::Div ? operand(x, t) : in_place_operand(x, t);
    if (alpha != 1.0) src = mul(src.detach(), scalar_like(src, alpha));
    ops::binary_(op, t, src);
    return 0;
  });
  return self;
}

using Unary = Tensor (*)(const Tensor&);
using Binary = Tensor (*)(const Tensor&, const Tensor&);

py::object item(const Tensor& t) {
  switch (t.dtype()) {
    case DType::Bool: return py::bool_(t.item<double>() != 0);
    case DType::Int64: return py::int_(t.item<int64_t>());
    case DType::Complex64:
    case DType::Complex128: return py::cast(t.item<c128>());
    default: return py::float_(t.item<double>());
  }
}

py::tuple shape_tuple(const Dims& dims) {
  py::tuple out(dims.size());
  for (int i = 0; i < dims.size(); ++i) out[i] = dims[i];
  return out;
}
Dims to_dims(const std::vector<int64_t>& v) { return Dims(v); }

// `with phasor.no_grad():` records nothing, as NoGradGuard does in C++. One
// object may be entered again inside its own block (a decorator's, a shared
// one): each exit restores the mode its own enter saw.
class NoGrad {
 public:
  void enter() {
    saved_.push_back(GradMode::enabled());
    GradMode::set_enabled(false);
  }
  void exit(const py::args&) {
    if (saved_.empty()) return;  // __exit__ without __enter__: nothing to restore
    GradMode::set_enabled(saved_.back());
    saved_.pop_back();
  }

 private:
  std::vector<bool> saved_;
};

// bool(t) as PyTorch has it: the truth of a one-element tensor's value (not
// Python's fallback to len(t)); float(t), int(t), complex(t) go through item(),
// which refuses any other size.
bool truth(const Tensor& t) {
  PHASOR_CHECK(t.numel() == 1, "Boolean value of a tensor with ", t.numel() == 0 ? "no values" : "more than one value",
               " is ambiguous (shape ", t.shape(), ")");
  return py::bool_(item(t));
}

std::optional<Generator> generator(std::optional<uint64_t> seed) {
  return seed ? std::optional<Generator>(Generator(*seed)) : std::nullopt;
}

// A Python callable f(*tensors) -> Tensor as the library's TensorFunction.
TensorFunction python_function(const py::function& f) {
  return [f](const std::vector<Tensor>& xs) { return f(*py::cast(xs)).cast<Tensor>(); };
}

}  // namespace

void bind_tensor(py::module_& m) {
  py::enum_<DType>(m, "dtype")
      .value("bool", DType::Bool)
      .value("int64", DType::Int64)
      .value("float32", DType::Float32)
      .value("float64", DType::Float64)
      .value("complex64", DType::Complex64)
      .value("complex128", DType::Complex128)
      .value("bfloat16", DType::BFloat16)  // storage only: NumPy has none (see bits() and from_bits())
      .export_values();

  py::class_<Tensor> tensor(m, "Tensor", py::buffer_protocol(), R"(An n-dimensional array with autograd.

Tensor(array) shares the array's memory (NumPy or any buffer of float32,
float64, complex64, complex128, int64 or bool): writes on either side are seen
on the other, and the tensor holds the array's buffer while it lives (the
array can be neither freed nor resized meanwhile). np.asarray(t), memoryview(t)
and t.numpy() are views of the tensor's memory the other way.

Autograd and shared memory: tensors over one array's memory (Tensor(a) twice,
Tensor(t.detach().numpy())) share one version counter, so an in-place op on any
of them is caught at backward when another saved the values. A tensor that
requires grad exports read-only memory (np.asarray(t), memoryview(t)), and
t.numpy() refuses it, as PyTorch does: use t.detach().numpy(). Writes made
through NumPy itself are not seen by autograd: do not write through an array
into values a graph has saved (including via t.detach().numpy()).)");
  tensor.def(py::init(&tensor_from_buffer), "array"_a)
      .def(py::init([](const py::object& data) { return tensor_copy(data); }), "data"_a,
           "a list or a number has no memory to share: the tensor holds a copy (as phasor.tensor(data))")
      .def_buffer(&tensor_buffer)
      .def("numpy", [](py::object self) {
             const Tensor& t = self.cast<const Tensor&>();
             PHASOR_CHECK(!t.requires_grad(), "numpy(): the tensor requires grad, and autograd would not see a write "
                                              "through the array: use t.detach().numpy()");
             return tensor_to_numpy(t, self);
           }, "a NumPy array sharing this tensor's memory (refused for a tensor that requires grad)")
      .def("__array__", [](py::object self, py::object dtype) {
             py::array a = tensor_to_numpy(self.cast<const Tensor&>(), self);
             return dtype.is_none() ? a : py::array(a.attr("astype")(dtype));
           }, "dtype"_a = py::none())
      .def_property_readonly("shape", [](const Tensor& t) { return shape_tuple(t.shape()); })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("ndim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("__len__", [](const Tensor& t) {
        if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
        return t.size(0);
      })
      .def("__iter__", [](const Tensor& t) {
        if (t.dim() == 0) throw py::type_error("iteration over a 0-d tensor");
        py::list rows;
        for (int64_t i = 0; i < t.size(0); ++i) rows.append(select(t, 0, i));
        return rows.attr("__iter__")();
      }, "the rows along dimension 0 (views)")
      .def("__bool__", &truth)
      .def("__float__", [](const Tensor& t) { return py::float_(item(t)); })  // a complex value: TypeError, as float(1j)
      .def("__int__", [](const Tensor& t) { return py::int_(item(t)); })      // truncated; NaN: ValueError
      .def("__complex__", [](const Tensor& t) { return py::handle(reinterpret_cast<PyObject*>(&PyComplex_Type))(item(t)); })
      .def("__index__", [](const Tensor& t) {
        if (t.dtype() != DType::Int64 && t.dtype() != DType::Bool)
          throw py::type_error("only integer tensors of a single element can be converted to an index");
        return py::int_(item(t));
      })
      .def_property_readonly("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw_data()); },
                             "the address of the first element")
      .def_property("requires_grad", &Tensor::requires_grad, [](Tensor& t, bool on) { t.requires_grad_(on); })
      .def("requires_grad_", [](Tensor& t, bool on) { return t.requires_grad_(on); }, "requires_grad"_a = true)
      .def_property_readonly("grad", [](const Tensor& t) -> std::optional<Tensor> {
        const Tensor g = t.grad();
        return g.defined() ? std::optional<Tensor>(g) : std::nullopt;
      })
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def("backward", [](const Tensor& t, std::optional<Tensor> gradient, bool retain_graph, bool create_graph) {
             t.backward(gradient.value_or(Tensor()), retain_graph, create_graph);
           }, "gradient"_a = py::none(), "retain_graph"_a = false, "create_graph"_a = false, ReleaseGil(),
           "from a real scalar, or seeded with `gradient`; complex leaves get dL/dx + i dL/dy (PyTorch's convention); "
           "with create_graph the gradients carry a graph of their own")
      .def("retain_grad", &Tensor::retain_grad)
      .def("zero_grad", &Tensor::zero_grad)
      .def("detach", &Tensor::detach)
      .def("copy_", [](py::object self, const Operand& src) {
             const Tensor& t = self.cast<const Tensor&>();
             check_in_place(t, "copy_");
             without_gil([&] { ops::copy_(t, operand(src, t)); return 0; });
             return self;
           }, "src"_a, "writes src (broadcast, converted) into this tensor's memory: NumPy views of it see the values")
      .def("fill_", [](py::object self, c128 value) {
             const Tensor& t = self.cast<const Tensor&>();
             check_in_place(t, "fill_");
             ops::fill_(t, value);
             return self;
           }, "value"_a)
      .def("item", &item)
      .def("tolist", [](py::object self) {
             const Tensor& t = self.cast<const Tensor&>();
             if (t.dtype() == DType::BFloat16) return tensor_to_numpy(to(t, DType::Float32), py::handle()).attr("tolist")();
             return tensor_to_numpy(t, self).attr("tolist")();
           })
      .def("bits", [](py::object self) { return tensor_bits(self.cast<const Tensor&>(), self); },
           "a bfloat16 tensor's memory as a NumPy uint16 array (NumPy has no bfloat16): the same memory, writes seen both ways")
      .def("to", [](const Tensor& t, DType d) { return to(t, d); }, "dtype"_a, ReleaseGil())
      .def("clone", [](const Tensor& t) { return clone(t); }, ReleaseGil())
      .def("contiguous", [](const Tensor& t) { return contiguous(t); }, ReleaseGil())
      .def("reshape", [](const Tensor& t, const std::vector<int64_t>& s) { return reshape(t, to_dims(s)); })
      .def("permute", [](const Tensor& t, const std::vector<int64_t>& o) { return permute(t, to_dims(o)); })
      .def("transpose", [](const Tensor& t, int64_t a, int64_t b) { return transpose(t, a, b); })
      .def("select", [](const Tensor& t, int64_t dim, int64_t i) { return select(t, dim, i); })
      .def("narrow", [](const Tensor& t, int64_t dim, int64_t start, int64_t n) { return narrow(t, dim, start, n); })
      .def("__getitem__", [](const Tensor& t, const py::handle& index) { return get_item(t, index); }, "index"_a,
           "NumPy's indexing: ints, slices with steps, ..., None give views; an integer or boolean array a copy")
      .def("__setitem__", [](const Tensor& t, const py::handle& index, const py::handle& value) {
             check_in_place(t, "__setitem__");
             set_item(t, index, value);
           }, "index"_a, "value"_a, "writes value (a number, a tensor or an array, broadcast) into the indexed elements")
      .def("__repr__", &Tensor::to_string)
      // As NumPy's and PyTorch's: properties, not methods (phasor.real(x) and phasor.imag(x) are the functions).
      .def_property_readonly("real", [](const Tensor& t) { return real(t); }, "the real part (a view of a complex tensor)")
      .def_property_readonly("imag", [](const Tensor& t) { return imag(t); }, "the imaginary part (a view of a complex tensor)")
      .def_property_readonly("T", [](const Tensor& t) {
             std::vector<int64_t> reversed(static_cast<size_t>(t.dim()));
             for (int64_t d = 0; d < t.dim(); ++d) reversed[static_cast<size_t>(d)] = t.dim() - 1 - d;
             return permute(t, to_dims(reversed));
           }, "the dimensions reversed (NumPy's a.T): the transpose of a matrix, as a view");

  // Arithmetic with tensors, arrays and numbers, both ways round.
  const std::pair<const char*, Binary> arithmetic[] = {{"add", &add}, {"sub", &sub}, {"mul", &mul}, {"truediv", &div}};
  for (const auto& [name, op] : arithmetic) {
    const std::string n = name;
    const Binary fn = op;  // a lambda cannot capture a structured binding before clang 16
    tensor.def(("__" + n + "__").c_str(), [fn](const Tensor& a, const Operand& b) { return fn(a, operand(b, a)); }, py::is_operator(),
               ReleaseGil());
    tensor.def(("__r" + n + "__").c_str(), [fn](const Tensor& a, const Operand& b) { return fn(operand(b, a), a); }, py::is_operator(),
               ReleaseGil());
  }
  // In-place arithmetic (t.add_(x), t += x) gives back the same object, so
  // `W -= lr * W.grad` under no_grad updates the parameter itself.
  struct InPlace {
    const char* method;
    const char* dunder;
    ops::Binary op;
  };
  const InPlace in_place_ops[] = {{"add_", "__iadd__", ops::Binary::Add}, {"sub_", "__isub__", ops::Binary::Sub},
                                  {"mul_", "__imul__", ops::Binary::Mul}, {"div_", "__itruediv__", ops::Binary::Div}};
  for (const InPlace& ip : in_place_ops) {
    const ops::Binary op = ip.op;
    const char* name = ip.method;
    tensor.def(ip.dunder, [op, name](py::object self, const Operand& x) { return in_place(self, op, x, 1.0, name); }, py::is_operator());
    if (op == ops::Binary::Add || op == ops::Binary::Sub)
      tensor.def(name, [op, name](py::object self, const Operand& x, double alpha) { return in_place(self, op, x, alpha, name); },
                 "other"_a, py::kw_only(), "alpha"_a = 1.0, "this tensor (op) alpha * other, in place (PyTorch's signature)");
    else
      tensor.def(name, [op, name](py::object self, const Operand& x) { return in_place(self, op, x, 1.0, name); }, "other"_a);
  }
  tensor.def("zero_", [](py::object self) {
    const Tensor& t = self.cast<const Tensor&>();
    check_in_place(t, "zero_");
    ops::fill_(t, 0.0);
    return self;
  });
  tensor.def_property("data", [](const Tensor& t) { return t.detach(); }, [](const Tensor& t, const Tensor& value) {
    t.set_data(value.detach());
  }, "the same memory without autograd (t.detach()); assigning points this tensor at another's values, keeping its grad state");

  // Comparisons give bool tensors, element by element, as NumPy's and PyTorch's do;
  // the hash stays the object's identity (PyTorch's), so tensors still key a dict.
  const std::pair<const char*, ops::Compare> comparisons[] = {{"eq", ops::Compare::Eq}, {"ne", ops::Compare::Ne}, {"lt", ops::Compare::Lt},
                                                              {"le", ops::Compare::Le}, {"gt", ops::Compare::Gt}, {"ge", ops::Compare::Ge}};
  for (const auto& [name, op] : comparisons) {
    const ops::Compare cmp = op;  // a lambda cannot capture a structured binding before clang 16
    tensor.def(("__" + std::string(name) + "__").c_str(),
               [cmp](const Tensor& a, const Operand& b) { return ops::compare(cmp, a.detach(), operand(b, a).detach()); }, py::is_operator(),
               ReleaseGil());
  }
  tensor.def("__hash__", [](py::handle self) { return reinterpret_cast<intptr_t>(self.ptr()); });
  tensor.def_property_readonly("device", [](const Tensor& t) {
    std::ostringstream name;
    name << t.device();
    return name.str();
  }, "where the tensor lives: 'cpu' or 'cuda:0'");
  tensor.def("__neg__", [](const Tensor& a) { return neg(a); }, ReleaseGil())
      .def("__abs__", [](const Tensor& a) { return abs(a); }, ReleaseGil())  // abs(t): |z| of a complex tensor, real
      .def("__pow__", [](const Tensor& a, double e) { return pow(a, e); }, py::is_operator(), ReleaseGil())
      .def("__matmul__", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, py::is_operator(), ReleaseGil());
  py::implicitly_convertible<py::buffer, Tensor>();  // any op takes a NumPy array for a tensor (zero-copy)

  const std::pair<const char*, Unary> unary[] = {
      {"neg", &neg},       {"exp", &exp},     {"log", &log},         {"sqrt", &sqrt},   {"rsqrt", &rsqrt},
      {"sin", &sin},       {"cos", &cos},     {"tanh", &tanh},       {"sigmoid", &sigmoid}, {"silu", &silu},
      {"gelu", &gelu},     {"abs", &abs},     {"square", &square},   {"reciprocal", &reciprocal}, {"softplus", &softplus},
      {"conj", &conj},     {"angle", &angle}, {"real", &real},       {"imag", &imag},
      {"view_as_real", &view_as_real},        {"view_as_complex", &view_as_complex}, {"contiguous", &contiguous}, {"clone", &clone}};
  for (const auto& [name, fn] : unary) {
    m.def(name, fn, "x"_a, ReleaseGil());
    if (std::string_view(name) != "real" && std::string_view(name) != "imag") tensor.def(name, fn, ReleaseGil());  // those two are properties
  }
  const std::pair<const char*, Binary> binary[] = {{"add", &add},         {"sub", &sub},         {"mul", &mul},
                                                   {"div", &div},         {"maximum", &maximum}, {"minimum", &minimum},
                                                   {"atan2", &atan2},     {"complex", &complex}, {"polar", &polar}};
  for (const auto& [name, op] : binary) {
    const Binary fn = op;
    m.def(name, [fn](const Tensor& a, const Operand& b) { return fn(a, operand(b, a)); }, "a"_a, "b"_a, ReleaseGil());
  }
  m.def("pow", [](const Tensor& a, double e) { return pow(a, e); }, "x"_a, "exponent"_a, ReleaseGil());
  m.def("matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, "a"_a, "b"_a, ReleaseGil());

  // Reductions over `dims` (all when empty).
  using Reduction = Tensor (*)(const Tensor&, const std::vector<int64_t>&, bool);
  const std::pair<const char*, Reduction> reductions[] = {{"sum", &sum}, {"mean", &mean}, {"norm", &norm}};
  for (const auto& [name, fn] : reductions) {
    m.def(name, fn, "x"_a, "dims"_a = std::vector<int64_t>{}, "keepdim"_a = false, ReleaseGil());
    tensor.def(name, fn, "dims"_a = std::vector<int64_t>{}, "keepdim"_a = false, ReleaseGil());
  }
  m.def("cumsum", [](const Tensor& x, int64_t dim) { return cumsum(x, dim); }, "x"_a, "dim"_a, ReleaseGil(),
        "inclusive running sums along dim, shaped like x (torch.cumsum)");
  tensor.def("cumsum", [](const Tensor& x, int64_t dim) { return cumsum(x, dim); }, "dim"_a, ReleaseGil());
  m.def("softmax", [](const Tensor& x, int64_t dim) { return softmax(x, dim); }, "x"_a, "dim"_a, ReleaseGil());
  m.def("log_softmax", [](const Tensor& x, int64_t dim) { return log_softmax(x, dim); }, "x"_a, "dim"_a, ReleaseGil());
  m.def("logsumexp", [](const Tensor& x, int64_t dim, bool keepdim) { return logsumexp(x, dim, keepdim); }, "x"_a, "dim"_a,
        "keepdim"_a = false, ReleaseGil());
  m.def("cat", [](const std::vector<Tensor>& ts, int64_t dim) { return cat(ts, dim); }, "tensors"_a, "dim"_a = 0, ReleaseGil());
  m.def("stack", [](const std::vector<Tensor>& ts, int64_t dim) { return stack(ts, dim); }, "tensors"_a, "dim"_a = 0, ReleaseGil());

  install_buffer_refusals(tensor);  // after def_buffer, which set the slot

  // Creation.
  m.def("from_bits", &tensor_from_bits, "bits"_a,
        "a bfloat16 tensor over a uint16 array's memory (its bits, as t.bits() gives them), without a copy");
  m.def("from_numpy", &tensor_from_buffer, "array"_a, "a tensor sharing the array's memory (as phasor.Tensor(array))");
  m.def("tensor", [](const py::object& data, std::optional<DType> dtype) {
          const Tensor t = tensor_copy(data);
          return dtype && *dtype != t.dtype() ? to(t, *dtype) : t;
        }, "data"_a, "dtype"_a = py::none(), "a tensor holding a copy of `data` (an array, a list, a number)");
  m.def("zeros", [](const std::vector<int64_t>& s, DType d) { return zeros(to_dims(s), d); }, "shape"_a, "dtype"_a = DType::Float32);
  m.def("ones", [](const std::vector<int64_t>& s, DType d) { return ones(to_dims(s), d); }, "shape"_a, "dtype"_a = DType::Float32);
  m.def("full", [](const std::vector<int64_t>& s, c128 v, DType d) { return full(to_dims(s), v, d); }, "shape"_a, "value"_a,
        "dtype"_a = DType::Float32);
  m.def("arange", [](double start, double end, double step, DType d) { return arange(start, end, step, d); }, "start"_a,
        "end"_a, "step"_a = 1.0, "dtype"_a = DType::Float32);
  m.def("randn", [](const std::vector<int64_t>& s, DType d, std::optional<uint64_t> seed) {
          auto gen = generator(seed);
          return randn(to_dims(s), d, gen ? &*gen : nullptr);
        }, "shape"_a, "dtype"_a = DType::Float32, "seed"_a = py::none(), "standard normal (complex: each part of variance 1/2)");
  m.def("rand", [](const std::vector<int64_t>& s, DType d, std::optional<uint64_t> seed) {
          auto gen = generator(seed);
          return rand(to_dims(s), d, gen ? &*gen : nullptr);
        }, "shape"_a, "dtype"_a = DType::Float32, "seed"_a = py::none());
  m.def("manual_seed", &manual_seed, "seed"_a);

  // Autograd.
  py::class_<NoGrad>(m, "no_grad", "with phasor.no_grad(): nothing inside records a graph; @phasor.no_grad() on a function: nor does its body")
      .def(py::init<>())
      .def("__enter__", &NoGrad::enter)
      .def("__exit__", &NoGrad::exit)
      .def("__call__", [](py::object self, const py::function& fn) {
        // A Python wrapper, so that functools.wraps can give it the function's name and docstring.
        // Never destroyed: a static py::object would be released after the interpreter is gone.
        static const py::object* wrap = new py::object([] {
          py::dict scope;
          py::exec(R"(
import functools
def wrap(fn, no_grad):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with no_grad():
            return fn(*args, **kwargs)
    return wrapper
)", scope);
          return py::object(scope["wrap"]);
        }());
        return (*wrap)(fn, py::type::of(self));
      }, "fn"_a);
  m.def("is_grad_enabled", &GradMode::enabled);
  py::class_<GradcheckResult>(m, "GradcheckResult")
      .def_readonly("ok", &GradcheckResult::ok)
      .def_readonly("worst_error", &GradcheckResult::worst_error)
      .def_readonly("message", &GradcheckResult::message)
      .def("__bool__", [](const GradcheckResult& r) { return r.ok; })
      .def("__repr__", [](const GradcheckResult& r) {
        std::ostringstream text;
        text << "GradcheckResult(ok=" << (r.ok ? "True" : "False") << ", worst_error=" << r.worst_error;
        if (!r.message.empty()) text << ", message=" << py::repr(py::str(r.message)).cast<std::string>();
        text << ")";
        return text.str();
      });
  m.def("gradcheck", [](const py::function& f, const std::vector<Tensor>& inputs, double eps, double atol, double rtol) {
          return gradcheck(python_function(f), inputs, GradcheckOptions{eps, atol, rtol});
        }, "f"_a, "inputs"_a, "eps"_a = 1e-6, "atol"_a = 1e-7, "rtol"_a = 1e-5,
        "finite differences against backward for f(*inputs) (float64 / complex128 inputs); the result is truthy when they agree");
  m.def("gradgradcheck", [](const py::function& f, const std::vector<Tensor>& inputs, double eps, double atol, double rtol) {
          return gradgradcheck(python_function(f), inputs, GradcheckOptions{eps, atol, rtol});
        }, "f"_a, "inputs"_a, "eps"_a = 1e-6, "atol"_a = 1e-7, "rtol"_a = 1e-5,
        "the second order: finite differences of the gradient against its derivative under create_graph");

  // Gradients as values and the second order (autograd/functional.h).
  m.def("grad", [](const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs, std::optional<std::vector<std::optional<Tensor>>> grad_outputs,
                   bool create_graph, std::optional<bool> retain_graph, bool allow_unused) {
          std::vector<Tensor> seeds;
          for (const auto& g : grad_outputs.value_or(std::vector<std::optional<Tensor>>{})) seeds.push_back(g.value_or(Tensor()));
          std::vector<std::optional<Tensor>> out;
          for (const Tensor& g : grad(outputs, inputs, seeds, create_graph, retain_graph, allow_unused))
            out.push_back(g.defined() ? std::optional<Tensor>(g) : std::nullopt);
          return out;
        }, "outputs"_a, "inputs"_a, "grad_outputs"_a = py::none(), "create_graph"_a = false, "retain_graph"_a = py::none(),
        "allow_unused"_a = false, ReleaseGil(),
        "the gradients of sum Re<grad_outputs[i], outputs[i]> w.r.t. inputs, writing no .grad (torch.autograd.grad); "
        "None for an unused input when allow_unused");
  m.def("hvp", &hvp, "loss"_a, "params"_a, "v"_a, ReleaseGil(),
        "the Hessian-vector product H v of a real scalar loss w.r.t. params (complex ones as pairs of reals)");
  m.def("jvp", [](const py::function& f, const std::vector<Tensor>& inputs, const std::vector<Tensor>& tangents) {
          const JvpResult r = jvp(python_function(f), inputs, tangents);
          return py::make_tuple(r.output, r.tangent);
        }, "f"_a, "inputs"_a, "tangents"_a, "(f(*inputs), J v): the Jacobian-vector product along tangents");
}

}  // namespace phasor::python
