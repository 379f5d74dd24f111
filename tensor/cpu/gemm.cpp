// GEMM on OpenBLAS (float32 on oneDNN where the shape says so, bfloat16 on
// oneDNN where the CPU has its kernels: onednn_gemm.h):
// one cblas_?gemm per batch item of the plan that the
// matmul front-end (tensor/linalg.cpp) made; transposes and conjugate
// transposes are BLAS flags, never copies. CUDA twin: cuda/gemm.cpp.
//
// One thread pool. OpenBLAS runs single-threaded (set on every call) and the
// work is split here, over Phasor's own OpenMP threads: a batch over its
// items, one large product into blocks of rows (or of columns, when it is
// wider than tall) of C, one cblas call per block. OpenBLAS's own pthread pool
// would otherwise spin beside the OpenMP workers on the same cores between
// every two GEMMs of a step (docs/benchmarks.md, "One thread pool"). The
// blocks depend only on the shape and the thread count, so results are the
// same bits run after run (OpenBLAS's edge kernels may round the last rows of
// a block differently, so a different thread count may change the last bit).
#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "tensor/cpu/backend.h"
#include "tensor/cpu/onednn_gemm.h"

namespace phasor::cpu {

namespace {

// Below this many multiply-adds a product runs on the calling thread: waking
// the pool costs more than it saves.
constexpr int64_t kGemmParallelWork = int64_t{1} << 18;
// The narrowest block of rows or columns a thread takes.
constexpr int64_t kMinBlock = 16;

CBLAS_TRANSPOSE flag(BlasOp op) { return op == BlasOp::N ? CblasNoTrans : op == BlasOp::T ? CblasTrans : CblasConjTrans; }

// cblas takes 32-bit ints (LP64): each size is narrowed through blas_int, which
// refuses rather than wraps (the front-end, tensor/linalg.cpp, splits or copies first).
template <class T>
void gemm_one(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m64, int64_t n64, int64_t k64, const T* a, int64_t lda64, const T* b,
              int64_t ldb64, T* c, int64_t ldc64) {
  const int m = blas_int(m64, "m"), n = blas_int(n64, "n"), k = blas_int(k64, "k");
  const int lda = blas_int(lda64, "lda"), ldb = blas_int(ldb64, "ldb"), ldc = blas_int(ldc64, "ldc");
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
  } else if constexpr (std::is_same_v<T, c64>) {
    const c64 one(1), zero(0);
    cblas_cgemm(CblasRowMajor, ta, tb, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc);
  } else {
    const c128 one(1), zero(0);
    cblas_zgemm(CblasRowMajor, ta, tb, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc);
  }
}

// One product C = op(A) op(B), row-major, and the blocks it splits into.
template <class T>
struct Product {
  BlasOp op_a, op_b;
  int64_t m, n, k;
  const T* a;
  int64_t lda;
  const T* b;
  int64_t ldb;
  T* c;
  int64_t ldc;

  void run() const { gemm_one<T>(flag(op_a), flag(op_b), m, n, k, a, lda, b, ldb, c, ldc); }
  // Rows [r0, r1) of C: rows of op(A), which are columns of A when it is transposed.
  void run_rows(int64_t r0, int64_t r1) const {
    if (r1 <= r0) return;
    const T* a_block = a + (op_a == BlasOp::N ? r0 * lda : r0);
    gemm_one<T>(flag(op_a), flag(op_b), r1 - r0, n, k, a_block, lda, b, ldb, c + r0 * ldc, ldc);
  }
  // Columns [c0, c1) of C: columns of op(B), which are rows of B when it is transposed.
  void run_columns(int64_t c0, int64_t c1) const {
    if (c1 <= c0) return;
    const T* b_block = b + (op_b == BlasOp::N ? c0 : c0 * ldb);
    gemm_one<T>(flag(op_a), flag(op_b), m, c1 - c0, k, a, lda, b_block, ldb, c + c0, ldc);
  }
};

// The elements of a plan's operand, from its first to its last, as a flat
// float32 copy: the same offsets and leading dimension then address it.
Tensor widened(CpuBackend& cpu, const GemmOperand& g, int64_t rows, int64_t cols) {
  const int64_t stored_rows = g.op == BlasOp::N ? rows : cols, stored_cols = g.op == BlasOp::N ? cols : rows;
  const int64_t span = *std::max_element(g.offsets.begin(), g.offsets.end()) + (stored_rows - 1) * g.ld + stored_cols;
  Tensor wide = empty({span}, DType::Float32);
  cpu.copy(wide, as_strided(g.t, {span}, {1}, g.t.offset()));
  return wide;
}

}  // namespace

// bfloat16 operands: on oneDNN (float32 accumulation), else widened to
// float32 and run as float32 (the same products, exact in float32; only the
// order of the sums may differ), then narrowed if `out` is bfloat16.
void CpuBackend::gemm_bf16(const Tensor& out, const GemmPlan& p) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (!omp_in_parallel() && onednn_gemm_bf16(out.raw_data(), out.dtype(), p, threads)) return;
  GemmPlan wide = p;
  wide.a.t = widened(*this, p.a, p.m, p.k);
  wide.b.t = widened(*this, p.b, p.k, p.n);
  if (out.dtype() == DType::Float32) return gemm(out, wide);
  const Tensor out32 = empty(out.shape(), DType::Float32);
  gemm(out32, wide);
  copy(out, out32);
}

void CpuBackend::gemm(const Tensor& out, const GemmPlan& p) {
  if (p.a.t.dtype() == DType::BFloat16) return gemm_bf16(out, p);
  dispatch_inexact(out.dtype(), "matmul", [&]<class T>() {
    const T* pa = p.a.t.template data<T>();
    const T* pb = p.b.t.template data<T>();
    T* pc = out.data<T>();
    const int64_t batch = static_cast<int64_t>(p.a.offsets.size());
    auto product = [&](int64_t i) {
      return Product<T>{p.a.op, p.b.op, p.m, p.n, p.k, pa + p.a.offsets[i], p.a.ld, pb + p.b.offsets[i], p.b.ld, pc + i * p.m * p.n, p.n};
    };
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    // float32 goes to oneDNN where it is faster (onednn_gemm.h); not from inside a
    // parallel region, where each caller's thread runs its own product here.
    if constexpr (std::is_same_v<T, float>)
      if (!omp_in_parallel() && onednn_gemm_f32(pc, p, threads)) return;
    // OpenBLAS may have threads of its own (OPENBLAS_NUM_THREADS, its default of
    // every core, a caller's openblas_set_num_threads): take them back, at one
    // thread (--threads 1) too. Not from inside a parallel region, where every
    // thread of the team would set it at once.
    if (!omp_in_parallel() && openblas_get_num_threads() != 1) openblas_set_num_threads(1);
    const int64_t work = batch * p.m * p.n * p.k;
    const int64_t widest = std::max(p.m, p.n);
    if (threads == 1 || work < kGemmParallelWork || (batch < threads && widest < 2 * kMinBlock)) {
      for (int64_t i = 0; i < batch; ++i) product(i).run();
    } else if (batch >= threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
      for (int64_t i = 0; i < batch; ++i) product(i).run();
    } else {
      // Few large products: each is split across every thread, along its longer side.
      const bool by_rows = p.m >= p.n;
      const int64_t blocks = std::min<int64_t>(threads, widest / kMinBlock);
#pragma omp parallel num_threads(static_cast<int>(blocks))
      {
        // Block edges on multiples of kMinBlock, where OpenBLAS's micro-kernels tile.
        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads(), units = (widest + kMinBlock - 1) / kMinBlock;
        const int64_t begin = std::min(widest, units * t / nt * kMinBlock), end = std::min(widest, units * (t + 1) / nt * kMinBlock);
        for (int64_t i = 0; i < batch; ++i) {
          const Product<T> prod = product(i);
          if (by_rows) prod.run_rows(begin, end);
          else prod.run_columns(begin, end);
        }
      }
    }
  });
}

}  // namespace phasor::cpu
