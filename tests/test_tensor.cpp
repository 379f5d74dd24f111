// Engine core: creation, views, broadcasting, promotion, reductions, matmul, indexing, errors.
#include <doctest/doctest.h>
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <complex>
#include <csignal>
#include <functional>
#include <limits>
#include <string>
#include <thread>

#include "phasor.h"
#include "tests/helpers.h"

using namespace phasor;
using namespace phasor::test;

namespace {
// Naive reference matmul on row-major [m,k] x [k,n].
template <class T>
std::vector<T> naive_matmul(const std::vector<T>& a, const std::vector<T>& b, int64_t m, int64_t k, int64_t n) {
  std::vector<T> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) c[i * n + j] += a[i * k + p] * b[p * n + j];
  return c;
}
}  // namespace

TEST_CASE("creation and dtypes") {
  CHECK(zeros({2, 3}).numel() == 6);
  CHECK(ones({2}, DType::Complex64).to_vector<c64>() == std::vector<c64>{1.0f, 1.0f});
  CHECK(arange(0, 5).to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4});
  CHECK(full({2}, 2.5, DType::Float64).to_vector<double>() == std::vector<double>{2.5, 2.5});
  CHECK(from_vector<int>({1, 2, 3}).dtype() == DType::Int64);
  CHECK(promote(DType::Float64, DType::Complex64) == DType::Complex128);
  CHECK(promote(DType::Int64, DType::Float32) == DType::Float32);
  CHECK(promote(DType::Bool, DType::Int64) == DType::Int64);
}

TEST_CASE("views share storage and writes are seen by the base") {
  Tensor base = arange(0, 12).reshape({3, 4});
  Tensor t = base.transpose(0, 1);
  CHECK(t.shape() == Dims{4, 3});
  CHECK(!t.is_contiguous());
  CHECK(t.same_storage(base));
  ops::fill_(ops::select(t, 0, 1), 100.0);  // column 1 of base
  CHECK(base.to_vector<float>() == std::vector<float>{0, 100, 2, 3, 4, 100, 6, 7, 8, 100, 10, 11});
  Tensor n = base.narrow(1, 1, 2);
  CHECK(n.to_vector<float>() == std::vector<float>{100, 2, 100, 6, 100, 10});
  CHECK(base.unsqueeze(0).shape() == Dims{1, 3, 4});
  CHECK(base.unsqueeze(0).squeeze(0).shape() == Dims{3, 4});
  CHECK(base.flatten().shape() == Dims{12});
  CHECK(base.permute({1, 0}).contiguous().to_vector<float>() == t.contiguous().to_vector<float>());
  Tensor e = from_vector<float>({1, 2}).reshape({2, 1}).expand({2, 3});
  CHECK(e.stride(1) == 0);
  CHECK(e.contiguous().to_vector<float>() == std::vector<float>{1, 1, 1, 2, 2, 2});
  CHECK(base.contiguous().same_storage(base));  // no copy when already row-major
}

TEST_CASE("view_as_real and view_as_complex are zero-copy both ways") {
  Tensor z = from_vector<c64>({{1, 2}, {3, 4}});
  Tensor r = view_as_real(z);
  CHECK(r.shape() == Dims{2, 2});
  CHECK(r.same_storage(z));
  CHECK(r.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  Tensor back = view_as_complex(r);
  CHECK(back.same_storage(z));
  ops::fill_(ops::select(r, 1, 1), 9.0);  // imaginary parts
  CHECK(z.to_vector<c64>() == std::vector<c64>{{1, 9}, {3, 9}});
  CHECK(real(z).to_vector<float>() == std::vector<float>{1, 3});
  CHECK(imag(z).to_vector<float>() == std::vector<float>{9, 9});
}

TEST_CASE("broadcasting edge cases") {
  Tensor a = arange(0, 3).reshape({3, 1});
  Tensor b = arange(0, 4);
  CHECK((a + b).shape() == Dims{3, 4});
  CHECK((a * b).to_vector<float>()[11] == 6.0f);
  Tensor s = scalar_tensor(2.0);
  CHECK((b * s).to_vector<float>() == std::vector<float>{0, 2, 4, 6});
  Tensor empty_rows = zeros({0, 4});
  CHECK((empty_rows + b).shape() == Dims{0, 4});
  CHECK((zeros({2, 1, 3}) + zeros({4, 1})).shape() == Dims{2, 4, 3});
  CHECK(error_of([] { (void)(zeros({2, 3}) + zeros({4})); }).find("cannot be broadcast") != std::string::npos);
}

TEST_CASE("elementwise values against std::") {
  Tensor x = from_vector<double>({0.5, 1.5, 2.0});
  check_close(exp(x).to_vector<double>(), {std::exp(0.5), std::exp(1.5), std::exp(2.0)}, {.atol = 1e-12});
  check_close(rsqrt(x).to_vector<double>(), {1 / std::sqrt(0.5), 1 / std::sqrt(1.5), 1 / std::sqrt(2.0)}, {.atol = 1e-12});
  check_close(silu(x).to_vector<double>(), {0.5 / (1 + std::exp(-0.5)), 1.5 / (1 + std::exp(-1.5)), 2.0 / (1 + std::exp(-2.0))}, {.atol = 1e-12});
  check_close(gelu(x).to_vector<double>(), {0.5 * 0.5 * (1 + std::erf(0.5 / std::sqrt(2))), 0.75 * (1 + std::erf(1.5 / std::sqrt(2))),
                                             1.0 * (1 + std::erf(2.0 / std::sqrt(2)))}, {.atol = 1e-12});
  check_close(pow(x, 3.0).to_vector<double>(), {0.125, 3.375, 8.0}, {.atol = 1e-12});
  check_close(maximum(x, scalar_tensor(1.0, DType::Float64)).to_vector<double>(), {1.0, 1.5, 2.0}, {.atol = 1e-6});
  CHECK(lt(x, scalar_tensor(1.0, DType::Float64)).to_vector<bool>() == std::vector<bool>{true, false, false});
  CHECK(where(gt(x, scalar_tensor(1.0, DType::Float64)), x, zeros({}, DType::Float64)).to_vector<double>() ==
        std::vector<double>{0.0, 1.5, 2.0});
  CHECK(masked_fill(x, from_vector<bool>({true, false, true}), -1.0).to_vector<double>() == std::vector<double>{-1, 1.5, -1});
}

TEST_CASE("complex ops against std::complex") {
  const std::vector<c128> zs = {{1, 2}, {-3, 0.5}, {0, -1}};
  Tensor z = from_vector<c128>(zs);
  const auto mag = abs(z).to_vector<double>();
  const auto ang = angle(z).to_vector<double>();
  const auto ex = exp(z).to_vector<c128>();
  for (size_t i = 0; i < zs.size(); ++i) {
    CHECK(mag[i] == doctest::Approx(std::abs(zs[i])));
    CHECK(ang[i] == doctest::Approx(std::arg(zs[i])));
    CHECK(std::abs(ex[i] - std::exp(zs[i])) < 1e-12);
  }
  CHECK(abs(z).dtype() == DType::Float64);
  const auto p = polar(abs(z), angle(z)).to_vector<c128>();
  for (size_t i = 0; i < zs.size(); ++i) CHECK(std::abs(p[i] - zs[i]) < 1e-12);
  const auto q = (z / z * conj(z)).to_vector<c128>();
  for (size_t i = 0; i < zs.size(); ++i) CHECK(std::abs(q[i] - std::conj(zs[i])) < 1e-12);
  Tensor c = complex(from_vector<double>({1.0}), from_vector<double>({-2.0}));
  CHECK(c.to_vector<c128>()[0] == c128(1, -2));
  // real * complex promotes to complex
  CHECK((from_vector<float>({2.0f}) * from_vector<c64>({{1, 1}})).to_vector<c64>()[0] == c64(2, 2));
  CHECK(c.to_string().find("1-2i") != std::string::npos);
}

TEST_CASE("reductions over several dims") {
  Tensor x = arange(0, 24, 1, DType::Float64).reshape({2, 3, 4});
  CHECK(sum(x).item<double>() == 276.0);
  CHECK(sum(x, {0, 2}).to_vector<double>() == std::vector<double>{60, 92, 124});
  CHECK(sum(x, {1}, true).shape() == Dims{2, 1, 4});
  CHECK(sum(x, {0}).to_vector<double>()[0] == 12.0);  // leading-dim (column) path
  CHECK(sum(x.transpose(0, 2), {1}).shape() == Dims{4, 2});
  CHECK(mean(x, {-1}).to_vector<double>()[1] == 5.5);
  auto [values, indices] = max(x, 1);
  CHECK(values.to_vector<double>()[0] == 8.0);
  CHECK(indices.to_vector<int64_t>()[0] == 2);
  CHECK(argmax(from_vector<float>({1, 5, 2}), 0).item<int64_t>() == 1);
  CHECK(min(x, 2).values.to_vector<double>()[2] == 8.0);
  CHECK(logsumexp(from_vector<double>({0.0, 0.0}), 0).item<double>() == doctest::Approx(std::log(2.0)));
  CHECK(norm(from_vector<c128>({{3, 4}})).item<double>() == doctest::Approx(5.0));
  const auto sm = softmax(from_vector<double>({1, 2, 3}), 0).to_vector<double>();
  CHECK(sm[2] == doctest::Approx(std::exp(3.0) / (std::exp(1.0) + std::exp(2.0) + std::exp(3.0))));
  const auto lsm = log_softmax(from_vector<double>({1, 2, 3}), 0).to_vector<double>();
  CHECK(lsm[0] == doctest::Approx(std::log(sm[0])));
  // softmax along a non-last dim
  Tensor s0 = softmax(x, 0);
  CHECK((s0.select(0, 0) + s0.select(0, 1)).to_vector<double>()[5] == doctest::Approx(1.0));
}

TEST_CASE("matmul real and complex against a naive loop, with transposed and conjugate views") {
  Generator gen(7);
  for (DType dt : {DType::Float32, DType::Float64, DType::Complex64, DType::Complex128}) {
    Tensor a = randn({5, 3}, dt, &gen), b = randn({3, 4}, dt, &gen);
    const auto av = a.to_vector<c128>(), bv = b.to_vector<c128>();
    const double tol = real_dtype(dt) == DType::Float32 ? 1e-4 : 1e-12;
    check_close(matmul(a, b).to_vector<c128>(), naive_matmul(av, bv, 5, 3, 4), {.atol = tol});
    // a^T stored: (a^T)^T b through a transposed view and through the flag
    Tensor at = a.transpose(0, 1).contiguous();
    check_close(matmul(at.transpose(0, 1), b).to_vector<c128>(), naive_matmul(av, bv, 5, 3, 4), {.atol = tol});
    check_close(matmul(at, b, MatOp::Transpose).to_vector<c128>(), naive_matmul(av, bv, 5, 3, 4), {.atol = tol});
    // conjugate transpose: (conj(a)^T)^H = a
    Tensor ah = conj(at);
    check_close(matmul(ah, b, MatOp::ConjTranspose).to_vector<c128>(), naive_matmul(av, bv, 5, 3, 4), {.atol = tol});
    // b given as b^H stored
    Tensor bh = conj(b.transpose(0, 1).contiguous());
    check_close(matmul(a, bh, MatOp::None, MatOp::ConjTranspose).to_vector<c128>(), naive_matmul(av, bv, 5, 3, 4), {.atol = tol});
  }
}

TEST_CASE("matmul split across threads: blocks of rows and of columns, every flag, deterministic") {
  // Large enough to be split (tensor/cpu/gemm.cpp): a tall product splits by
  // rows of C, a wide one by columns, with a remainder block in each; a batch
  // smaller than the thread count splits every item.
  Generator gen(8);
  const std::vector<std::array<int64_t, 4>> shapes{{1, 203, 37, 61}, {1, 29, 37, 250}, {3, 40, 50, 70}};
  const MatOp ops_[] = {MatOp::None, MatOp::Transpose, MatOp::ConjTranspose};
  const int threads = omp_get_max_threads();
  for (DType dt : {DType::Float32, DType::Complex64}) {
    for (const auto& shape : shapes) {
      const int64_t batch = shape[0], m = shape[1], k = shape[2], n = shape[3];
      for (MatOp op_a : ops_) {
        for (MatOp op_b : ops_) {
          if (!is_complex(dt) && (op_a == MatOp::ConjTranspose || op_b == MatOp::ConjTranspose)) continue;
          const Tensor a = op_a == MatOp::None ? randn({batch, m, k}, dt, &gen) : randn({batch, k, m}, dt, &gen);
          const Tensor b = op_b == MatOp::None ? randn({batch, k, n}, dt, &gen) : randn({batch, n, k}, dt, &gen);
          omp_set_num_threads(1);
          const std::vector<c128> one = ops::matmul(a, b, op_a, op_b).to_vector<c128>();
          omp_set_num_threads(std::max(2, threads));
          const std::vector<c128> split = ops::matmul(a, b, op_a, op_b).to_vector<c128>();
          CAPTURE(m);
          CAPTURE(n);
          // Deterministic for a thread count; across thread counts OpenBLAS's
          // edge kernels may round a block's last rows differently.
          CHECK(ops::matmul(a, b, op_a, op_b).to_vector<c128>() == split);
          check_close(split, one, {.rtol = 1e-5, .atol = 1e-5});
          // and the product itself, item 0, against a naive loop on op(A), op(B)
          auto operand = [](const Tensor& t, MatOp op) {
            const Tensor item = t.select(0, 0);
            const Tensor logical = op == MatOp::None ? item : item.transpose(0, 1);
            return (op == MatOp::ConjTranspose ? conj(logical) : logical).contiguous().to_vector<c128>();
          };
          const std::vector<c128> want = naive_matmul(operand(a, op_a), operand(b, op_b), m, k, n);
          check_close(std::vector<c128>(split.begin(), split.begin() + m * n), want, {.rtol = 1e-4, .atol = 1e-4});
        }
      }
    }
  }
  omp_set_num_threads(threads);
}

TEST_CASE("batched matmul broadcasts leading dims") {
  Tensor a = randn({2, 3, 4, 5}, DType::Float64), b = randn({3, 5, 2}, DType::Float64);
  Tensor c = matmul(a, b);
  CHECK(c.shape() == Dims{2, 3, 4, 2});
  const auto a1 = a.select(0, 1).select(0, 2).contiguous().to_vector<double>();
  const auto b1 = b.select(0, 2).contiguous().to_vector<double>();
  check_close(c.select(0, 1).select(0, 2).contiguous().to_vector<double>(), naive_matmul(a1, b1, 4, 5, 2), {.atol = 1e-12});
  Tensor w = randn({5, 6}, DType::Float64);
  CHECK(matmul(a, w).shape() == Dims{2, 3, 4, 6});
  CHECK(matmul(from_vector<double>({1, 2}), from_vector<double>({3, 4})).item<double>() == 11.0);
}

TEST_CASE("indexing: index_select, index_add, gather, cat, stack, split, chunk") {
  Tensor w = arange(0, 6).reshape({3, 2});
  Tensor ids = from_vector<int>({2, 0, 2});
  CHECK(index_select(w, 0, ids).to_vector<float>() == std::vector<float>{4, 5, 0, 1, 4, 5});
  CHECK(embedding(w, from_vector<int>({1, 2}, {1, 2})).shape() == Dims{1, 2, 2});
  Tensor added = index_add(zeros({3, 2}), 0, ids, ones({3, 2}));
  CHECK(added.to_vector<float>() == std::vector<float>{1, 1, 0, 0, 2, 2});
  Tensor g = gather(w, 1, from_vector<int>({1, 0, 1}, {3, 1}));
  CHECK(g.to_vector<float>() == std::vector<float>{1, 2, 5});
  CHECK(cat({w, w}, 0).shape() == Dims{6, 2});
  CHECK(cat({w, w}, 1).to_vector<float>()[2] == 0.0f);
  CHECK(stack({w, w}, 0).shape() == Dims{2, 3, 2});
  CHECK(split(arange(0, 5), 2, 0).size() == 3);
  CHECK(chunk(arange(0, 6), 3, 0)[2].to_vector<float>() == std::vector<float>{4, 5});
  CHECK(to(w, DType::Int64).to_vector<int64_t>()[5] == 5);
}

TEST_CASE("seeded random draws are reproducible") {
  Generator g1(42), g2(42);
  CHECK(randn({100}, DType::Float32, &g1).to_vector<float>() == randn({100}, DType::Float32, &g2).to_vector<float>());
  Tensor u = rand({10000}, DType::Float64, &g1);
  const double m = mean(u).item<double>();
  CHECK(m == doctest::Approx(0.5).epsilon(0.02));
  Tensor n = randn({20000}, DType::Float64, &g1);
  // The mean of 20000 standard normals is 0 +- 0.007: an absolute bound of 0.03 (4 sd).
  CHECK(close(mean(n).item<double>(), 0.0, {.atol = 0.03}));
  CHECK(mean(n * n).item<double>() == doctest::Approx(1.0).epsilon(0.03));
  // A draw continues the stream: state is (seed, offset).
  Generator g3(42, g2.offset());
  CHECK(rand({3}, DType::Float32, &g3).to_vector<float>() == rand({3}, DType::Float32, &g2).to_vector<float>());
}

TEST_CASE("misuse throws phasor::Error naming the op and shapes") {
  CHECK(error_of([] { (void)matmul(zeros({2, 3}), zeros({4, 5})); }).find("matmul: inner dimensions differ: [2, 3] x [4, 5]") == 0);
  CHECK(error_of([] { (void)view(zeros({3, 4}).transpose(0, 1), {12}); }).find("view: cannot view") == 0);
  CHECK(error_of([] { (void)view_as_complex(zeros({3, 3})); }).find("last dim must have size 2") != std::string::npos);
  CHECK(error_of([] { (void)view_as_complex(zeros({2, 4}).transpose(0, 1).narrow(1, 0, 2)); }).find("contiguous") != std::string::npos);
  CHECK(error_of([] { (void)zeros({2, 3}).select(1, 3); }).find("select: index 3 out of range") == 0);
  CHECK(error_of([] { (void)zeros({2, 3}).transpose(0, 2); }).find("dim 2 out of range") != std::string::npos);
  CHECK(error_of([] { (void)atan2(zeros({2}, DType::Complex64), zeros({2})); }).find("atan2: not defined for complex") == 0);
  CHECK(error_of([] { (void)index_select(zeros({3, 2}), 0, from_vector<int>({3})); }).find("index 3 out of range") != std::string::npos);
  CHECK(error_of([] { (void)zeros({2, 3}).reshape({4}); }).find("reshape: shape [4] is invalid") == 0);
  CHECK(error_of([] { (void)zeros({2}).item<float>(); }).find("item()") == 0);
  CHECK(error_of([] { (void)lt(zeros({1}, DType::Complex64), zeros({1}, DType::Complex64)); }).find("complex") != std::string::npos);
}

TEST_CASE("sizes that overflow int64 are refused, never wrapped into a small allocation") {
  const int64_t big = int64_t{1} << 40;
  // 2^80 elements: the product wraps to 0 in int64 arithmetic.
  CHECK(error_of([&] { empty({big, big}); }).find("more elements than an int64 can count") != std::string::npos);
  CHECK(error_of([&] { empty({big, big, 3}, DType::Float64); }).find("more elements") != std::string::npos);
  // 2^61 elements fit, but not their bytes as complex128 (16 bytes each).
  CHECK(error_of([&] { empty({int64_t{1} << 61}, DType::Complex128); }).find("needs more bytes than an int64 can count") !=
        std::string::npos);
  // A zero dim anywhere makes an empty tensor, however large the others.
  CHECK(empty({big, big, 0}).numel() == 0);
  // A view whose furthest element lies past the int64 range.
  const Tensor t = zeros({4});
  CHECK(error_of([&] { as_strided(t, {3, 3}, {int64_t{1} << 62, int64_t{1} << 62}, 0); }).find("reaches past the int64 range") !=
        std::string::npos);
}

// ============================================================== scalars stored into a dtype, overlapping in-place ops, fork

TEST_CASE("a scalar that its dtype cannot hold is refused by fill_, full, masked_fill and arange, as PyTorch does") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const auto refused = [](const std::function<void()>& f, const std::string& dtype) {
    const std::string e = error_of(f);
    CAPTURE(e);
    CHECK(contains(e, "cannot be converted to " + dtype + " without overflow"));
    CHECK(e.find('\n') == std::string::npos);
  };
  // a nonzero imaginary part into a real dtype (it gave 0 silently)
  const Tensor f32 = ones({3});
  refused([&] { ops::fill_(f32, c128(0, 1)); }, "float32");
  refused([&] { (void)full({2}, c128(1, 2), DType::Float64); }, "float64");
  refused([&] { ops::fill_(zeros({2}, DType::Int64), c128(0, 1)); }, "int64");
  check_close(f32.to_vector<double>(), {1.0, 1.0, 1.0}, {.atol = 0});  // a refusal writes nothing
  // NaN, infinities and values out of range into int64 (NaN gave INT64_MIN)
  for (double v : {nan, inf, -inf, 0x1p63, -0x1p64, 1e300}) {
    CAPTURE(v);
    refused([&] { ops::fill_(zeros({2}, DType::Int64), v); }, "int64");
    refused([&] { (void)masked_fill(zeros({2}, DType::Int64), ones({2}, DType::Bool), v); }, "int64");
  }
  // finite values beyond float's range into float32 and complex64; infinities and NaN are values there
  refused([&] { (void)full({2}, 1e300, DType::Float32); }, "float32");
  refused([&] { (void)full({2}, c128(1, -1e39), DType::Complex64); }, "complex64");
  CHECK(std::isinf(full({1}, -inf, DType::Float32).item<float>()));
  CHECK(std::isnan(full({1}, nan, DType::Complex64).item<c64>().real()));
  // what fits is stored: int64's extremes, a fraction truncated (PyTorch), any value into bool (nonzero is true)
  CHECK(full({1}, -0x1p63, DType::Int64).item<int64_t>() == std::numeric_limits<int64_t>::min());
  CHECK(full({1}, -2.75, DType::Int64).item<int64_t>() == -2);
  CHECK(full({1}, c128(0, 1), DType::Bool).item<bool>());
  CHECK(full({1}, nan, DType::Bool).item<bool>());
  CHECK_FALSE(full({1}, 0.0, DType::Bool).item<bool>());
  CHECK(full({1}, c128(1e300, -1e300), DType::Complex128).item<c128>() == c128(1e300, -1e300));
  // arange: both ends must fit the dtype; a count past any allocation and a NaN step are refused
  refused([&] { (void)arange(0, 1e30, 1e29, DType::Int64); }, "int64");
  refused([&] { (void)arange(-1e39, 0, 1e38, DType::Float32); }, "float32");
  CHECK(contains(error_of([&] { (void)arange(0, 1e300); }), "are too many"));
  CHECK(contains(error_of([&] { (void)arange(0, 1, nan); }), "arange: invalid range"));
  CHECK(arange(-3, 3, 2, DType::Int64).to_vector<int64_t>() == std::vector<int64_t>{-3, -1, 1});
  // arithmetic with such a scalar stores nothing: in single precision the scalar is +-inf, as in PyTorch
  CHECK((ones({1}) * 1e300).item<float>() == std::numeric_limits<float>::infinity());
  CHECK((ones({1}, DType::Complex64) - c128(0, 1e300)).item<c64>() == c64(1, -std::numeric_limits<float>::infinity()));
  CHECK((ones({1}, DType::Float64) * 1e300).item<double>() == 1e300);
}

TEST_CASE("in-place ops whose source overlaps the destination read the source as it was (NumPy's a[1:] = a[:-1])") {
  // Long enough that the loop is split across threads as well.
  for (int64_t n : {int64_t{6}, int64_t{1} << 16}) {
    CAPTURE(n);
    std::vector<double> base(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) base[i] = static_cast<double>(i * i % 97);
    const auto shifted_copy = [&](bool forward) {  // NumPy: a[1:] = a[:-1] (forward) or a[:-1] = a[1:]
      std::vector<double> want = base;
      for (int64_t i = 0; i + 1 < n; ++i) want[forward ? i + 1 : i] = base[forward ? i : i + 1];
      return want;
    };
    Tensor a = from_vector(base);
    ops::copy_(a.narrow(0, 1, n - 1), a.narrow(0, 0, n - 1));
    CHECK(a.to_vector<double>() == shifted_copy(true));
    a = from_vector(base);
    ops::copy_(a.narrow(0, 0, n - 1), a.narrow(0, 1, n - 1));
    CHECK(a.to_vector<double>() == shifted_copy(false));
    // add_ with an overlapping other: a[1:] += a[:-1]
    a = from_vector(base);
    ops::binary_(ops::Binary::Add, a.narrow(0, 1, n - 1), a.narrow(0, 0, n - 1));
    std::vector<double> want = base;
    for (int64_t i = 1; i < n; ++i) want[i] = base[i] + base[i - 1];
    CHECK(a.to_vector<double>() == want);
    // axpy_ likewise: a[:-1] += 2 a[1:]
    a = from_vector(base);
    ops::axpy_(a.narrow(0, 0, n - 1), a.narrow(0, 1, n - 1), 2.0);
    want = base;
    for (int64_t i = 0; i + 1 < n; ++i) want[i] = base[i] + 2 * base[i + 1];
    CHECK(a.to_vector<double>() == want);
  }
  // a row of the destination broadcast over it: every row gets the original row 0
  Tensor m = from_vector<double>({1, 2, 3, 4, 5, 6}, {3, 2});
  ops::binary_(ops::Binary::Mul, m, m.select(0, 0));
  CHECK(m.to_vector<double>() == std::vector<double>{1, 4, 3, 8, 5, 12});
  // a complex tensor written from its own real parts (another dtype, same bytes)
  Tensor z = from_vector<c128>({{1, 2}, {3, 4}});
  ops::copy_(ops::view_as_real(z).select(1, 1), ops::view_as_real(z).select(1, 0));
  CHECK(z.to_vector<c128>() == std::vector<c128>{{1, 1}, {3, 3}});
  // the same view in place stays the plain elementwise case
  Tensor s = from_vector<double>({1, 2, 3});
  ops::binary_(ops::Binary::Add, s, s);
  CHECK(s.to_vector<double>() == std::vector<double>{2, 4, 6});
  // a destination whose elements share memory is refused (PyTorch: "unsupported operation")
  const Tensor row = zeros({1, 3});
  CHECK(contains(error_of([&] { ops::copy_(row.expand({2, 3}), from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3})); }),
                 "unsupported operation"));
}

TEST_CASE("a child forked after a parallel op runs parallel ops, single-threaded (libgomp's pool does not survive fork)") {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(std::max(2, threads));
  const int64_t n = int64_t{1} << 18;  // well above the threading grain
  const Tensor x = arange(0, static_cast<double>(n), 1, DType::Float64);
  const Tensor a = ones({256, 256}, DType::Float64);
  CHECK(ops::binary(ops::Binary::Add, x, x).to_vector<double>()[n - 1] == 2.0 * (n - 1));  // the parent's pool starts
  (void)ops::matmul(a, a);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // the child: exit status 0 when its parallel ops give the right values
    int status = 1;
    try {
      const std::vector<double> y = ops::binary(ops::Binary::Add, x, x).to_vector<double>();
      const double s = ops::sum(x).item<double>();
      const std::vector<double> p = ops::matmul(a, a).to_vector<double>();
      status = (y[n - 1] == 2.0 * (n - 1) && s == 0.5 * n * (n - 1) && p[0] == 256.0 && p.back() == 256.0) ? 0 : 3;
    } catch (...) {
      status = 2;
    }
    _exit(status);
  }
  // The parent waits with a deadline, so a child that hangs fails the test instead of hanging it.
  int status = 0;
  pid_t done = 0;
  for (int waited_ms = 0; waited_ms < 60000 && done == 0; waited_ms += 10) {
    done = waitpid(pid, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  omp_set_num_threads(threads);
  CHECK_MESSAGE(done == pid, "the forked child hung in its first parallel op");
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
