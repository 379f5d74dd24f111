// float32 GEMMs on oneDNN (tensor/cpu/onednn_gemm.h) against the same products
// in float64 on OpenBLAS, over every layout the matmul front-end hands the
// backend: transposes as strides, leading dimensions wider than the rows, a
// batch at a constant distance (one 3-D primitive), weights shared by the batch
// (broadcast), and batches whose items are not evenly spaced (one 2-D
// primitive per item). The bound is elementwise and relative to the product of
// the magnitudes, |C - C64| <= 1e-5 (|A| |B|), so that cancellation cannot hide
// an error behind a large neighbour.
#include <cblas.h>
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <string>

#include "phasor.h"
#include "tensor/cpu/onednn_gemm.h"

using namespace phasor;

namespace {

// The float32 product on `library`, checked against the float64 one.
void check_product(const Tensor& a, const Tensor& b, MatOp op_a, MatOp op_b, cpu::GemmLibrary library) {
  cpu::set_gemm_library(library);
  const Tensor c = ops::matmul(a, b, op_a, op_b);
  cpu::set_gemm_library(std::nullopt);
  const Tensor ref = ops::matmul(a.to(DType::Float64), b.to(DType::Float64), op_a, op_b);
  const Tensor bound = ops::matmul(ops::unary(ops::Unary::Abs, a).to(DType::Float64), ops::unary(ops::Unary::Abs, b).to(DType::Float64), op_a, op_b);
  REQUIRE(c.shape() == ref.shape());
  const auto got = ops::contiguous(c).to_vector<float>();
  const auto want = ops::contiguous(ref).to_vector<double>();
  const auto scale = ops::contiguous(bound).to_vector<double>();
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(static_cast<double>(got[i]) - want[i]) <= 1e-5 * scale[i] + 1e-30)) ++bad;
  CHECK_MESSAGE(bad == 0, bad, " of ", got.size(), " elements off");
}

void check_both(const Tensor& a, const Tensor& b, MatOp op_a = MatOp::None, MatOp op_b = MatOp::None) {
  for (auto lib : {cpu::GemmLibrary::OpenBLAS, cpu::GemmLibrary::OneDNN}) {
    CAPTURE(static_cast<int>(lib));
    check_product(a, b, op_a, op_b, lib);
  }
}

}  // namespace

TEST_CASE("the build has oneDNN exactly when CMake found it; forcing it where it is absent fails") {
#ifdef PHASOR_TEST_EXPECT_ONEDNN
  CHECK(cpu::onednn_available());
#else
  CHECK_FALSE(cpu::onednn_available());
  cpu::set_gemm_library(cpu::GemmLibrary::OneDNN);
  CHECK_THROWS_WITH_AS(ops::matmul(ones({4, 4}), ones({4, 4})), doctest::Contains("no oneDNN"), std::invalid_argument);
  cpu::set_gemm_library(std::nullopt);
#endif
}

TEST_CASE("float32 GEMMs on each library agree with float64 over every layout") {
  if (!cpu::onednn_available()) return;  // the case above checks that this build should have none
  Generator gen(11);
  SUBCASE("plain, and each operand transposed") {
    const Tensor a = randn({67, 45}, DType::Float32, &gen), b = randn({45, 33}, DType::Float32, &gen);
    check_both(a, b);
    check_both(randn({45, 67}, DType::Float32, &gen), b, MatOp::Transpose);
    check_both(a, randn({33, 45}, DType::Float32, &gen), MatOp::None, MatOp::Transpose);
    check_both(randn({45, 67}, DType::Float32, &gen), randn({33, 45}, DType::Float32, &gen), MatOp::Transpose, MatOp::Transpose);
  }
  SUBCASE("leading dimensions wider than the rows (narrowed columns)") {
    const Tensor a = randn({70, 90}, DType::Float32, &gen).narrow(1, 3, 64);
    const Tensor b = randn({64, 50}, DType::Float32, &gen).narrow(1, 1, 40);
    check_both(a, b);
  }
  SUBCASE("a batch at a constant distance, and weights shared by the batch") {
    check_both(randn({3, 40, 24}, DType::Float32, &gen), randn({3, 24, 56}, DType::Float32, &gen));
    check_both(randn({3, 40, 24}, DType::Float32, &gen), randn({24, 56}, DType::Float32, &gen));
    check_both(randn({3, 40, 24}, DType::Float32, &gen), randn({56, 24}, DType::Float32, &gen), MatOp::None, MatOp::Transpose);
  }
  SUBCASE("a shared source and a batch of weights; unevenly spaced batch items") {
    check_both(randn({40, 24}, DType::Float32, &gen), randn({4, 24, 56}, DType::Float32, &gen));
    check_both(randn({2, 1, 40, 24}, DType::Float32, &gen), randn({1, 3, 24, 56}, DType::Float32, &gen));
  }
  SUBCASE("the model's shapes (the policy's range) and a single row") {
    check_both(randn({256, 128}, DType::Float32, &gen), randn({352, 128}, DType::Float32, &gen), MatOp::None, MatOp::Transpose);
    check_both(randn({256, 352}, DType::Float32, &gen), randn({256, 128}, DType::Float32, &gen), MatOp::Transpose);
    check_both(randn({1, 128}, DType::Float32, &gen), randn({128, 256}, DType::Float32, &gen));
  }
}

TEST_CASE("a float32 GEMM on oneDNN gives the same bits run after run") {
  if (!cpu::onednn_available()) return;
  Generator gen(12);
  const Tensor a = randn({512, 352}, DType::Float32, &gen), b = randn({128, 352}, DType::Float32, &gen);
  cpu::set_gemm_library(cpu::GemmLibrary::OneDNN);
  const auto first = ops::matmul(a, b, MatOp::None, MatOp::Transpose).to_vector<float>();
  const auto second = ops::matmul(a, b, MatOp::None, MatOp::Transpose).to_vector<float>();
  cpu::set_gemm_library(std::nullopt);
  CHECK(first == second);
}

// A weight's gradient is dY^H X; for real tensors that is dY^T X and must run
// where dY^T X runs. (It once went to OpenBLAS, widened from bfloat16 under
// bf16, because oneDNN has no conjugate flag: the same bits on both paths
// here would be a coincidence of OpenBLAS and oneDNN summing alike.)
TEST_CASE("a real operand's conjugate transpose runs as its transpose, on oneDNN too") {
  if (!cpu::onednn_available()) return;
  Generator gen(13);
  const Tensor dy = randn({2048, 128}, DType::Float32, &gen), x = randn({2048, 96}, DType::Float32, &gen),
               w = randn({128, 2048}, DType::Float32, &gen);
  for (DType dtype : {DType::Float32, DType::BFloat16}) {
    CAPTURE(dtype);
    const Tensor a = dy.to(dtype), b = x.to(dtype), c = w.to(dtype);
    cpu::set_gemm_library(cpu::GemmLibrary::OneDNN);
    const auto adjoint = ops::matmul(a, b, MatOp::ConjTranspose, MatOp::None, DType::Float32).to_vector<float>();
    const auto transpose = ops::matmul(a, b, MatOp::Transpose, MatOp::None, DType::Float32).to_vector<float>();
    const auto both = ops::matmul(b, c, MatOp::ConjTranspose, MatOp::ConjTranspose, DType::Float32);
    const auto both_t = ops::matmul(b, c, MatOp::Transpose, MatOp::Transpose, DType::Float32);
    cpu::set_gemm_library(std::nullopt);
    CHECK(adjoint == transpose);
    CHECK(both.to_vector<float>() == both_t.to_vector<float>());
  }
}

// OpenBLAS's LP64 cblas and cuBLAS take 32-bit ints: a leading dimension, size
// or batch count past INT32_MAX was once narrowed (a NumPy view with a row
// stride of 2^32 + 5 multiplied as if it were 5). The limit is lowered here so
// that small products take the paths that copy such an operand to row-major
// and split m, n and k, and must give what they give without the limit.
namespace {
struct BlasLimit {
  explicit BlasLimit(int64_t limit) { set_blas_int_limit_for_testing(limit); }
  ~BlasLimit() { set_blas_int_limit_for_testing(0); }
};
}  // namespace

TEST_CASE("sizes and leading dimensions past the library's 32-bit ints are split or copied, never narrowed") {
  CHECK(blas_int_limit() == 2147483647);
  CHECK_THROWS_WITH_AS(blas_int((int64_t{1} << 32) + 5, "lda"), doctest::Contains("lda 4294967301 exceeds the 32-bit integers"), Error);
  Generator gen(14);
  struct Case {
    std::string what;
    Tensor a, b;
    MatOp op_a = MatOp::None, op_b = MatOp::None;
  };
  std::vector<Case> cases;
  for (DType dt : {DType::Float32, DType::Float64, DType::Complex64, DType::BFloat16}) {
    const auto r = [&](const Dims& s) { return randn(s, dt == DType::BFloat16 ? DType::Float32 : dt, &gen).to(dt); };
    cases.push_back({"a row stride past the limit (copied)", r({5, 20}).narrow(1, 2, 6), r({6, 3})});
    // Column-major views (strides [1, 20]): their leading dimension is the column stride.
    cases.push_back({"a column stride past the limit (copied)", r({7, 20}).narrow(1, 0, 6).transpose(0, 1),
                     r({3, 20}).narrow(1, 1, 6).transpose(0, 1), MatOp::Transpose});
    cases.push_back({"m, n and k past the limit (split)", r({19, 21}), r({21, 17})});
    cases.push_back({"transposed, conjugated", r({21, 19}), r({17, 21}), MatOp::Transpose, MatOp::ConjTranspose});
    cases.push_back({"a batch, folded into m", r({3, 6, 21}), r({21, 5})});
    cases.push_back({"a batch of weights", r({2, 6, 21}), r({2, 21, 11})});
    cases.push_back({"vectors", r({21}), r({21, 12})});
  }
  for (auto library : {cpu::GemmLibrary::OpenBLAS, cpu::GemmLibrary::OneDNN}) {
    if (library == cpu::GemmLibrary::OneDNN && !cpu::onednn_available()) continue;
    cpu::set_gemm_library(library);
    for (const Case& c : cases) {
      CAPTURE(c.what);
      CAPTURE(c.a.dtype());
      CAPTURE(static_cast<int>(library));
      const Tensor want = ops::matmul(c.a, c.b, c.op_a, c.op_b);
      Tensor got;
      {
        BlasLimit limit(8);
        got = ops::matmul(c.a, c.b, c.op_a, c.op_b);
      }
      REQUIRE(got.shape() == want.shape());
      const double tol = c.a.dtype() == DType::BFloat16 ? 2e-2 : 1e-5;  // k split: the sums in another order
      const auto x = ops::contiguous(got.to(DType::Complex128)).to_vector<c128>();
      const auto y = ops::contiguous(want.to(DType::Complex128)).to_vector<c128>();
      size_t bad = 0;
      for (size_t i = 0; i < x.size(); ++i)
        if (!(std::abs(x[i] - y[i]) <= tol * (1 + std::abs(y[i])))) ++bad;
      CHECK_MESSAGE(bad == 0, bad, " of ", x.size(), " elements off");
    }
  }
  cpu::set_gemm_library(std::nullopt);
}

TEST_CASE("oneDNN's primitives are kept in a bounded LRU cache, and products stay right after an eviction") {
  if (!cpu::onednn_available()) return;
  const size_t default_capacity = cpu::onednn_cache().capacity;
  CHECK(default_capacity > 0);
  CHECK(cpu::onednn_cache().entries <= default_capacity);
  cpu::set_onednn_cache_capacity(4);
  CHECK(cpu::onednn_cache().entries <= 4);
  Generator gen(17);
  const Tensor b = randn({24, 40}, DType::Float32, &gen);
  // A product with `m` rows (a shape of its own: its own primitive), checked
  // against float64; how many primitives it made.
  const auto made_by = [&](int64_t m) {
    const uint64_t before = cpu::onednn_cache().made;
    check_product(randn({m, 24}, DType::Float32, &gen), b, MatOp::None, MatOp::None, cpu::GemmLibrary::OneDNN);
    return cpu::onednn_cache().made - before;
  };
  for (int64_t m = 1001; m <= 1004; ++m) CHECK(made_by(m) == 1);
  CHECK(cpu::onednn_cache().entries == 4);
  CHECK(made_by(1001) == 0);  // kept, and now the most recently used
  CHECK(made_by(1005) == 1);  // the cache was full: 1002, the least recently used, goes
  CHECK(cpu::onednn_cache().entries == 4);
  CHECK(made_by(1001) == 0);
  CHECK(made_by(1002) == 1);  // made again, and right
  for (int64_t m = 2001; m <= 2040; ++m) CHECK(made_by(m) == 1);  // ever new shapes: the cache stays at its bound
  CHECK(cpu::onednn_cache().entries == 4);
  cpu::set_onednn_cache_capacity(default_capacity);
  CHECK(cpu::onednn_cache().capacity == default_capacity);
}

// OpenBLAS has a thread pool of its own (OPENBLAS_NUM_THREADS, all cores by
// default). Phasor runs it on one thread and splits the work over its own
// pool, so a product at one thread (`--threads 1`) must take OpenBLAS to one
// thread too: it was left at its own count there, and ran on every core.
TEST_CASE("a product at one thread runs OpenBLAS on one thread too") {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    CAPTURE(dtype);
    openblas_set_num_threads(2);  // as a caller (or OpenBLAS's default) may have left it
    cpu::set_gemm_library(cpu::GemmLibrary::OpenBLAS);
    const Tensor c = ops::matmul(ones({256, 256}, dtype), ones({256, 256}, dtype));
    cpu::set_gemm_library(std::nullopt);
    CHECK(c.to(DType::Float64).to_vector<double>()[0] == 256.0);
    CHECK(openblas_get_num_threads() == 1);
  }
  omp_set_num_threads(threads);
}
