// The cross-backend harness (in the spirit of ggml's test-backend-ops): every
// method of phasor::Backend, every dtype it supports, random shapes with
// contiguous, transposed, sliced and broadcast operands, run on the CPU (the
// reference) and on CUDA and compared within `atol + rtol * |ref|`; forward and
// backward through autograd; and one training step of the model, CPU vs CUDA.
// On a machine without a GPU (or in a build without CUDA) it checks that device
// cuda gives one clear error and exits 77, which ctest reports as skipped. A GPU
// that is there but cannot be used (a driver older than the runtime, a failing
// device: gpu::absent() is false) is a failure, never a skip.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <iterator>
#include <string>
#include <tuple>

#include "models/transformer.h"
#include "nn/optim.h"
#include "nn/precision.h"
#include "phasor.h"
#include "tensor/backend.h"
#ifdef PHASOR_WITH_CUDA
#include "cuda/cuda.h"
#include "cuda/kernels.h"
#endif

using namespace phasor;

namespace {

bool gpu_present() {
#ifdef PHASOR_WITH_CUDA
  return gpu::available();
#else
  return false;
#endif
}

// Runs before doctest: no GPU means "skipped", after checking the error is clear;
// a GPU that fails means "failed".
const int skip_without_gpu = [] {
  if (gpu_present()) return 0;
#ifdef PHASOR_WITH_CUDA
  if (!gpu::absent()) {
    std::printf("test_cuda: FAILED: a GPU is present but cannot be used: %s\n", gpu::unavailable_reason().c_str());
    std::exit(1);
  }
  gpu::register_cuda();  // this initialiser may run before the library's
#endif
  try {
    const Tensor t = ops::to_device(zeros({2}), cuda());
    std::printf("test_cuda: FAILED: moving a tensor to cuda without a GPU did not throw\n");
    std::exit(1);
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find("cuda") == std::string::npos || what.find("not available") == std::string::npos) {
      std::printf("test_cuda: FAILED: unclear error without a GPU: %s\n", e.what());
      std::exit(1);
    }
    std::printf("test_cuda: SKIPPED, no GPU here (%s)\n", e.what());
  }
  std::exit(77);
}();

const Device G = cuda(0);
Generator rng(20240601);

Tensor on_gpu(const Tensor& t) { return ops::to_device(t, G); }

// Random values of any dtype (bool: about half true; int64: in [lo, hi)).
Tensor rnd(const Dims& shape, DType dt, double lo = -2.0, double hi = 2.0) {
  if (dt == DType::Bool) return ops::compare(ops::Compare::Gt, uniform(shape, -1, 1, DType::Float64, &rng), scalar_tensor(0.0, DType::Float64));
  if (dt == DType::Int64) return ops::to(uniform(shape, lo, hi, DType::Float64, &rng), DType::Int64);
  return uniform(shape, lo, hi, dt, &rng);
}
Dims random_shape(int min_rank, int max_rank, int64_t max_size = 7) {
  const int rank = min_rank + static_cast<int>(rng.next_u64() % static_cast<uint64_t>(max_rank - min_rank + 1));
  Dims d;
  for (int i = 0; i < rank; ++i) d.push_back(1 + static_cast<int64_t>(rng.next_u64() % static_cast<uint64_t>(max_size)));
  return d;
}

// The same values in another memory layout, on whichever device t lives.
enum class Layout { Contiguous, Transposed, Sliced };
const Layout kLayouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Sliced};
const char* layout_name(Layout l) { return l == Layout::Contiguous ? "contiguous" : l == Layout::Transposed ? "transposed" : "sliced"; }
Tensor layout(const Tensor& t, Layout l) {
  if (l == Layout::Transposed && t.dim() >= 2) return ops::transpose(ops::contiguous(ops::transpose(t, 0, -1)), 0, -1);
  if (l == Layout::Sliced && t.dim() >= 1) {
    Dims big = t.shape();
    big[big.size() - 1] += 3;
    const Tensor storage = zeros(big, t.dtype(), t.device());
    const Tensor view = ops::narrow(storage, -1, 1, t.size(-1));
    ops::copy_(view, t);
    return view;
  }
  return t;
}

const DType kInexact[] = {DType::Float32, DType::Float64, DType::Complex64, DType::Complex128};
const DType kAll[] = {DType::Bool, DType::Int64, DType::Float32, DType::Float64, DType::Complex64, DType::Complex128};
double atol_of(DType t) { return real_dtype(t) == DType::Float64 ? 1e-11 : 2e-5; }
double rtol_of(DType t) { return real_dtype(t) == DType::Float64 ? 1e-10 : 2e-5; }

int checks_done = 0;

// ref (CPU) and got (CUDA) agree in shape, dtype and every value within atol + rtol |ref|.
void expect_close(const Tensor& ref, const Tensor& got, double atol, double rtol, const std::string& what) {
  ++checks_done;
  INFO(what);
  REQUIRE(got.defined());
  CHECK(got.device() == G);
  REQUIRE(ref.shape() == got.shape());
  REQUIRE(ref.dtype() == got.dtype());
  const auto a = ref.to_vector<c128>(), b = got.to_vector<c128>();
  double worst = 0, worst_ref = 0, worst_got = 0;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool an = std::isnan(a[i].real()) || std::isnan(a[i].imag()), bn = std::isnan(b[i].real()) || std::isnan(b[i].imag());
    double ratio;
    if (an || bn) ratio = an == bn ? 0.0 : INFINITY;
    else if (a[i] == b[i]) ratio = 0.0;  // equal infinities too
    else ratio = std::abs(a[i] - b[i]) / (atol + rtol * std::abs(a[i]));
    if (!(ratio <= worst)) {
      worst = ratio;
      at = i;
      worst_ref = std::abs(a[i]);
      worst_got = std::abs(b[i]);
    }
  }
  CHECK_MESSAGE(worst <= 1.0, what, ": worst element ", at, " off by ", worst, " x tolerance (|ref| ", worst_ref, ", |got| ", worst_got,
                ") shape ", ref.shape(), " ", ref.dtype());
}
void expect_close(const Tensor& ref, const Tensor& got, const std::string& what) {
  expect_close(ref, got, atol_of(ref.dtype()), rtol_of(ref.dtype()), what);
}
// All but a fraction `outliers` of the values within tolerance (AdamW turns a
// gradient that is zero up to rounding into a full +-lr step of either sign).
void expect_mostly_close(const Tensor& ref, const Tensor& got, double atol, double rtol, double outliers, const std::string& what) {
  ++checks_done;
  REQUIRE(ref.shape() == got.shape());
  const auto a = ref.to_vector<double>(), b = got.to_vector<double>();
  size_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) bad += !(std::abs(a[i] - b[i]) <= atol + rtol * std::abs(a[i]));
  CHECK_MESSAGE(static_cast<double>(bad) <= outliers * static_cast<double>(a.size()), what, ": ", bad, " of ", a.size(), " values off");
}

std::string str(const Dims& d) {
  std::ostringstream os;
  os << d;
  return os.str();
}

}  // namespace

// ---------------------------------------------------------------- infrastructure

TEST_CASE("cuda: device, copies both ways, and the caching allocator") {
#ifdef PHASOR_WITH_CUDA
  MESSAGE("device: ", gpu::device_name());
  for (DType dt : kAll) {
    const Tensor x = rnd({3, 5}, dt);
    const Tensor y = on_gpu(x);
    CHECK(y.device() == G);
    expect_close(x, y, 0, 0, std::string("round trip ") + dtype_name(dt));
  }
  // Non-contiguous CPU source, and a view of a GPU tensor copied back.
  const Tensor x = rnd({4, 6}, DType::Float32);
  expect_close(ops::transpose(x, 0, 1), on_gpu(ops::transpose(x, 0, 1)), 0, 0, "transposed source");
  expect_close(ops::narrow(x, 1, 2, 3), ops::narrow(on_gpu(x), 1, 2, 3), 0, 0, "a view copied back");
  CHECK(to_cpu(ops::narrow(on_gpu(x), 1, 2, 3)).device() == kCPU);
  // Freed blocks are reused by size.
  gpu::synchronize();
  const gpu::MemoryStats before = gpu::memory_stats();
  { const Tensor a = empty({1000}, DType::Float32, G); }
  { const Tensor b = empty({1000}, DType::Float32, G); }
  const gpu::MemoryStats after = gpu::memory_stats();
  CHECK(after.allocations == before.allocations + 2);
  CHECK(after.cache_hits >= before.cache_hits + 1);
  CHECK(after.allocated == before.allocated);
  CHECK(after.peak_allocated >= 4000);
  CHECK(after.reserved >= after.allocated);
#endif
}

TEST_CASE("cuda: clear errors for mixed devices, out of memory and a second GPU") {
  const Tensor a = on_gpu(ones({3})), b = ones({3});
  CHECK_THROWS_WITH_AS(ops::binary(ops::Binary::Add, a, b), doctest::Contains("different devices"), Error);
  CHECK_THROWS_WITH_AS(ops::matmul(on_gpu(ones({2, 2})), ones({2, 2})), doctest::Contains("different devices"), Error);
  CHECK_THROWS_WITH_AS(ops::copy_(a, b), doctest::Contains("devices differ"), Error);
  // A CPU scalar beside GPU tensors is fine.
  expect_close(ops::binary(ops::Binary::Mul, ones({3}), scalar_tensor(2.0)), ops::binary(ops::Binary::Mul, a, scalar_tensor(2.0)), "cpu scalar");
  // Out of memory names the request and the free memory.
  try {
    const Tensor huge = empty({int64_t{1} << 46}, DType::Float32, G);
    FAIL("allocating 256 TiB did not throw");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find("out of memory") != std::string::npos);
    CHECK(what.find("281474976710656 bytes") != std::string::npos);
    CHECK(what.find("free of") != std::string::npos);
  }
  CHECK_THROWS_WITH_AS(ops::to_device(ones({2}), cuda(1)), doctest::Contains("one GPU"), Error);
  // Indices out of range are checked as on the CPU, at the next synchronisation.
  CHECK_THROWS_WITH_AS(ops::index_select(on_gpu(ones({3, 2})), 0, on_gpu(from_vector<int64_t>({0, 5}))).to_vector<float>(),
                       doctest::Contains("out of range"), Error);
}

// ---------------------------------------------------------------- copies and elementwise

TEST_CASE("cuda: copy_ converts every dtype to every dtype, with broadcasting and any layout") {
  for (DType src : kAll)
    for (DType dst : kAll)
      for (Layout l : kLayouts) {
        const Tensor x = rnd({4, 5}, src);
        const Tensor ref = ops::to(layout(x, l), dst);
        const Tensor got = ops::to(layout(on_gpu(x), l), dst);
        expect_close(ref, got, 1e-6, 1e-6, std::string("copy ") + dtype_name(src) + " -> " + dtype_name(dst) + " " + layout_name(l));
      }
  // Broadcast source into a strided destination.
  const Tensor row = rnd({1, 5}, DType::Float32);
  Tensor ref = zeros({4, 8}), got = zeros({4, 8}, DType::Float32, G);
  ops::copy_(ops::narrow(ref, 1, 2, 5), row);
  ops::copy_(ops::narrow(got, 1, 2, 5), on_gpu(row));
  expect_close(ref, got, "broadcast copy into a view");
  for (DType dt : kAll) {
    // A value each dtype holds exactly (fill_ refuses one it cannot hold, e.g. 1.5-2j into a real dtype).
    const c128 value = is_complex(dt) ? c128(1.5, -2) : dt == DType::Bool ? c128(1) : dt == DType::Int64 ? c128(-3) : c128(1.5);
    Tensor r = zeros({3, 4}, dt), g = zeros({3, 4}, dt, G);
    ops::fill_(ops::transpose(r, 0, 1), value);
    ops::fill_(ops::transpose(g, 0, 1), value);
    expect_close(r, g, 0, 0, std::string("fill_ ") + dtype_name(dt));
  }
}

TEST_CASE("cuda: bfloat16 moves both ways as bytes, converts and fills with the CPU's bits") {
  // bits of a bfloat16 tensor, read on the CPU
  auto bits = [](const Tensor& t) {
    const Tensor c = ops::contiguous(to_cpu(t));
    REQUIRE(c.dtype() == DType::BFloat16);
    std::vector<uint16_t> out(static_cast<size_t>(c.numel()));
    if (!out.empty()) std::memcpy(out.data(), c.raw_data(), out.size() * 2);
    return out;
  };
  const std::vector<uint16_t> raw = {0x3f80, 0x7f81, 0xc020, 0x0001, 0x8000, 0xff80};  // a signalling NaN among them
  const Tensor b = from_blob(raw.data(), {2, 3}, DType::BFloat16);
  CHECK(bits(on_gpu(b)) == raw);
  CHECK(bits(ops::contiguous(ops::transpose(on_gpu(b), 0, 1))) == bits(ops::contiguous(ops::transpose(b, 0, 1))));
  for (DType dt : kAll)
    for (Layout l : kLayouts) {
      CAPTURE(dtype_name(dt));
      CAPTURE(layout_name(l));
      const Tensor x = rnd({4, 5}, dt);
      CHECK(bits(ops::to(layout(on_gpu(x), l), DType::BFloat16)) == bits(ops::to(layout(x, l), DType::BFloat16)));
      const Tensor h = ops::to(x, DType::BFloat16);
      expect_close(ops::to(layout(h, l), dt), ops::to(layout(on_gpu(h), l), dt), 0, 0, std::string("bfloat16 -> ") + dtype_name(dt));
    }
  Tensor r = zeros({3, 4}, DType::BFloat16), g = zeros({3, 4}, DType::BFloat16, G);
  ops::fill_(ops::transpose(r, 0, 1), 1.0 + 0x1p-8 + 0x1p-7);  // a tie, rounded to even: 1 + 2^-6
  ops::fill_(ops::transpose(g, 0, 1), 1.0 + 0x1p-8 + 0x1p-7);
  CHECK(bits(g) == bits(r));
  CHECK(bits(r)[0] == 0x3f82);
  // What computes is refused as on the CPU.
  CHECK_THROWS_WITH_AS(ops::binary(ops::Binary::Add, g, g), "add: not defined for dtype bfloat16 (convert with to(float32))", Error);
}

TEST_CASE("cuda: every unary op, every dtype, every layout") {
  using ops::Unary;
  const Unary all[] = {Unary::Neg,     Unary::Exp,  Unary::Log,  Unary::Sqrt, Unary::Rsqrt,      Unary::Sin,  Unary::Cos,
                       Unary::Tanh,    Unary::Sigmoid, Unary::Silu, Unary::Gelu, Unary::Abs, Unary::Reciprocal, Unary::Conj,
                       Unary::Angle,   Unary::Sign, Unary::Square, Unary::GeluDerivative, Unary::Softplus};
  static_assert(std::size(all) == static_cast<size_t>(Unary::Count), "every Unary op, once");
  for (Unary op : all)
    for (DType dt : {DType::Int64, DType::Float32, DType::Float64, DType::Complex64, DType::Complex128}) {
      if (is_complex(dt) && (op == Unary::Gelu || op == Unary::GeluDerivative || op == Unary::Softplus)) {
        CHECK_THROWS_AS(ops::unary(op, on_gpu(rnd({2}, dt))), Error);
        continue;
      }
      for (Layout l : kLayouts) {
        const Dims shape = random_shape(1, 4);
        const bool positive = op == Unary::Log || op == Unary::Sqrt || op == Unary::Rsqrt || op == Unary::Reciprocal;
        Tensor x = rnd(shape, dt, positive ? 0.2 : -3.0, 3.0);
        const Tensor ref = ops::unary(op, layout(x, l));
        const Tensor got = ops::unary(op, layout(on_gpu(x), l));
        expect_close(ref, got, std::string(ops::name(op)) + " " + dtype_name(dt) + " " + layout_name(l) + " " + str(shape));
      }
    }
  // NaN and infinities go through as on the CPU.
  const Tensor special = from_vector<float>({NAN, INFINITY, -INFINITY, 0.0f, -0.0f});
  for (Unary op : {Unary::Exp, Unary::Tanh, Unary::Sigmoid, Unary::Sign, Unary::Abs, Unary::Angle})
    expect_close(ops::unary(op, special), ops::unary(op, on_gpu(special)), std::string("special values ") + ops::name(op));
}

TEST_CASE("cuda: every binary op with broadcasting, promotion, CPU scalars and in-place forms") {
  using ops::Binary;
  const Binary all[] = {Binary::Add, Binary::Sub, Binary::Mul, Binary::Div, Binary::Pow, Binary::Maximum, Binary::Minimum, Binary::Atan2};
  static_assert(std::size(all) == static_cast<size_t>(Binary::Count), "every Binary op, once");
  for (Binary op : all)
    for (DType dt : {DType::Int64, DType::Float32, DType::Float64, DType::Complex64, DType::Complex128}) {
      const bool real_only = op == Binary::Maximum || op == Binary::Minimum || op == Binary::Atan2;
      if (real_only && is_complex(dt)) {
        CHECK_THROWS_AS(ops::binary(op, on_gpu(rnd({2}, dt)), on_gpu(rnd({2}, dt))), Error);
        continue;
      }
      for (Layout l : kLayouts) {
        // [a, 1, c] with [b, c]: both sides broadcast.
        const Dims sa = {3, 1, 5}, sb = {4, 5};
        const double lo = op == Binary::Pow ? 0.3 : -3.0;
        const double blo = op != Binary::Pow ? -3.0 : dt == DType::Int64 ? 0.0 : -2.0;  // no 0 to a negative integer power
        const Tensor a = rnd(sa, dt, lo, 3.0), b = rnd(sb, dt, blo, 3.0);
        const Tensor bb = (op == Binary::Div && dt == DType::Int64) ? ops::binary(Binary::Add, ops::unary(ops::Unary::Abs, b), scalar_tensor(1.0, DType::Int64)) : b;
        const Tensor ref = ops::binary(op, layout(a, l), layout(bb, l));
        const Tensor got = ops::binary(op, layout(on_gpu(a), l), layout(on_gpu(bb), l));
        expect_close(ref, got, 1e-5, 5e-5, std::string(ops::name(op)) + " " + dtype_name(dt) + " " + layout_name(l));
      }
    }
  // Promotion: float32 with complex128, int64 with float64, bool with bool.
  const Tensor f = rnd({6}, DType::Float32), z = rnd({6}, DType::Complex128), i = rnd({6}, DType::Int64), d = rnd({6}, DType::Float64);
  expect_close(ops::binary(Binary::Mul, f, z), ops::binary(Binary::Mul, on_gpu(f), on_gpu(z)), "promote f32 x c128");
  expect_close(ops::binary(Binary::Div, i, d), ops::binary(Binary::Div, on_gpu(i), on_gpu(d)), "promote i64 / f64");
  const Tensor t = rnd({6}, DType::Bool);
  expect_close(ops::binary(Binary::Add, t, t), ops::binary(Binary::Add, on_gpu(t), on_gpu(t)), "bool + bool");
  // CPU scalar operands on either side.
  expect_close(ops::binary(Binary::Sub, scalar_tensor(1.0), z), ops::binary(Binary::Sub, scalar_tensor(1.0), on_gpu(z)), "scalar - gpu");
  // NaN propagation in maximum / minimum.
  const Tensor n1 = from_vector<double>({NAN, 1, 2, NAN}), n2 = from_vector<double>({1, NAN, 3, NAN});
  expect_close(ops::binary(Binary::Maximum, n1, n2), ops::binary(Binary::Maximum, on_gpu(n1), on_gpu(n2)), "maximum NaN");
  expect_close(ops::binary(Binary::Minimum, n1, n2), ops::binary(Binary::Minimum, on_gpu(n1), on_gpu(n2)), "minimum NaN");
  // In place: binary_ and axpy_ into transposed destinations.
  for (DType dt : kInexact) {
    const Tensor x = rnd({5, 4}, dt), y = rnd({4}, dt);
    Tensor rx = ops::clone(x), gx = on_gpu(x);
    ops::binary_(Binary::Mul, ops::transpose(rx, 0, 1), ops::unsqueeze(y, 1));
    ops::binary_(Binary::Mul, ops::transpose(gx, 0, 1), ops::unsqueeze(on_gpu(y), 1));
    expect_close(rx, gx, std::string("binary_ ") + dtype_name(dt));
    ops::axpy_(rx, ops::unsqueeze(y, 0), -0.25);
    ops::axpy_(gx, ops::unsqueeze(on_gpu(y), 0), -0.25);
    expect_close(rx, gx, std::string("axpy_ ") + dtype_name(dt));
  }
  CHECK_THROWS_WITH_AS(ops::binary_(Binary::Add, on_gpu(rnd({2}, DType::Float32)), on_gpu(rnd({2}, DType::Complex64))),
                       doctest::Contains("cannot be stored in place"), Error);
}

TEST_CASE("cuda: compare, where, polar, complex, pow_scalar") {
  using ops::Compare;
  for (DType dt : kAll)
    for (Compare op : {Compare::Eq, Compare::Ne, Compare::Lt, Compare::Le, Compare::Gt, Compare::Ge}) {
      if (is_complex(dt) && op != Compare::Eq && op != Compare::Ne) continue;
      Tensor a = rnd({3, 4}, dt, -2, 2), b = rnd({4}, dt, -2, 2);
      if (dt == DType::Int64 || dt == DType::Bool) b = ops::narrow(a, 0, 1, 1);  // some equal values
      expect_close(ops::compare(op, a, b), ops::compare(op, on_gpu(a), on_gpu(b)), std::string("compare ") + dtype_name(dt));
    }
  for (DType dt : kAll) {
    const Tensor c = rnd({3, 1}, DType::Bool), a = rnd({3, 4}, dt), b = rnd({4}, dt);
    expect_close(ops::where(c, a, b), ops::where(on_gpu(c), on_gpu(a), on_gpu(b)), std::string("where ") + dtype_name(dt));
  }
  for (DType rt : {DType::Float32, DType::Float64}) {
    const Tensor r = rnd({2, 3}, rt, 0, 2), th = rnd({3}, rt, -4, 4);
    expect_close(ops::polar(r, th), ops::polar(on_gpu(r), on_gpu(th)), std::string("polar ") + dtype_name(rt));
    expect_close(ops::complex(r, th), ops::complex(on_gpu(r), on_gpu(th)), std::string("complex ") + dtype_name(rt));
  }
  for (DType dt : kInexact)
    for (double p : {2.0, 0.5, 1.7, -1.0})
      for (Layout l : kLayouts) {
        const Tensor x = rnd({3, 5}, dt, 0.1, 2);
        expect_close(ops::pow_scalar(layout(x, l), p), ops::pow_scalar(layout(on_gpu(x), l), p), std::string("pow_scalar ") + dtype_name(dt));
      }
}

// ---------------------------------------------------------------- reductions

TEST_CASE("cuda: sum over any dims, every dtype, including long rows and columns") {
  for (DType dt : kAll)
    for (Layout l : kLayouts) {
      const Tensor x = rnd({3, 4, 5}, dt, -3, 3);
      const std::vector<std::vector<int64_t>> dim_sets = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {1, 2}, {0, 1}};
      for (const auto& dims : dim_sets)
        for (bool keep : {false, true}) {
          const Tensor ref = ops::sum(layout(x, l), dims, keep), got = ops::sum(layout(on_gpu(x), l), dims, keep);
          expect_close(ref, got, 1e-5, 1e-5, std::string("sum ") + dtype_name(dt) + " " + layout_name(l) + (keep ? " keepdim" : ""));
        }
    }
  for (const Dims& shape : {Dims{1, 1 << 20}, Dims{1 << 16, 3}, Dims{7, 300000}, Dims{4096, 256}}) {
    const Tensor x = rnd(shape, DType::Float32);
    expect_close(ops::sum(x, {1}), ops::sum(on_gpu(x), {1}), 1e-4, 1e-5, "sum rows " + str(shape));
    expect_close(ops::sum(x, {0}), ops::sum(on_gpu(x), {0}), 1e-4, 1e-5, "sum columns " + str(shape));
    expect_close(ops::sum(x), ops::sum(on_gpu(x)), 1e-3, 1e-5, "sum all " + str(shape));
  }
  const Tensor x = rnd({4, 6}, DType::Complex64);
  expect_close(ops::mean(x, {1}), ops::mean(on_gpu(x), {1}), "mean (a CPU scalar divides)");
  expect_close(ops::norm(x), ops::norm(on_gpu(x)), "norm");
}

TEST_CASE("cuda: max and min with indices, NaN and ties as on the CPU") {
  for (DType dt : {DType::Bool, DType::Int64, DType::Float32, DType::Float64})
    for (Layout l : kLayouts)
      for (int64_t dim : {0, 1, -1})
        for (bool keep : {false, true}) {
          const Tensor x = rnd({6, 9}, dt, -3, 3);
          const auto rmax = ops::max(layout(x, l), dim, keep), gmax = ops::max(layout(on_gpu(x), l), dim, keep);
          const auto rmin = ops::min(layout(x, l), dim, keep), gmin = ops::min(layout(on_gpu(x), l), dim, keep);
          const std::string what = std::string(dtype_name(dt)) + " " + layout_name(l) + " dim " + std::to_string(dim);
          expect_close(rmax.values, gmax.values, 0, 0, "max values " + what);
          expect_close(rmax.indices, gmax.indices, 0, 0, "max indices " + what);
          expect_close(rmin.values, gmin.values, 0, 0, "min values " + what);
          expect_close(rmin.indices, gmin.indices, 0, 0, "min indices " + what);
        }
  const Tensor special = from_vector<float>({1, 3, 3, NAN, 5, NAN, -1, 2, 2, 2, 0, 1}, {3, 4});
  for (int64_t dim : {0, 1}) {
    expect_close(ops::max(special, dim).indices, ops::max(on_gpu(special), dim).indices, 0, 0, "max NaN/ties");
    expect_close(ops::min(special, dim).values, ops::min(on_gpu(special), dim).values, 0, 0, "min NaN/ties");
  }
  const Tensor big = rnd({3, 5000}, DType::Float32);
  expect_close(ops::max(big, 1).indices, ops::max(on_gpu(big), 1).indices, 0, 0, "max long rows");
}

TEST_CASE("cuda: logsumexp, softmax, log_softmax and all_finite") {
  for (DType dt : {DType::Float32, DType::Float64})
    for (Layout l : kLayouts)
      for (int64_t dim : {0, 1, 2, -1}) {
        const Tensor x = rnd({3, 5, 70}, dt, -8, 8);
        const std::string what = std::string(dtype_name(dt)) + " " + layout_name(l) + " dim " + std::to_string(dim);
        expect_close(ops::logsumexp(layout(x, l), dim, false), ops::logsumexp(layout(on_gpu(x), l), dim, false), "logsumexp " + what);
        expect_close(ops::logsumexp(layout(x, l), dim, true), ops::logsumexp(layout(on_gpu(x), l), dim, true), "logsumexp keepdim " + what);
        expect_close(ops::softmax(layout(x, l), dim), ops::softmax(layout(on_gpu(x), l), dim), "softmax " + what);
        expect_close(ops::log_softmax(layout(x, l), dim), ops::log_softmax(layout(on_gpu(x), l), dim), "log_softmax " + what);
      }
  const Tensor masked = from_vector<float>({-INFINITY, -INFINITY, 1, 2}, {2, 2});
  expect_close(ops::softmax(masked, 1), ops::softmax(on_gpu(masked), 1), "softmax of a fully masked row");
  expect_close(ops::logsumexp(masked, 1), ops::logsumexp(on_gpu(masked), 1), "logsumexp of -inf");
  const Tensor wide = rnd({2, 5000}, DType::Float32, -20, 20);
  expect_close(ops::softmax(wide, 1), ops::softmax(on_gpu(wide), 1), "softmax 5000 wide");
  for (DType dt : kAll) {
    const Tensor x = rnd({100}, dt);
    CHECK(ops::all_finite(on_gpu(x)) == ops::all_finite(x));
  }
  Tensor bad = rnd({1000}, DType::Complex64);
  ops::fill_(ops::narrow(bad, 0, 777, 1), c128(0, NAN));
  CHECK_FALSE(ops::all_finite(on_gpu(bad)));
}

// ---------------------------------------------------------------- matmul

TEST_CASE("cuda: matmul on cuBLAS, every dtype, transposes and conjugates as flags, batches broadcast") {
  const MatOp all[] = {MatOp::None, MatOp::Transpose, MatOp::ConjTranspose};
  for (DType dt : kInexact)
    for (MatOp oa : all)
      for (MatOp ob : all)
        for (int trial = 0; trial < 3; ++trial) {
          const int64_t m = 1 + rng.next_u64() % 9, n = 1 + rng.next_u64() % 9, k = 1 + rng.next_u64() % 17;
          Dims ba = trial == 0 ? Dims{} : trial == 1 ? Dims{3} : Dims{2, 1}, bb = trial == 0 ? Dims{} : trial == 1 ? Dims{3} : Dims{1, 4};
          Dims sa = ba, sb = bb;
          sa.push_back(oa == MatOp::None ? m : k);
          sa.push_back(oa == MatOp::None ? k : m);
          sb.push_back(ob == MatOp::None ? k : n);
          sb.push_back(ob == MatOp::None ? n : k);
          const Tensor a = rnd(sa, dt), b = rnd(sb, dt);
          for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced}) {
            const Tensor ref = ops::matmul(layout(a, l), layout(b, l), oa, ob);
            const Tensor got = ops::matmul(layout(on_gpu(a), l), layout(on_gpu(b), l), oa, ob);
            const double tol = real_dtype(dt) == DType::Float64 ? 1e-10 : 1e-4;
            expect_close(ref, got, tol, tol, std::string("matmul ") + dtype_name(dt) + " " + str(sa) + " x " + str(sb) + " " + layout_name(l));
          }
        }
  // Permuted [B, N, H, d] operands (attention's layout: batch dims no single stride describes).
  const Tensor q = rnd({2, 5, 3, 4}, DType::Float32), kk = rnd({2, 5, 3, 4}, DType::Float32);
  expect_close(ops::matmul(ops::permute(q, {0, 2, 1, 3}), ops::permute(kk, {0, 2, 1, 3}), MatOp::None, MatOp::Transpose),
               ops::matmul(ops::permute(on_gpu(q), {0, 2, 1, 3}), ops::permute(on_gpu(kk), {0, 2, 1, 3}), MatOp::None, MatOp::Transpose), 1e-5, 1e-4,
               "attention scores layout");
  // Vectors, a folded batch, an empty inner dim.
  const Tensor v = rnd({6}, DType::Complex64), w = rnd({4, 6, 6}, DType::Complex64);
  expect_close(ops::matmul(w, v), ops::matmul(on_gpu(w), on_gpu(v)), 1e-5, 1e-4, "matrix x vector");
  expect_close(ops::matmul(v, w), ops::matmul(on_gpu(v), on_gpu(w)), 1e-5, 1e-4, "vector x matrix");
  const Tensor e1 = rnd({3, 0}, DType::Float32), e2 = rnd({0, 2}, DType::Float32);
  expect_close(ops::matmul(e1, e2), ops::matmul(on_gpu(e1), on_gpu(e2)), "k = 0");
  CHECK_THROWS_WITH_AS(ops::matmul(on_gpu(rnd({2, 3}, DType::Float32)), on_gpu(rnd({2, 3}, DType::Float32))), doctest::Contains("inner dimensions"), Error);
}

// cuBLAS's ints: a batch count, size or leading dimension past INT32_MAX runs in
// pieces that fit (the limit lowered so that small products take those paths).
TEST_CASE("cuda: matmul past cuBLAS's 32-bit ints runs in pieces (batch runs, split sizes, copied operands)") {
  const Tensor a = rnd({7, 5, 6}, DType::Float32), b = rnd({7, 6, 3}, DType::Float32);
  const Tensor q = rnd({2, 5, 3, 4}, DType::Float64), kk = rnd({2, 5, 3, 4}, DType::Float64);
  const Tensor wide = rnd({5, 20}, DType::Complex64).narrow(1, 2, 6), w = rnd({6, 3}, DType::Complex64);
  const Tensor big_a = rnd({9, 11}, DType::Float32).to(DType::BFloat16), big_b = rnd({11, 10}, DType::Float32).to(DType::BFloat16);
  const Tensor want[] = {ops::matmul(a, b), ops::matmul(ops::permute(q, {0, 2, 1, 3}), ops::permute(kk, {0, 2, 1, 3}), MatOp::None, MatOp::Transpose),
                         ops::matmul(wide, w), ops::matmul(big_a, big_b, MatOp::None, MatOp::None, DType::Float32)};
  set_blas_int_limit_for_testing(4);
  const Tensor got[] = {ops::matmul(on_gpu(a), on_gpu(b)),
                        ops::matmul(ops::permute(on_gpu(q), {0, 2, 1, 3}), ops::permute(on_gpu(kk), {0, 2, 1, 3}), MatOp::None, MatOp::Transpose),
                        ops::matmul(on_gpu(wide), on_gpu(w)), ops::matmul(on_gpu(big_a), on_gpu(big_b), MatOp::None, MatOp::None, DType::Float32)};
  set_blas_int_limit_for_testing(0);
  expect_close(want[0], got[0], 1e-5, 1e-4, "a strided batch of 7 in runs of 4");
  expect_close(want[1], got[1], 1e-10, 1e-10, "a pointer batch of 6 in runs of 4, d 4");
  expect_close(want[2], got[2], 1e-5, 1e-4, "a row stride of 20 copied");
  expect_close(want[3], got[3], 1e-2, 1e-2, "bfloat16 m, n, k split");
}

// bfloat16 operands on cuBLAS's mixed-precision GEMMs (cublasGemmEx and its
// batched forms, float32 arithmetic): a float32 result within float32's
// rounding of the CPU's, a bfloat16 one within one bfloat16 step.
TEST_CASE("cuda: bfloat16 matmul, float32 or bfloat16 results, in every GEMM form, as on the CPU") {
  const MatOp flags[] = {MatOp::None, MatOp::Transpose};
  for (DType out : {DType::Float32, DType::BFloat16})
    for (MatOp oa : flags)
      for (MatOp ob : flags)
        for (int trial = 0; trial < 3; ++trial) {  // one product, a strided batch, a broadcast batch
          const int64_t m = 1 + rng.next_u64() % 9, n = 1 + rng.next_u64() % 9, k = 1 + rng.next_u64() % 40;
          Dims sa = trial == 0 ? Dims{} : trial == 1 ? Dims{3} : Dims{2, 1}, sb = trial == 0 ? Dims{} : trial == 1 ? Dims{3} : Dims{1, 4};
          sa.push_back(oa == MatOp::None ? m : k);
          sa.push_back(oa == MatOp::None ? k : m);
          sb.push_back(ob == MatOp::None ? k : n);
          sb.push_back(ob == MatOp::None ? n : k);
          const Tensor a = ops::to(rnd(sa, DType::Float32), DType::BFloat16), b = ops::to(rnd(sb, DType::Float32), DType::BFloat16);
          for (Layout l : {Layout::Contiguous, Layout::Transposed}) {
            const Tensor ref = ops::matmul(layout(a, l), layout(b, l), oa, ob, out);
            const Tensor got = ops::matmul(layout(on_gpu(a), l), layout(on_gpu(b), l), oa, ob, out);
            REQUIRE(got.dtype() == out);
            const double tol = out == DType::Float32 ? 1e-5 : 8e-3;
            expect_close(ops::to(ref, DType::Float32), ops::to(got, DType::Float32), tol, tol,
                         std::string("bf16 matmul to ") + dtype_name(out) + " " + str(sa) + " x " + str(sb) + " " + layout_name(l));
          }
        }
  // Attention's permuted [B, N, H, d] layout: the pointer-array form.
  const Tensor q = ops::to(rnd({2, 5, 3, 8}, DType::Float32), DType::BFloat16), kk = ops::to(rnd({2, 5, 3, 8}, DType::Float32), DType::BFloat16);
  const auto scores = [](const Tensor& x, const Tensor& y) {
    return ops::matmul(ops::permute(x, {0, 2, 1, 3}), ops::permute(y, {0, 2, 1, 3}), MatOp::None, MatOp::Transpose, DType::Float32);
  };
  expect_close(scores(q, kk), scores(on_gpu(q), on_gpu(kk)), 1e-5, 1e-5, "bf16 scores, permuted operands");
}

// The mixed-precision policy (nn/precision.h) on the GPU: the same operands
// rounded to bfloat16 by the same conversion, so the step agrees with the CPU's
// bf16 step to float32's accumulation order, far closer than either is to float32.
TEST_CASE("cuda: a bf16 mixed-precision training step of the model matches the CPU's") {
  ModelConfig cfg;
  cfg.position = Position::ComplexFormer;
  cfg.d_model = 64;
  cfg.n_layers = 2;
  cfg.n_heads = 4;
  cfg.d_ff = 96;
  cfg.max_seq_len = 32;
  CausalLM cpu_model(cfg, 11), gpu_model(cfg, 11), f32_model(cfg, 11);
  gpu_model.to(G);
  const Tensor tokens = ops::to(rnd({4, 32}, DType::Float64, 0, 255.99), DType::Int64);
  const Tensor targets = ops::to(rnd({4, 32}, DType::Float64, 0, 255.99), DType::Int64);
  const Tensor lf = f32_model.loss(tokens, targets);
  lf.backward();
  const nn::PrecisionScope bf16(nn::Precision::BFloat16);
  const Tensor lc = cpu_model.loss(tokens, targets), lg = gpu_model.loss(tokens, targets);
  expect_close(lc.detach(), lg.detach(), 1e-5, 1e-5, "bf16 loss, GPU against CPU");
  const double c = lc.item<double>(), f = lf.item<double>();
  CHECK(c != f);  // bfloat16 products ran
  CHECK(std::abs(c - f) / f < 1e-2);
  lc.backward();
  lg.backward();
  // Each gradient against the CPU's bf16 one, as a whole (relative 2-norm of the
  // difference): where the two accumulation orders round an activation to the
  // other side of a bfloat16 step, single elements differ by far more.
  const auto pc = cpu_model.named_parameters(), pg = gpu_model.named_parameters(), pf = f32_model.named_parameters();
  const auto norm_of = [](const Tensor& t) { return ops::norm(ops::to(t, DType::Float64)).item<double>(); };
  const auto relative = [&](const Tensor& ref, const Tensor& got) { return norm_of(ops::binary(ops::Binary::Sub, ref, got)) / norm_of(ref); };
  double worst = 0, bf16_vs_f32 = 0;
  for (size_t i = 0; i < pc.size(); ++i) {
    const Tensor gc = pc[i].second.grad(), gg = pg[i].second.grad();
    REQUIRE(gg.defined());
    CHECK(gg.dtype() == DType::Float32);  // the weights and their gradients stay float32
    ++checks_done;
    const double r = relative(gc, to_cpu(gg));
    CHECK_MESSAGE(r < 5e-3, "bf16 grad of ", pc[i].first, ": relative difference ", r);
    worst = std::max(worst, r);
    bf16_vs_f32 = std::max(bf16_vs_f32, relative(pf[i].second.grad(), gc));
  }
  MESSAGE("bf16 gradients, GPU against CPU: worst relative 2-norm difference ", worst, " (bf16 against float32 on the CPU: ", bf16_vs_f32, ")");
}

// ---------------------------------------------------------------- indexing
// ---------------------------------------------------------------- indexing

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// A kernel checks the indices (no op reads them on the host): the first bad
// one is raised at the next synchronisation, with the CPU's message, once.
TEST_CASE("cuda: a bad index is raised at the next synchronisation with the CPU's message") {
  // Fixed values: the shared generator's sequence stays that of the cases after this one.
  const Tensor bad = from_vector<int64_t>({0, 5, -1}), x = ones({3, 4}), src = ones({3, 4});
  const Tensor idx2 = from_vector<int64_t>({0, 1, 2, 9, 3, 4}, {3, 2}), src2 = ones({3, 2});
  const Tensor targets = from_vector<int64_t>({0, -100, 4, 7}), logits = ones({4, 4});
  const std::vector<std::pair<const char*, std::function<Tensor(bool)>>> cases = {
      {"index_select", [&](bool g) { return ops::index_select(g ? on_gpu(x) : x, 0, g ? on_gpu(bad) : bad); }},
      {"index_add", [&](bool g) { return ops::index_add(g ? on_gpu(x) : x, 0, g ? on_gpu(bad) : bad, g ? on_gpu(src) : src); }},
      {"gather", [&](bool g) { return ops::gather(g ? on_gpu(x) : x, 1, g ? on_gpu(idx2) : idx2); }},
      {"scatter_add", [&](bool g) { return ops::scatter_add({3, 4}, 1, g ? on_gpu(idx2) : idx2, g ? on_gpu(src2) : src2); }},
      {"cross_entropy", [&](bool g) { return ops::cross_entropy(g ? on_gpu(logits) : logits, g ? on_gpu(targets) : targets, -100, true).loss; }},
  };
  for (const auto& entry : cases) {  // not a structured binding: clang 14 cannot capture one in a lambda
    const char* name = entry.first;
    const auto& op = entry.second;
    const std::string cpu = error_of([&] { op(false); });
    REQUIRE_MESSAGE(cpu.find(name) != std::string::npos, cpu);
    Tensor deferred;
    CHECK_NOTHROW(deferred = op(true));  // nothing waits for the device here
    CHECK_MESSAGE(error_of([&] { deferred.to_vector<float>(); }) == cpu, name);
    CHECK_NOTHROW(on_gpu(ones({2})).to_vector<float>());  // raised once
  }
  const Tensor deferred = ops::index_select(on_gpu(x), 0, on_gpu(bad));
  CHECK_THROWS_WITH_AS(gpu::synchronize(), doctest::Contains("index 5 out of range"), Error);
}

TEST_CASE("cuda: index_select, index_add, gather and scatter_add (ordered sums, repeated indices)") {
  for (DType dt : kAll)
    for (int64_t dim : {0, 1, 2}) {
      const Tensor x = rnd({5, 6, 4}, dt);
      const int64_t n = x.size(dim);
      const Tensor use = from_vector<int64_t>({0, n - 1, 0, 1 % n, n - 1});
      expect_close(ops::index_select(layout(x, Layout::Transposed), dim, use), ops::index_select(layout(on_gpu(x), Layout::Transposed), dim, on_gpu(use)),
                   0, 0, std::string("index_select ") + dtype_name(dt));
      Dims sshape = x.shape();
      sshape[dim] = use.numel();
      const Tensor src = rnd(sshape, dt);
      expect_close(ops::index_add(x, dim, use, src), ops::index_add(on_gpu(x), dim, on_gpu(use), on_gpu(src)), std::string("index_add ") + dtype_name(dt));
    }
  const Tensor seven = rnd({7}, DType::Float32);
  expect_close(ops::index_select(seven, 0, scalar_tensor(3.0, DType::Int64)), ops::index_select(on_gpu(seven), 0, on_gpu(scalar_tensor(3.0, DType::Int64))),
               0, 0, "0-d index");
  for (DType dt : kInexact)
    for (int64_t dim : {0, 1}) {
      const Tensor x = rnd({4, 5}, dt);
      const Dims is = {3, 4};
      const Tensor index = ops::to(rnd(is, DType::Float64, 0, static_cast<double>(x.size(dim)) - 0.01), DType::Int64);
      expect_close(ops::gather(x, dim, index), ops::gather(on_gpu(x), dim, on_gpu(index)), 0, 0, std::string("gather ") + dtype_name(dt));
      const Tensor src = rnd(is, dt);
      expect_close(ops::scatter_add({4, 5}, dim, index, src), ops::scatter_add({4, 5}, dim, on_gpu(index), on_gpu(src)),
                   std::string("scatter_add ") + dtype_name(dt));
    }
  // The embedding backward's pattern: many rows into few.
  const Tensor ids = ops::to(rnd({2048}, DType::Float64, 0, 255.99), DType::Int64);
  const Tensor g = rnd({2048, 64}, DType::Float32);
  expect_close(ops::index_add(zeros({256, 64}), 0, ids, g), ops::index_add(zeros({256, 64}, DType::Float32, G), 0, on_gpu(ids), on_gpu(g)), 1e-5, 1e-5,
               "embedding backward");
}

// ---------------------------------------------------------------- random

TEST_CASE("cuda: uniform and normal draws on the GPU reproduce the CPU's Philox stream") {
  for (DType dt : kInexact) {
    Generator g1(77, 5), g2(77, 5);
    const Dims shape = {33, 7};
    const Tensor ref_u = uniform(shape, -1.5, 2.5, dt, &g1);
    const Tensor got_u = uniform(shape, -1.5, 2.5, dt, &g2, G);
    REQUIRE(got_u.device() == G);
    expect_close(ref_u, got_u, 0, 0, std::string("uniform, bit for bit, ") + dtype_name(dt));
    const Tensor ref_n = normal(shape, 0.5, 2.0, dt, &g1);
    const Tensor got_n = normal(shape, 0.5, 2.0, dt, &g2, G);
    expect_close(ref_n, got_n, 1e-12, real_dtype(dt) == DType::Float32 ? 2.5e-7 : 1e-14, std::string("normal ") + dtype_name(dt));
  }
}

// ---------------------------------------------------------------- fused ops

// One cross-backend case per entry of tensor/fused_ops.h's list:
// CrossBackend<Args>::run() runs that op's front-end on the CPU and on CUDA
// and compares. The list makes the TEST_CASEs (after the cases below), so a
// fused op without a specialisation here does not compile. A forward's case
// also holds the gradcheck of its differentiable op (check_gradients), so that
// a new fused op's tests are one place: CI runs this suite on every machine,
// on the simulator where no GPU answers.
template <class Args>
struct CrossBackend;

namespace {
// The gradchecks' inputs, from a stream of their own: the cross-backend cases
// draw the values they drew before the gradchecks joined them.
Generator gradcheck_rng(20251202);
Tensor draw(const Dims& shape, DType dt, double lo = -2.0, double hi = 2.0) { return uniform(shape, lo, hi, dt, &gradcheck_rng); }

// gradcheck of f (float64 / complex128 inputs, drawn on the CPU) with its
// inputs moved to the CPU and to CUDA (differentiably: gradcheck perturbs
// leaves on the CPU): the derivative of each backend's kernels against finite
// differences.
void check_gradients(const std::string& what, const TensorFunction& f, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : inputs) leaves.push_back(t.detach().requires_grad_());
  for (const Device device : {kCPU, G}) {
    const TensorFunction on_device = [&](const std::vector<Tensor>& in) {
      std::vector<Tensor> moved;
      for (const Tensor& t : in) moved.push_back(to(t, device));
      return to(f(moved), kCPU);
    };
    const GradcheckResult r = gradcheck(on_device, leaves);
    ++checks_done;
    CHECK_MESSAGE(r.ok, what, " gradcheck on ", device, ": ", r.message);
  }
}
}  // namespace

template <>
struct CrossBackend<ops::SwigluArgs> {
  static void run() {
    for (DType dt : {DType::Float32, DType::Float64})
      for (const Dims& shape : {Dims{3, 7}, Dims{2048, 352}}) {
        const Tensor gate = rnd(shape, dt, -12, 12), up = rnd(shape, dt);
        expect_close(ops::swiglu(gate, up), ops::swiglu(on_gpu(gate), on_gpu(up)), "swiglu " + str(shape));
      }
    check_gradients("swiglu", [](const std::vector<Tensor>& in) { return swiglu(in[0], in[1]); },
                    {draw({2, 3}, DType::Float64, -4, 4), draw({2, 3}, DType::Float64)});
  }
};

template <>
struct CrossBackend<ops::SwigluBackwardArgs> {
  static void run() {
    for (DType dt : {DType::Float32, DType::Float64})
      for (const Dims& shape : {Dims{3, 7}, Dims{2048, 352}}) {
        const Tensor gate = rnd(shape, dt, -12, 12), up = rnd(shape, dt), g = rnd(shape, dt);
        const auto rb = ops::swiglu_backward(g, gate, up);
        const auto gb = ops::swiglu_backward(on_gpu(g), on_gpu(gate), on_gpu(up));
        expect_close(rb.dgate, gb.dgate, "swiglu dgate " + str(shape));
        expect_close(rb.dup, gb.dup, "swiglu dup " + str(shape));
      }
  }
};

namespace {
const Dims kRmsNormShapes[] = {Dims{3, 7}, Dims{2, 5, 128}, Dims{4, 1000}, Dims{2048, 128}};
}  // namespace

template <>
struct CrossBackend<ops::RmsNormArgs> {  // RMSNorm
  static void run() {
    for (DType dt : {DType::Float32, DType::Float64})
      for (const Dims& shape : kRmsNormShapes) {
        const Tensor x = rnd(shape, dt), w = rnd({shape.back()}, dt);
        const auto ref = ops::rms_norm(layout(x, Layout::Sliced), w, 1e-5);
        const auto got = ops::rms_norm(layout(on_gpu(x), Layout::Sliced), on_gpu(w), 1e-5);
        expect_close(ref.y, got.y, "rms_norm y " + str(shape));
        expect_close(ref.inv_rms, got.inv_rms, "rms_norm inv_rms " + str(shape));
      }
    check_gradients("rms_norm", [](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1], 1e-5); },
                    {draw({2, 3}, DType::Float64), draw({3}, DType::Float64)});
  }
};

template <>
struct CrossBackend<ops::RmsNormBackwardArgs> {  // RMSNorm's backward
  static void run() {
    for (DType dt : {DType::Float32, DType::Float64})
      for (const Dims& shape : kRmsNormShapes) {
        const Tensor x = rnd(shape, dt), w = rnd({shape.back()}, dt), g = rnd(shape, dt);
        const Tensor inv_rms = ops::rms_norm(x, w, 1e-5).inv_rms;
        const auto rb = ops::rms_norm_backward(g, x, w, inv_rms);
        const auto gb = ops::rms_norm_backward(on_gpu(g), on_gpu(x), on_gpu(w), on_gpu(inv_rms));
        expect_close(rb.dx, gb.dx, "rms_norm dx " + str(shape));
        expect_close(rb.dweight, gb.dweight, 1e-4, 1e-5, "rms_norm dweight " + str(shape));
      }
  }
};

namespace {
// logits [37, 300] and targets with rows 4..6 ignored (-100).
struct CrossEntropyCase {
  Tensor logits, targets;
  explicit CrossEntropyCase(DType dt) : logits(rnd({37, 300}, dt, -6, 6)), targets(ops::to(rnd({37}, DType::Float64, 0, 300 - 0.01), DType::Int64)) {
    ops::fill_(ops::narrow(targets, 0, 4, 3), -100.0);
  }
};
}  // namespace

template <>
struct CrossBackend<ops::CrossEntropyArgs> {
  static void run() {
    for (DType dt : {DType::Float32, DType::Float64})
      for (bool mean : {true, false}) {
        const CrossEntropyCase c(dt);
        const auto ref = ops::cross_entropy(c.logits, c.targets, -100, mean);
        const auto got = ops::cross_entropy(on_gpu(c.logits), on_gpu(c.targets), -100, mean);
        CHECK(ref.count.item<double>() == got.count.item<double>());
        expect_close(ref.loss, got.loss, std::string("cross_entropy loss ") + dtype_name(dt));
        expect_close(ref.logsumexp, got.logsumexp, std::string("cross_entropy lse ") + dtype_name(dt));
      }
    CHECK_THROWS_WITH_AS(ops::cross_entropy(on_gpu(rnd({2, 3}, DType::Float32)), on_gpu(from_vector<int64_t>({0, 3})), -100, true).loss.item<double>(),
                         doctest::Contains("outside [0, 3)"), Error);
    const Tensor targets = from_vector<int64_t>({0, 2, -100, 1}), targets_gpu = on_gpu(targets);  // one row ignored
    check_gradients("cross_entropy", [&](const std::vector<Tensor>& in) {
      return cross_entropy(in[0], in[0].device() == G ? targets_gpu : targets);
    }, {draw({4, 3}, DType::Float64)});
  }
};

template <>
struct CrossBackend<ops::CrossEntropyBackwardArgs> {
  static void run() {
    for (DType dt : {DType::Float32, DType::Float64})
      for (bool mean : {true, false}) {
        const CrossEntropyCase c(dt);
        const auto ref = ops::cross_entropy(c.logits, c.targets, -100, mean);
        const Tensor grad = scalar_tensor(0.7, DType::Float64), count = mean ? ref.count : Tensor();
        expect_close(ops::cross_entropy_backward(grad, c.logits, c.targets, ref.logsumexp, -100, count),
                     ops::cross_entropy_backward(on_gpu(grad), on_gpu(c.logits), on_gpu(c.targets), on_gpu(ref.logsumexp), -100,
                                                 mean ? on_gpu(count) : Tensor()),
                     std::string("cross_entropy backward ") + dtype_name(dt));
      }
  }
};

namespace {
// The last: a table row of complex128 past the 48 KiB of shared memory cuda/rotation.cu's rotate_kernel caches it in.
const Dims kRotaryShapes[] = {Dims{2, 5, 3, 4}, Dims{1, 17, 2, 8}, Dims{16, 128, 4, 16}, Dims{1, 2, 1, 3100}};
}  // namespace

template <>
struct CrossBackend<ops::RotateArgs> {  // rotary tables (RoPE / XPos)
  static void run() {
    for (DType dt : {DType::Complex64, DType::Complex128})
      for (const Dims& shape : kRotaryShapes) {
        const Tensor z = rnd(shape, dt);
        for (double xpos : {0.0, 512.0})
          for (bool conj : {false, true}) {
            const Tensor table = ops::rotary_table(shape[1], shape[3], 3, 10000.0, xpos, 1, dt);
            expect_close(ops::rotate(layout(z, Layout::Transposed), table, conj),
                         ops::rotate(layout(on_gpu(z), Layout::Transposed), on_gpu(table), conj),
                         std::string("rotate ") + dtype_name(dt) + " " + str(shape));
          }
      }
    const Tensor table = ops::rotary_table(3, 2, 3, 10000.0, 512.0, 1, DType::Complex128), table_gpu = on_gpu(table);
    check_gradients("rotate", [&](const std::vector<Tensor>& in) { return rotate(in[0], in[0].device() == G ? table_gpu : table); },
                    {draw({1, 3, 2, 2}, DType::Complex128)});
  }
};

namespace {
// Calls check(z, CPU parameters, GPU parameters, what) over the ComplexFormer
// rotation's dtypes, shapes, with and without a phase bias, and offsets past
// 2048 too (the position term formed as on the CPU).
template <class F>
void for_each_cmha_case(F&& check) {
  for (DType dt : {DType::Complex64, DType::Complex128})
    for (const Dims& shape : kRotaryShapes) {
      const Tensor z = rnd(shape, dt);
      const Dims hp = {shape[2], shape[3]};
      const DType rt = real_dtype(dt);
      const Tensor delta = rnd(hp, rt, 0.5, 1.5), bias = rnd(hp, rt, -0.5, 0.5), beta = rnd({shape[2]}, rt, 0.5, 1.5);
      for (bool with_bias : {true, false})
        for (int64_t offset : {0, 11, 3000}) {
          const ops::CmhaParams pc{delta, with_bias ? bias : Tensor(), beta, offset, 10000.0};
          const ops::CmhaParams pg{on_gpu(delta), with_bias ? on_gpu(bias) : Tensor(), on_gpu(beta), offset, 10000.0};
          check(z, pc, pg, std::string(dtype_name(dt)) + " " + str(shape) + (with_bias ? " bias" : "") + " offset " + std::to_string(offset));
        }
    }
}
// float32: past a few thousand positions the phase theta is thousands of radians, and its
// last bit (4.9e-4 rad between 4096 and 8192) may round apart on the two backends when
// their atan2 differ by an ulp (phi enters theta as delta phi): one ulp of the largest phase
// (beta < 1.5, |delta phi + phase_bias| < 4) is allowed.
double cmha_tol(DType dt, int64_t last_position) {
  if (real_dtype(dt) != DType::Float32) return 1e-9;
  return std::max(2e-4, (1.5 * static_cast<double>(last_position) + 4.0) * 0x1p-23);
}
}  // namespace

template <>
struct CrossBackend<ops::CmhaRotateArgs> {  // the ComplexFormer rotation
  static void run() {
    for_each_cmha_case([](const Tensor& z, const ops::CmhaParams& pc, const ops::CmhaParams& pg, const std::string& what) {
      const double loose = cmha_tol(z.dtype(), pc.offset + z.size(1));
      expect_close(ops::cmha_rotate(z, pc), ops::cmha_rotate(on_gpu(z), pg), loose, loose, "cmha_rotate " + what);
    });
    check_gradients("cmha_rotate", [](const std::vector<Tensor>& in) { return cmha_rotate(in[0], in[1], in[2], in[3], 11, 10000.0); },
                    {draw({1, 3, 2, 2}, DType::Complex128), draw({2, 2}, DType::Float64, 0.5, 1.5), draw({2, 2}, DType::Float64),
                     draw({2}, DType::Float64, 0.5, 1.5)});
  }
};

template <>
struct CrossBackend<ops::CmhaRotateBackwardArgs> {  // the ComplexFormer rotation's backward
  static void run() {
    for_each_cmha_case([](const Tensor& z, const ops::CmhaParams& pc, const ops::CmhaParams& pg, const std::string& what) {
      const double loose = cmha_tol(z.dtype(), pc.offset + z.size(1)), sum_tol = real_dtype(z.dtype()) == DType::Float32 ? 2e-3 : 1e-8;
      const Tensor g = rnd(z.shape(), z.dtype());
      const auto rb = ops::cmha_rotate_backward(g, z, pc), gb = ops::cmha_rotate_backward(on_gpu(g), on_gpu(z), pg);
      expect_close(rb.dz, gb.dz, loose, loose, "cmha dz " + what);
      expect_close(rb.ddelta, gb.ddelta, sum_tol, sum_tol, "cmha ddelta " + what);
      expect_close(rb.dbeta, gb.dbeta, sum_tol, sum_tol, "cmha dbeta " + what);
      if (pc.phase_bias.defined()) expect_close(rb.dphase_bias, gb.dphase_bias, sum_tol, sum_tol, "cmha dphase_bias " + what);
      else CHECK_FALSE(gb.dphase_bias.defined());
    });
    // Finite at the origin, as the spec's eps-regularised derivative demands.
    const Tensor zero = zeros({1, 2, 1, 2}, DType::Complex64);
    const ops::CmhaParams p0{on_gpu(ones({1, 2})), on_gpu(zeros({1, 2})), on_gpu(ones({1})), 0, 10000.0};
    CHECK(ops::all_finite(ops::cmha_rotate_backward(on_gpu(ones({1, 2, 1, 2}, DType::Complex64)), on_gpu(zero), p0).dz));
  }
};

namespace {
// Calls check(z, CPU parameters, GPU parameters, what) over the polar
// rotation's kinds (pope: real z, softplus; complexformer-seed: real z, tanh
// angle, gain; carope: complex z), dtypes, shared and batched angles, and
// widths past the CPU kernel's chunk of 64.
template <class F>
void for_each_polar_case(F&& check) {
  struct Kind {
    bool complex_z;
    ops::PolarMagnitude magnitude;
    ops::PolarAngle angle_map;
    bool gain;
  };
  const Kind kinds[] = {{false, ops::PolarMagnitude::Softplus, ops::PolarAngle::Identity, false},
                        {false, ops::PolarMagnitude::Identity, ops::PolarAngle::Tanh, true},
                        {true, ops::PolarMagnitude::Identity, ops::PolarAngle::Identity, false},
                        {true, ops::PolarMagnitude::Identity, ops::PolarAngle::Tanh, true}};
  for (const Kind& kind : kinds)
    for (DType rt : {DType::Float32, DType::Float64})
      for (const Dims& shape : {Dims{2, 5, 3, 4}, Dims{3, 7, 2, 70}, Dims{1, 4, 2, 3}})
        for (bool shared : {true, false}) {
          const Tensor z = rnd(shape, kind.complex_z ? complex_dtype(rt) : rt, -6, 6);
          const Tensor angle = rnd({shared ? 1 : shape[0], shape[1], shape[2], shape[3]}, rt, -4, 4);
          const Tensor gain = kind.gain ? rnd({shape[2]}, rt, 0.2, 0.9) : Tensor();
          const ops::PolarParams pc{angle, gain, kind.magnitude, kind.angle_map};
          const ops::PolarParams pg{on_gpu(angle), kind.gain ? on_gpu(gain) : Tensor(), kind.magnitude, kind.angle_map};
          check(z, pc, pg,
                std::string(dtype_name(z.dtype())) + " " + str(shape) + (shared ? " shared" : " batched") +
                    (kind.magnitude == ops::PolarMagnitude::Softplus ? " softplus" : "") +
                    (kind.angle_map == ops::PolarAngle::Tanh ? " tanh" : "") + (kind.gain ? " gain" : ""));
        }
}
}  // namespace

template <>
struct CrossBackend<ops::PolarRotateArgs> {  // pope, carope and complexformer-seed's rotation
  static void run() {
    for_each_polar_case([](const Tensor& z, const ops::PolarParams& pc, const ops::PolarParams& pg, const std::string& what) {
      const Tensor cpu = ops::polar_rotate(z, pc);
      expect_close(cpu, ops::polar_rotate(on_gpu(z), pg), "polar_rotate " + what);
      // The CPU kernel against the composed reference, made of CUDA's elementwise ops.
      const double tol = real_dtype(z.dtype()) == DType::Float32 ? 1e-5 : 1e-12;
      expect_close(cpu, polar_rotate_reference(on_gpu(z), pg.angle, pg.gain, pg.magnitude, pg.angle_map), tol, tol,
                   "polar_rotate reference " + what);
    });
    // Broadcast angles ([N, 1, W]: pope's table, shared by heads) and a gain, through autograd.
    check_gradients("polar_rotate softplus",
                    [](const std::vector<Tensor>& in) { return polar_rotate(in[0], in[1], in[2], ops::PolarMagnitude::Softplus); },
                    {draw({2, 3, 2, 3}, DType::Float64), draw({3, 1, 3}, DType::Float64), draw({2}, DType::Float64, 0.5, 1.5)});
    check_gradients("polar_rotate tanh",
                    [](const std::vector<Tensor>& in) {
                      return polar_rotate(in[0], in[1], in[2], ops::PolarMagnitude::Identity, ops::PolarAngle::Tanh);
                    },
                    {draw({2, 3, 2, 3}, DType::Float64), draw({2, 3, 2, 3}, DType::Float64), draw({2}, DType::Float64, 0.5, 1.5)});
    check_gradients("polar_rotate complex", [](const std::vector<Tensor>& in) { return polar_rotate(in[0], in[1]); },
                    {draw({2, 3, 2, 2}, DType::Complex128), draw({1, 3, 2, 2}, DType::Float64)});
  }
};

template <>
struct CrossBackend<ops::PolarRotateBackwardArgs> {  // its backward
  static void run() {
    for_each_polar_case([](const Tensor& z, const ops::PolarParams& pc, const ops::PolarParams& pg, const std::string& what) {
      const Tensor g = rnd(z.shape(), complex_dtype(z.dtype()));
      const auto rb = ops::polar_rotate_backward(g, z, pc), gb = ops::polar_rotate_backward(on_gpu(g), on_gpu(z), pg);
      const double sum_tol = real_dtype(z.dtype()) == DType::Float32 ? 2e-4 : 1e-10;
      expect_close(rb.dz, gb.dz, "polar dz " + what);
      expect_close(rb.dangle, gb.dangle, sum_tol, sum_tol, "polar dangle " + what);
      if (pc.gain.defined()) expect_close(rb.dgain, gb.dgain, sum_tol, sum_tol, "polar dgain " + what);
      else CHECK_FALSE(gb.dgain.defined());
    });
  }
};

namespace {
// Calls check(scores, slopes or undefined, offset, what) over dtypes, shapes, offsets and ALiBi.
template <class F>
void for_each_attention_softmax_case(F&& check) {
  for (DType dt : {DType::Float32, DType::Float64})
    for (const Dims& shape : {Dims{2, 3, 5, 5}, Dims{1, 2, 3, 9}, Dims{2, 3, 37, 128}, Dims{1, 1, 2, 2000}})
      for (int64_t offset : {0, 4, -1})
        for (bool alibi : {false, true}) {
          const Tensor s = rnd(shape, dt, -5, 5);
          const Tensor slopes = alibi ? rnd({shape[1]}, dt, 0.01, 0.5) : Tensor();
          check(s, slopes, offset, std::string(dtype_name(dt)) + " " + str(shape) + " offset " + std::to_string(offset) + (alibi ? " alibi" : ""));
        }
}
}  // namespace

template <>
struct CrossBackend<ops::AttentionSoftmaxArgs> {  // causal masking, offsets and ALiBi slopes
  static void run() {
    for_each_attention_softmax_case([](const Tensor& s, const Tensor& slopes, int64_t offset, const std::string& what) {
      expect_close(ops::attention_softmax(s, 0.3, offset, slopes),
                   ops::attention_softmax(on_gpu(s), 0.3, offset, slopes.defined() ? on_gpu(slopes) : Tensor()), "attention_softmax " + what);
    });
    const Tensor slopes = draw({2}, DType::Float64, 0.01, 0.5), slopes_gpu = on_gpu(slopes);  // constants, as in the model
    check_gradients("attention_softmax", [&](const std::vector<Tensor>& in) {
      return attention_softmax(in[0], 0.3, 1, in[0].device() == G ? slopes_gpu : slopes);
    }, {draw({1, 2, 3, 4}, DType::Float64)});
  }
};

template <>
struct CrossBackend<ops::AttentionSoftmaxBackwardArgs> {
  static void run() {
    for_each_attention_softmax_case([](const Tensor& s, const Tensor& slopes, int64_t offset, const std::string& what) {
      const Tensor probs = ops::attention_softmax(s, 0.3, offset, slopes), g = rnd(s.shape(), s.dtype());
      expect_close(ops::attention_softmax_backward(g, probs, 0.3), ops::attention_softmax_backward(on_gpu(g), on_gpu(probs), 0.3),
                   "attention_softmax_backward " + what);
    });
  }
};

// ---------------------------------------------------------------- fused causal attention

namespace {

// ref and got within atol + rtol |ref|, the atol being `tol` times the tensor's largest
// magnitude (at least 1): values that are zero up to rounding (dq and dk with a single key)
// are judged at the scale of the tensor, not against 0.
void expect_close_at_scale(const Tensor& ref, const Tensor& got, double tol, const std::string& what) {
  double big = 1.0;
  for (double x : ref.to_vector<double>()) big = std::max(big, std::abs(x));
  expect_close(ref, got, tol * big, tol, what);
}
double attention_tol(DType dt) { return dt == DType::Float32 ? 2e-5 : 1e-10; }
double attention_grad_tol(DType dt) { return dt == DType::Float32 ? 5e-5 : 1e-9; }

// x [B, N, H, d] as rows [start, start + N) of a longer [B, cap, H, d] buffer (the KV cache's
// layout: batch stride cap H d).
Tensor in_cache(const Tensor& x, int64_t start, int64_t cap) {
  Dims big = x.shape();
  big[1] = cap;
  const Tensor view = ops::narrow(zeros(big, x.dtype(), x.device()), 1, start, x.size(1));
  ops::copy_(view, x);
  return view;
}
// x [B, N, H, d] as heads [H, 2H) of a [B, N, 3H, d] buffer (a fused QKV projection's layout:
// row stride 3 H d, heads still packed).
Tensor in_qkv(const Tensor& x) {
  Dims big = x.shape();
  big[2] *= 3;
  const Tensor view = ops::narrow(zeros(big, x.dtype(), x.device()), 2, x.size(2), x.size(2));
  ops::copy_(view, x);
  return view;
}

struct AttentionCase {
  int64_t b, nq, h, d, offset;  // k and v hold offset + nq keys
  bool slopes;
  bool strided;  // on the GPU: q with row stride 3 H d, k and v narrowed out of a longer cache
};
std::string describe(const AttentionCase& c, DType dt) {
  std::ostringstream os;
  os << dtype_name(dt) << " B " << c.b << " Nq " << c.nq << " H " << c.h << " d " << c.d << " offset " << c.offset
     << (c.slopes ? " alibi" : "") << (c.strided ? " strided" : "");
  return os.str();
}

}  // namespace

namespace {
// Tiles are 32 to 128 rows: lengths that are not multiples, a single row, several tiles;
// head widths 16/32/64/128, 24 (padded to 32) and 160 (past the tiled kernels: the
// one-row-per-block fallback); KV-cache chunks (offset > 0, Nk = offset + Nq).
const AttentionCase kAttentionCases[] = {
    {2, 1, 2, 16, 0, false, false},   {2, 1, 2, 64, 0, true, true},     {2, 37, 3, 32, 0, true, false},
    {1, 200, 2, 64, 0, false, true},  {1, 130, 1, 128, 0, true, false}, {2, 70, 2, 16, 0, true, true},
    {2, 24, 2, 64, 40, true, true},   {1, 9, 2, 128, 100, false, true}, {1, 50, 2, 32, 7, false, true},
    {2, 1, 2, 32, 90, true, true},    {1, 45, 2, 24, 0, true, false},   {2, 33, 1, 160, 5, true, true},
};

// One case's operands on both devices: on the GPU strided when the case says so.
// `inputs`: q, k and v rounded to bfloat16 (mixed precision; the rest stays dt).
struct AttentionOperands {
  Tensor q, k, v, g, qg, kg, vg;
  ops::AttentionParams pc, pg;
  AttentionOperands(const AttentionCase& c, DType dt, bool bf16_inputs = false) {
    const int64_t nk = c.offset + c.nq;
    q = rnd({c.b, c.nq, c.h, c.d}, dt), k = rnd({c.b, nk, c.h, c.d}, dt), v = rnd({c.b, nk, c.h, c.d}, dt);
    g = rnd({c.b, c.nq, c.h, c.d}, dt);
    if (bf16_inputs) q = ops::to(q, DType::BFloat16), k = ops::to(k, DType::BFloat16), v = ops::to(v, DType::BFloat16);
    const Tensor slopes = c.slopes ? rnd({c.h}, dt, 0.01, 0.5) : Tensor();
    pc = {1.0 / std::sqrt(static_cast<double>(c.d)), c.offset, slopes};
    pg = {pc.scale, c.offset, c.slopes ? on_gpu(slopes) : Tensor()};
    qg = c.strided ? in_qkv(on_gpu(q)) : on_gpu(q);
    kg = c.strided ? in_cache(on_gpu(k), 3, nk + 11) : on_gpu(k);
    vg = c.strided ? in_cache(on_gpu(v), 0, nk + 5) : on_gpu(v);
    if (c.strided) {  // the views reach the kernels as they are (packed heads, other strides)
      CHECK((c.nq == 1 || !qg.is_contiguous()));
      CHECK((c.b == 1 || (!kg.is_contiguous() && !vg.is_contiguous())));
    }
  }
};
}  // namespace

template <>
struct CrossBackend<ops::AttentionForwardArgs> {  // fused causal attention against the CPU kernel
  static void run() {
    for (DType dt : {DType::Float32, DType::Float64})
      for (const AttentionCase& c : kAttentionCases) {
        const std::string what = describe(c, dt);
        const AttentionOperands o(c, dt);
        const ops::AttentionResult ref = ops::causal_attention(o.q, o.k, o.v, o.pc);
        const ops::AttentionResult got = ops::causal_attention(o.qg, o.kg, o.vg, o.pg);
        CHECK(got.out.device() == G);
        expect_close_at_scale(ref.out, got.out, attention_tol(dt), "causal_attention out " + what);
        expect_close_at_scale(ref.logsumexp, got.logsumexp, attention_tol(dt), "causal_attention logsumexp " + what);
      }
    const Tensor slopes = draw({1}, DType::Float64, 0.01, 0.5), slopes_gpu = on_gpu(slopes);  // constants, as in the model
    check_gradients("causal_attention", [&](const std::vector<Tensor>& in) {
      return causal_attention(in[0], in[1], in[2], 0.5, 1, in[0].device() == G ? slopes_gpu : slopes);
    }, {draw({1, 2, 1, 2}, DType::Float64), draw({1, 3, 1, 2}, DType::Float64), draw({1, 3, 1, 2}, DType::Float64)});
  }
};

template <>
struct CrossBackend<ops::AttentionBackwardArgs> {  // fused causal attention's backward against the CPU kernel
  static void run() {
    for (DType dt : {DType::Float32, DType::Float64})
      for (const AttentionCase& c : kAttentionCases) {
        const std::string what = describe(c, dt);
        const AttentionOperands o(c, dt);
        const ops::AttentionResult ref = ops::causal_attention(o.q, o.k, o.v, o.pc);
        const ops::AttentionGrads rb = ops::causal_attention_backward(o.g, o.q, o.k, o.v, ref, o.pc);
        const ops::AttentionGrads gb =
            ops::causal_attention_backward(on_gpu(o.g), o.qg, o.kg, o.vg, {on_gpu(ref.out), on_gpu(ref.logsumexp)}, o.pg);
        expect_close_at_scale(rb.dq, gb.dq, attention_grad_tol(dt), "causal_attention dq " + what);
        expect_close_at_scale(rb.dk, gb.dk, attention_grad_tol(dt), "causal_attention dk " + what);
        expect_close_at_scale(rb.dv, gb.dv, attention_grad_tol(dt), "causal_attention dv " + what);
      }
  }
};

// bfloat16 q, k, v accumulate in float32 on both backends: the GPU's results
// are the CPU's to float32's summation order, and float32 themselves.
TEST_CASE("cuda: cumsum along every dim, both directions, against a running sum written out and the CPU, with its gradient") {
  for (DType dt : {DType::Float32, DType::Float64, DType::Complex64, DType::Complex128, DType::Int64})
    for (Layout l : kLayouts) {
      const Tensor x = rnd({3, 4, 5}, dt, -3, 3);
      for (int64_t dim : {0, 1, 2, -1})
        for (bool reverse : {false, true}) {
          const Tensor ref = ops::cumsum(layout(x, l), dim, reverse);
          expect_close(ref, ops::cumsum(layout(on_gpu(x), l), dim, reverse), 1e-5, 1e-5,
                       std::string("cumsum ") + dtype_name(dt) + " " + layout_name(l) + " dim " + std::to_string(dim) + (reverse ? " reverse" : ""));
          // The same sums as narrow-and-sum, element by element (the CPU's own reference).
          const int d = dim < 0 ? 3 + static_cast<int>(dim) : static_cast<int>(dim);
          const int64_t n = x.size(d);
          for (int64_t i = 0; i < n; ++i) {
            const int64_t from = reverse ? i : 0, count = reverse ? n - i : i + 1;
            const Tensor want = ops::sum(ops::narrow(x, d, from, count), {d});
            const Tensor got = ops::contiguous(ops::select(ref, d, i));
            const double diff = ops::amax(ops::unary(ops::Unary::Abs, ops::binary(ops::Binary::Sub, ops::to(got, DType::Complex128),
                                                                                ops::to(want, DType::Complex128))))
                                    .item<double>();
            CHECK_MESSAGE(diff <= 1e-5 * static_cast<double>(n) * 3, "cumsum ", dtype_name(dt), " dim ", dim, " index ", i);
          }
        }
    }
  const Tensor long_column = rnd({1, 70000, 3}, DType::Float32);
  expect_close(ops::cumsum(long_column, 1), ops::cumsum(on_gpu(long_column), 1), 1e-3, 1e-5, "cumsum of 70000 rows");
  check_gradients("cumsum", [](const std::vector<Tensor>& in) { return cumsum(in[0] * in[0], 1) * cumsum(in[0], 0, true); },
                  {draw({3, 4}, DType::Float64)});
  check_gradients("cumsum complex", [](const std::vector<Tensor>& in) { return cumsum(in[0], 1, true); }, {draw({2, 3}, DType::Complex128)});
}

TEST_CASE("cuda: fused causal attention with bfloat16 inputs matches the CPU's, forward and backward") {
  for (const AttentionCase& c : kAttentionCases) {
    const std::string what = describe(c, DType::Float32) + " bf16 inputs";
    const AttentionOperands o(c, DType::Float32, /*bf16_inputs=*/true);
    REQUIRE(o.kg.dtype() == DType::BFloat16);
    const ops::AttentionResult ref = ops::causal_attention(o.q, o.k, o.v, o.pc);
    const ops::AttentionResult got = ops::causal_attention(o.qg, o.kg, o.vg, o.pg);
    CHECK((got.out.dtype() == DType::Float32 && got.logsumexp.dtype() == DType::Float32));
    expect_close_at_scale(ref.out, got.out, attention_tol(DType::Float32), "causal_attention out " + what);
    expect_close_at_scale(ref.logsumexp, got.logsumexp, attention_tol(DType::Float32), "causal_attention logsumexp " + what);
    const ops::AttentionGrads rb = ops::causal_attention_backward(o.g, o.q, o.k, o.v, ref, o.pc);
    const ops::AttentionGrads gb = ops::causal_attention_backward(on_gpu(o.g), o.qg, o.kg, o.vg, got, o.pg);
    CHECK(gb.dk.dtype() == DType::Float32);
    expect_close_at_scale(rb.dq, gb.dq, attention_grad_tol(DType::Float32), "causal_attention dq " + what);
    expect_close_at_scale(rb.dk, gb.dk, attention_grad_tol(DType::Float32), "causal_attention dk " + what);
    expect_close_at_scale(rb.dv, gb.dv, attention_grad_tol(DType::Float32), "causal_attention dv " + what);
  }
}

TEST_CASE("cuda: fused causal attention is deterministic and leaves keys no query sees at zero gradient") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    // Nk = 90 > offset + Nq = 43: keys 43.. are seen by no query.
    const Tensor q = on_gpu(rnd({2, 40, 2, 64}, dt)), k = on_gpu(rnd({2, 90, 2, 64}, dt)), v = on_gpu(rnd({2, 90, 2, 64}, dt));
    const Tensor g = on_gpu(rnd({2, 40, 2, 64}, dt));
    const ops::AttentionParams p{0.125, 3, on_gpu(rnd({2}, dt, 0.01, 0.5))};
    const ops::AttentionResult f1 = ops::causal_attention(q, k, v, p), f2 = ops::causal_attention(q, k, v, p);
    const ops::AttentionGrads b1 = ops::causal_attention_backward(g, q, k, v, f1, p), b2 = ops::causal_attention_backward(g, q, k, v, f1, p);
    const std::string what = std::string(" twice, bit for bit, ") + dtype_name(dt);
    expect_close(f1.out, f2.out, 0, 0, "out" + what);
    expect_close(f1.logsumexp, f2.logsumexp, 0, 0, "logsumexp" + what);
    expect_close(b1.dq, b2.dq, 0, 0, "dq" + what);
    expect_close(b1.dk, b2.dk, 0, 0, "dk" + what);
    expect_close(b1.dv, b2.dv, 0, 0, "dv" + what);
    const Tensor unseen = zeros({2, 90 - 43, 2, 64}, dt, G);
    expect_close(unseen, ops::narrow(b1.dk, 1, 43, 90 - 43), 0, 0, "dk of unseen keys " + std::string(dtype_name(dt)));
    expect_close(unseen, ops::narrow(b1.dv, 1, 43, 90 - 43), 0, 0, "dv of unseen keys " + std::string(dtype_name(dt)));
  }
}

TEST_CASE("cuda: fused causal attention's fallback (head width over 128) past one 128-row chunk, against the CPU kernel") {
  // 130 queries and keys: the last queries walk two chunks of keys (forward, dQ) and the first
  // keys two chunks of queries (dK, dV), so each chunk's shared rows are rewritten by the next.
  const int64_t n = 130, d = 136;
  for (DType dt : {DType::Float32, DType::Float64}) {
    const Tensor q = rnd({1, n, 1, d}, dt), k = rnd({1, n, 1, d}, dt), v = rnd({1, n, 1, d}, dt), g = rnd({1, n, 1, d}, dt);
    const ops::AttentionParams p{1.0 / std::sqrt(static_cast<double>(d)), 0, Tensor()};
    const ops::AttentionResult ref = ops::causal_attention(q, k, v, p);
    const ops::AttentionResult got = ops::causal_attention(on_gpu(q), on_gpu(k), on_gpu(v), p);
    const ops::AttentionGrads rb = ops::causal_attention_backward(g, q, k, v, ref, p);
    const ops::AttentionGrads gb = ops::causal_attention_backward(on_gpu(g), on_gpu(q), on_gpu(k), on_gpu(v), got, p);
    const std::string what = std::string(" past one chunk, ") + dtype_name(dt);
    expect_close_at_scale(ref.out, got.out, attention_tol(dt), "out" + what);
    expect_close_at_scale(ref.logsumexp, got.logsumexp, attention_tol(dt), "logsumexp" + what);
    expect_close_at_scale(rb.dq, gb.dq, attention_grad_tol(dt), "dq" + what);
    expect_close_at_scale(rb.dk, gb.dk, attention_grad_tol(dt), "dk" + what);
    expect_close_at_scale(rb.dv, gb.dv, attention_grad_tol(dt), "dv" + what);
  }
}

TEST_CASE("cuda: fused causal attention with a value width other than the query/key width and a distance bias, against the CPU kernel") {
  // (Nq, Nk, offset, d, dv, R): tiled kernels (d <= 128) with dv narrower and wider than d, and the fallback (d over 128).
  const std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t> cases[] = {
      {70, 70, 0, 32, 16, 5}, {6, 80, 74, 16, 40, 100}, {40, 40, 0, 64, 32, 1}, {20, 20, 0, 136, 68, 7}};
  for (const auto& [nq, nk, offset, d, dv, R] : cases)
    for (DType dt : {DType::Float32, DType::Float64}) {
      const Tensor q = rnd({2, nq, 2, d}, dt), k = rnd({2, nk, 2, d}, dt), v = rnd({2, nk, 2, dv}, dt), g = rnd({2, nq, 2, dv}, dt);
      const Tensor bias = rnd({2, R + 1}, dt), slopes = rnd({2}, dt, 0.01, 0.5);
      const ops::AttentionParams p{0.2, offset, slopes, bias}, pg{0.2, offset, on_gpu(slopes), on_gpu(bias)};
      const ops::AttentionResult ref = ops::causal_attention(q, k, v, p);
      const ops::AttentionResult got = ops::causal_attention(on_gpu(q), on_gpu(k), on_gpu(v), pg);
      const ops::AttentionGrads rb = ops::causal_attention_backward(g, q, k, v, ref, p);
      const ops::AttentionGrads gb = ops::causal_attention_backward(on_gpu(g), on_gpu(q), on_gpu(k), on_gpu(v), got, pg);
      const std::string what = " d " + std::to_string(d) + ", dv " + std::to_string(dv) + ", R " + std::to_string(R) + ", " + dtype_name(dt);
      REQUIRE(got.out.shape() == Dims{2, nq, 2, dv});
      expect_close_at_scale(ref.out, got.out, attention_tol(dt), "out" + what);
      expect_close_at_scale(ref.logsumexp, got.logsumexp, attention_tol(dt), "logsumexp" + what);
      expect_close_at_scale(rb.dq, gb.dq, attention_grad_tol(dt), "dq" + what);
      expect_close_at_scale(rb.dk, gb.dk, attention_grad_tol(dt), "dk" + what);
      expect_close_at_scale(rb.dv, gb.dv, attention_grad_tol(dt), "dv" + what);
      expect_close_at_scale(rb.ddistance_bias, gb.ddistance_bias, attention_grad_tol(dt), "d distance_bias" + what);
    }
}

TEST_CASE("cuda: fused causal attention agrees with the materialised composition on the GPU") {
  // The readable reference of models/transformer.cpp: scores q k^T [B, H, Nq, Nk] (cuBLAS),
  // attention_softmax, probs v; its gradients through autograd.
  const AttentionCase cases[] = {{2, 70, 2, 32, 0, true, false}, {1, 20, 3, 64, 30, false, false}, {1, 150, 1, 128, 0, true, false},
                                 {2, 5, 2, 16, 0, false, false}};
  for (DType dt : {DType::Float32, DType::Float64})
    for (const AttentionCase& c : cases) {
      const std::string what = describe(c, dt);
      const int64_t nk = c.offset + c.nq;
      const Tensor q = on_gpu(rnd({c.b, c.nq, c.h, c.d}, dt)), k = on_gpu(rnd({c.b, nk, c.h, c.d}, dt));
      const Tensor v = on_gpu(rnd({c.b, nk, c.h, c.d}, dt)), g = on_gpu(rnd({c.b, c.nq, c.h, c.d}, dt));
      const Tensor slopes = c.slopes ? on_gpu(rnd({c.h}, dt, 0.01, 0.5)) : Tensor();
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
      const ops::AttentionParams p{scale, c.offset, slopes};

      const Tensor qv = q.detach().requires_grad_(), kv = k.detach().requires_grad_(), vv = v.detach().requires_grad_();
      const Tensor s = matmul(permute(qv, {0, 2, 1, 3}), permute(kv, {0, 2, 1, 3}), MatOp::None, MatOp::Transpose);
      const Tensor o = permute(matmul(attention_softmax(s, scale, c.offset, slopes), permute(vv, {0, 2, 1, 3})), {0, 2, 1, 3});
      sum(o * g).backward();
      // logsumexp of the materialised scores, in double on the host.
      const std::vector<double> sv = s.detach().to_vector<double>();
      const std::vector<double> sl = c.slopes ? slopes.to_vector<double>() : std::vector<double>(c.h, 0.0);
      std::vector<double> lse(c.b * c.h * c.nq);
      for (int64_t bh = 0; bh < c.b * c.h; ++bh)
        for (int64_t i = 0; i < c.nq; ++i) {
          const int64_t pos = c.offset + i, seen = std::min(nk, pos + 1);
          const double* row = sv.data() + (bh * c.nq + i) * nk;
          auto score = [&](int64_t n) { return scale * row[n] - sl[bh % c.h] * static_cast<double>(pos - n); };
          double mx = -INFINITY, sum_exp = 0;
          for (int64_t n = 0; n < seen; ++n) mx = std::max(mx, score(n));
          for (int64_t n = 0; n < seen; ++n) sum_exp += std::exp(score(n) - mx);
          lse[bh * c.nq + i] = mx + std::log(sum_exp);
        }

      const ops::AttentionResult fused = ops::causal_attention(q, k, v, p);
      expect_close_at_scale(o.detach(), fused.out, attention_tol(dt), "fused vs materialised out " + what);
      expect_close_at_scale(ops::to(from_vector(lse, {c.b, c.h, c.nq}), dt), fused.logsumexp, attention_tol(dt),
                            "fused vs materialised logsumexp " + what);
      const ops::AttentionGrads fb = ops::causal_attention_backward(g, q, k, v, fused, p);
      expect_close_at_scale(qv.grad(), fb.dq, attention_grad_tol(dt), "fused vs materialised dq " + what);
      expect_close_at_scale(kv.grad(), fb.dk, attention_grad_tol(dt), "fused vs materialised dk " + what);
      expect_close_at_scale(vv.grad(), fb.dv, attention_grad_tol(dt), "fused vs materialised dv " + what);
    }
}

template <>
struct CrossBackend<ops::AdamWArgs> {  // AdamW steps
  static void run() {
    for (DType dt : {DType::Float32, DType::Complex64, DType::Float64}) {
      Tensor pc = rnd({37, 5}, dt).requires_grad_(), pg = on_gpu(pc.detach()).requires_grad_();
      nn::AdamW oc({{{{"p", pc}}, 0.1, 1.0}}, {1e-2, 0.9, 0.95, 1e-8});
      nn::AdamW og({{{{"p", pg}}, 0.1, 1.0}}, {1e-2, 0.9, 0.95, 1e-8});
      for (int step = 0; step < 5; ++step) {
        const Tensor g = rnd({37, 5}, dt);
        pc.set_grad(g);
        pg.set_grad(on_gpu(g));
        oc.step();
        og.step();
      }
      expect_close(pc.detach(), pg.detach(), 1e-6, 1e-5, std::string("AdamW param ") + dtype_name(dt));
      expect_close(oc.state().at("exp_avg_sq.p"), og.state().at("exp_avg_sq.p"), 1e-7, 1e-5, std::string("AdamW exp_avg_sq ") + dtype_name(dt));
    }
  }
};

// The cross-backend case of every fused op, from the list.
#define PHASOR_CROSS_BACKEND_CASE(name, Args) \
  TEST_CASE("cuda: fused op " #name " agrees with the CPU") { CrossBackend<ops::Args>::run(); }
PHASOR_FUSED_OPS(PHASOR_CROSS_BACKEND_CASE)
#undef PHASOR_CROSS_BACKEND_CASE

// ---------------------------------------------------------------- autograd

TEST_CASE("cuda: forward, backward and Hessian-vector products through autograd agree with the CPU, real and complex") {
  using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
  struct Case {
    const char* name;
    std::vector<Tensor> inputs;
    Fn f;
  };
  const std::vector<Case> cases = {
      {"complex elementwise chain",
       {rnd({4, 5}, DType::Complex64), rnd({5}, DType::Float32)},
       [](const std::vector<Tensor>& v) { return sum(abs(exp(v[0] * 0.3) * conj(v[0]) + v[1]) + real(v[0] * v[0])); }},
      {"angle, polar, sqrt",
       {rnd({3, 4}, DType::Complex128), rnd({3, 4}, DType::Float64, 0.5, 2)},
       [](const std::vector<Tensor>& v) { return sum(real(polar(sqrt(v[1]), angle(v[0]) * 2.0)) * abs(v[0])); }},
      {"matmul with conjugate transpose and softmax",
       {rnd({2, 3, 4}, DType::Complex64), rnd({5, 4}, DType::Complex64)},
       [](const std::vector<Tensor>& v) {
         const Tensor m = abs(matmul(v[0], v[1], MatOp::None, MatOp::ConjTranspose));
         return sum(softmax(m, -1) * m);
       }},
      {"reductions, broadcasting, logsumexp",
       {rnd({3, 1, 5}, DType::Float32), rnd({4, 5}, DType::Float32)},
       [](const std::vector<Tensor>& v) { return mean(logsumexp(v[0] * v[1] - square(v[1]), 1)) + sum(maximum(v[0], v[1])); }},
      {"embedding and gather",
       {rnd({10, 6}, DType::Float32)},
       [](const std::vector<Tensor>& v) {
         const Tensor ids = ops::to_device(from_vector<int64_t>({1, 3, 3, 9, 0, 1}, {2, 3}), v[0].device());
         const Tensor e = embedding(v[0], ids);
         const Tensor idx = ops::to_device(from_vector<int64_t>({0, 5, 5, 2, 1, 1, 0, 0, 3, 3, 4, 4}, {6, 2}), v[0].device());
         return sum(gather(reshape(e, {6, 6}), 1, idx) * 2.0) + sum(square(e));
       }},
      {"fused ops: rms_norm, cmha_rotate, attention_softmax, cross_entropy",
       {rnd({2, 6, 8}, DType::Float32), rnd({8}, DType::Float32), rnd({2, 2}, DType::Float32, 0.5, 1.5), rnd({2, 2}, DType::Float32, -0.3, 0.3),
        rnd({2}, DType::Float32, 0.5, 1.5)},
       [](const std::vector<Tensor>& v) {
         const Tensor x = rms_norm(v[0], v[1], 1e-5);
         const Tensor z = view_as_complex(reshape(x, {2, 6, 2, 2, 2}));
         const Tensor q = reshape(view_as_real(cmha_rotate(z, v[2], v[3], v[4], 0, 10000.0)), {2, 6, 2, 4});
         const Tensor s = matmul(permute(q, {0, 2, 1, 3}), permute(q, {0, 2, 1, 3}), MatOp::None, MatOp::Transpose);
         const Tensor p = attention_softmax(s, 0.5, 0);
         const Tensor logits = reshape(p, {24, 6});
         const Tensor targets = ops::to_device(from_vector<int64_t>({0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}), v[0].device());
         return cross_entropy(logits * 4.0, targets);
       }},
  };
  for (const Case& c : cases) {
    std::vector<Tensor> cpu_in, gpu_in;
    for (const Tensor& t : c.inputs) {
      cpu_in.push_back(t.detach().requires_grad_());
      gpu_in.push_back(on_gpu(t).requires_grad_());
    }
    const Tensor lc = c.f(cpu_in), lg = c.f(gpu_in);
    expect_close(lc.detach(), lg.detach(), 1e-5, 1e-4, std::string(c.name) + ": value");
    lc.backward();
    lg.backward();
    for (size_t i = 0; i < cpu_in.size(); ++i) {
      REQUIRE(gpu_in[i].grad().defined());
      CHECK(gpu_in[i].grad().device() == G);
      expect_close(cpu_in[i].grad(), gpu_in[i].grad(), 1e-4, 1e-4, std::string(c.name) + ": grad of input " + std::to_string(i));
    }
    // Second order (create_graph on both devices): the Hessian-vector product along one random direction.
    std::vector<Tensor> dir_c, dir_g;
    for (const Tensor& t : c.inputs) {
      dir_c.push_back(rnd(t.shape(), t.dtype()));
      dir_g.push_back(on_gpu(dir_c.back()));
    }
    const std::vector<Tensor> hc = hvp(c.f(cpu_in), cpu_in, dir_c), hg = hvp(c.f(gpu_in), gpu_in, dir_g);
    for (size_t i = 0; i < hc.size(); ++i) {
      CHECK(hg[i].device() == G);
      expect_close(hc[i], hg[i], 1e-3, 1e-3, std::string(c.name) + ": H v of input " + std::to_string(i));
    }
  }
}

// ---------------------------------------------------------------- the model

TEST_CASE("cuda: a training step of the model matches the CPU, for every position variant") {
  for (Position p : all_positions()) {
    const std::string position(position_name(p));
    ModelConfig cfg;
    cfg.position = p;
    cfg.d_model = 32;
    cfg.n_layers = 2;
    cfg.n_heads = 4;
    cfg.d_ff = 48;
    cfg.max_seq_len = 32;
    CausalLM cpu_model(cfg, 7), gpu_model(cfg, 7);
    gpu_model.to(G);
    CHECK(gpu_model.device() == G);
    for (const auto& entry : gpu_model.named_parameters()) CHECK_MESSAGE(entry.second.device() == G, entry.first);
    const Tensor tokens = ops::to(rnd({3, 16}, DType::Float64, 0, 255.99), DType::Int64);
    const Tensor targets = ops::to(rnd({3, 16}, DType::Float64, 0, 255.99), DType::Int64);
    auto make = [&](CausalLM& m) {
      return nn::AdamW({{m.decayed_parameters(), 0.1, 1.0}, {m.undecayed_parameters(), 0.0, 1.0}}, {3e-3, 0.9, 0.95, 1e-8});
    };
    nn::AdamW oc = make(cpu_model), og = make(gpu_model);
    for (int step = 0; step < 2; ++step) {
      const Tensor lc = cpu_model.loss(tokens, targets), lg = gpu_model.loss(tokens, targets);  // CPU tokens are copied over
      CHECK(lg.device() == G);
      expect_close(lc.detach(), lg.detach(), 1e-5, 1e-5, std::string(position) + ": loss at step " + std::to_string(step));
      oc.zero_grad();
      og.zero_grad();
      lc.backward();
      lg.backward();
      const auto pc = cpu_model.named_parameters(), pg = gpu_model.named_parameters();
      for (size_t i = 0; i < pc.size(); ++i) {
        REQUIRE(pg[i].second.grad().defined());
        expect_close(pc[i].second.grad(), pg[i].second.grad(), 2e-5, 2e-3, std::string(position) + ": grad of " + pc[i].first);
      }
      oc.step();
      og.step();
    }
    const auto pc = cpu_model.named_parameters(), pg = gpu_model.named_parameters();
    for (size_t i = 0; i < pc.size(); ++i)
      expect_mostly_close(pc[i].second.detach(), pg[i].second.detach(), 1e-5, 1e-3, 0.002,
                          std::string(position) + ": parameter after 2 steps " + pc[i].first);
    {
      NoGradGuard no_grad;
      expect_close(cpu_model.loss(tokens, targets), gpu_model.loss(tokens, targets), 1e-4, 1e-4, std::string(position) + ": loss after 2 steps");
      // Cached generation on the GPU gives the logits of a full forward pass.
      KVCache cache = gpu_model.make_cache(1, 12);
      CHECK(cache.layers.front().keys.device() == G);
      const Tensor prompt = ops::narrow(tokens, 0, 0, 1);
      gpu_model.forward(ops::narrow(prompt, 1, 0, 8), &cache);
      const Tensor next = gpu_model.forward(ops::narrow(prompt, 1, 8, 4), &cache);
      const Tensor full = gpu_model.forward(ops::narrow(prompt, 1, 0, 12));
      expect_close(to_cpu(ops::narrow(full, 1, 8, 4)), next, 1e-4, 1e-4, std::string(position) + ": cached generation");
    }
  }
}

#ifdef PHASOR_WITH_CUDA
// A row kernel's grid holds one block a row: 2^32 + 1 rows cast to unsigned
// launched one block and computed row 0 alone, without an error.
TEST_CASE("cuda: a row kernel refuses more rows than CUDA's grid holds instead of computing a part") {
  const Tensor x = on_gpu(ones({1, 4})), w = on_gpu(ones({4}));
  const Tensor y = on_gpu(zeros({1, 4})), inv = on_gpu(zeros({1}));
  const int64_t rows = (int64_t{1} << 32) + 1;
  CHECK_THROWS_WITH_AS(gpu::launch_rms_norm(DType::Float32, x.raw_data(), w.raw_data(), y.raw_data(), inv.raw_data(), rows, 4, 1e-5),
                       doctest::Contains("exceed CUDA's grid limit"), Error);
  CHECK_THROWS_WITH_AS(gpu::launch_row_softmax(DType::Float32, RowOp::Softmax, x.raw_data(), y.raw_data(), rows, 4),
                       doctest::Contains("exceed CUDA's grid limit"), Error);
}
#endif

TEST_CASE("cuda: summary") { MESSAGE("cross-backend comparisons made: ", checks_done); }
