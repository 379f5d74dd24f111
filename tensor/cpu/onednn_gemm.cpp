// float32 GEMMs on oneDNN (see onednn_gemm.h).
//
// A product is one matmul primitive: op(A) and op(B) are described by their
// strides (a transpose is a stride swap, never a copy) and a batch whose items
// sit at a constant distance is one 3-D primitive, otherwise a 2-D one run per
// item. Primitives are created once per shape, layout and thread count and
// kept: a training step repeats the same few dozen shapes, and creating one
// (JIT code) costs far more than running a small one. They are kept in an LRU
// cache of kCacheCapacity entries, the only cache: oneDNN's own (1,024
// primitives by default) is turned off, or it would keep what ours dropped.
// So a process that meets ever new shapes stays bounded (2,000 products
// [m, 64] x [64, 64], m = 200..2199: +11 MB of RSS, flat from the 500th on;
// with both caches unbounded by this, +100 MB and growing). oneDNN here runs on
// libgomp, Phasor's own OpenMP pool (the same one its kernels use), with as
// many threads as the caller asks, set both where a primitive is made (some
// size their team then: the gemm-based batched matmul below AVX-512) and where
// it runs; its partition of the work depends only on the shape and the thread
// count, so results are the same bits run after run. That the thread count is
// part of the key is also what keeps a forked child (one thread, fork.h) off
// a primitive its parent made for its team.
#include "tensor/cpu/onednn_gemm.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#ifdef PHASOR_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <exception>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "tensor/cpu/lru_cache.h"
#endif

namespace phasor::cpu {

namespace {

// The library forced by PHASOR_GEMM or set_gemm_library, if any: -1 none (the
// shape policy decides; the default), else a GemmLibrary.
std::atomic<int>& forced() {
  static std::atomic<int> value = [] {
    const char* env = std::getenv("PHASOR_GEMM");
    if (env == nullptr || *env == '\0' || std::strcmp(env, "auto") == 0) return -1;
    if (std::strcmp(env, "openblas") == 0) return static_cast<int>(GemmLibrary::OpenBLAS);
    if (std::strcmp(env, "onednn") == 0) return static_cast<int>(GemmLibrary::OneDNN);
    throw std::invalid_argument("PHASOR_GEMM is '" + std::string(env) + "': expected auto, openblas or onednn");
  }();
  return value;
}

bool forced_to(GemmLibrary lib) { return forced().load(std::memory_order_relaxed) == static_cast<int>(lib); }
bool forced_any() { return forced().load(std::memory_order_relaxed) >= 0; }

}  // namespace

void set_gemm_library(std::optional<GemmLibrary> library) {
  forced().store(library ? static_cast<int>(*library) : -1, std::memory_order_relaxed);
}

#ifndef PHASOR_HAVE_ONEDNN

bool onednn_available() { return false; }

bool onednn_gemm_f32(float*, const GemmPlan&, int) {
  if (forced_to(GemmLibrary::OneDNN))
    throw std::invalid_argument("PHASOR_GEMM=onednn, but this build of Phasor has no oneDNN (install libdnnl-dev and rebuild)");
  return false;
}

bool onednn_gemm_bf16(void*, DType, const GemmPlan&, int) { return false; }

OneDnnCache onednn_cache() { return {}; }

void set_onednn_cache_capacity(size_t) {}

#else

namespace {

using dnnl::memory;

// Below this many multiply-adds OpenBLAS wins: a primitive's execute costs a
// few microseconds of its own (docs/benchmarks.md, "GEMM library per shape").
constexpr int64_t kOneDnnMinWork = int64_t{1} << 16;

// Primitives kept: several times the distinct products of a training step.
constexpr size_t kCacheCapacity = 256;

// One operand as oneDNN sees it: element (i, j) of op(X) at i * rows + j * cols.
struct Layout {
  int64_t rows = 0, cols = 0, batch = 0;  // strides; batch 0: shared by every item
};

Layout layout_of(const GemmOperand& g) {
  Layout l;
  if (g.op == BlasOp::N) l.rows = g.ld, l.cols = 1;
  else l.rows = 1, l.cols = g.ld;
  return l;
}

// The constant distance between batch items, if there is one.
bool constant_stride(const std::vector<int64_t>& offsets, int64_t* stride) {
  *stride = offsets.size() > 1 ? offsets[1] - offsets[0] : 0;
  for (size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] - offsets[i - 1] != *stride) return false;
  return *stride >= 0;
}

struct Key {
  int64_t batch, m, n, k;
  Layout a, b;
  int threads;
  memory::data_type in, out;  // the operands' type (both), the result's
  bool operator==(const Key& o) const {
    return batch == o.batch && m == o.m && n == o.n && k == o.k && a.rows == o.a.rows && a.cols == o.a.cols &&
           a.batch == o.a.batch && b.rows == o.b.rows && b.cols == o.b.cols && b.batch == o.b.batch && threads == o.threads &&
           in == o.in && out == o.out;
  }
};
struct KeyHash {
  size_t operator()(const Key& key) const {
    size_t h = 0;
    for (int64_t v : {key.batch, key.m, key.n, key.k, key.a.rows, key.a.cols, key.a.batch, key.b.rows, key.b.cols, key.b.batch,
                      static_cast<int64_t>(key.threads), static_cast<int64_t>(key.in), static_cast<int64_t>(key.out)})
      h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

memory::desc operand_desc(int64_t batch, int64_t rows, int64_t cols, const Layout& l, memory::data_type type) {
  if (batch == 1) return memory::desc({rows, cols}, type, {l.rows, l.cols});
  return memory::desc({l.batch == 0 ? 1 : batch, rows, cols}, type, {l.batch, l.rows, l.cols});
}

// Runs `work` on a new thread and waits for it, passing on what it throws.
// glibc gives that thread an arena of its own, so what a primitive allocates
// for good (its objects, its JIT code) stays out of the main heap: made in the
// middle of the first step, between the tensors' blocks, those small permanent
// objects would split the free blocks every later step reuses (measured in
// docs/benchmarks.md, "Weight gradients on oneDNN, and peak RSS"). Where no
// thread can be started (a process at its thread limit), `work` runs here:
// the same result, only the heap less tidy.
template <class Work>
void on_thread_of_its_own(Work&& work) {
  std::exception_ptr failure;
  std::thread helper;
  try {
    helper = std::thread([&] {
      try {
        work();
      } catch (...) {
        failure = std::current_exception();
      }
    });
  } catch (const std::system_error&) {
    work();
    return;
  }
  helper.join();
  if (failure) std::rethrow_exception(failure);
}

class OneDnn {
 public:
  OneDnn() { dnnl::set_primitive_cache_capacity(0); }  // ours is the cache (above)

  // Runs one (batched) product; `a`, `b` point at the first item's operands.
  // Returns false, having done nothing, when this CPU has no kernel for the
  // types (bf16 needs AVX-512; oneDNN says "unimplemented" elsewhere).
  bool run(const Key& key, const void* a, const void* b, void* c) {
    std::lock_guard<std::mutex> lock(mutex_);  // the cache and the stream are shared: one product at a time
    Entry* found = cache_.find(key);
    if (found == nullptr) {
      const memory::desc a_md = operand_desc(key.batch, key.m, key.k, key.a, key.in);
      const memory::desc b_md = operand_desc(key.batch, key.k, key.n, key.b, key.in);
      const memory::desc c_md = key.batch == 1 ? memory::desc({key.m, key.n}, key.out, memory::format_tag::ab)
                                               : memory::desc({key.batch, key.m, key.n}, key.out, memory::format_tag::abc);
      // The scratchpad (packed copies of the operands) is ours to give, so it
      // comes from Phasor's allocator for the one product and goes back to the
      // heap after it, rather than one buffer per primitive held for good.
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      Entry entry{std::nullopt, a_md, b_md, c_md, {}};
      on_thread_of_its_own([&] {
        // A new thread starts from libgomp's default count, not the caller's.
        omp_set_num_threads(key.threads);
        try {
          const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine_);
          entry.primitive = dnnl::matmul(pd);
          entry.scratchpad = pd.scratchpad_desc();
        } catch (const dnnl::error& e) {
          if (e.status != dnnl_unimplemented) throw;
        }
      });
      ++made_;
      found = &cache_.insert(key, std::move(entry));
    }
    const Entry& e = *found;
    if (!e.primitive) return false;
    memory am(e.a, engine_, const_cast<void*>(a)), bm(e.b, engine_, const_cast<void*>(b)), cm(e.c, engine_, c);
    const size_t scratch_bytes = e.scratchpad.get_size();
    const Tensor scratch = empty({static_cast<int64_t>(scratch_bytes)}, DType::Bool);
    memory sm(e.scratchpad, engine_, scratch_bytes > 0 ? scratch.raw_data() : nullptr);
    // oneDNN's OpenMP runtime takes omp_get_max_threads() threads: the caller's count.
    const int saved = omp_get_max_threads();
    if (saved != key.threads) omp_set_num_threads(key.threads);
    e.primitive->execute(stream_, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, sm}});
    stream_.wait();
    if (saved != key.threads) omp_set_num_threads(saved);
    return true;
  }

  OneDnnCache cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {cache_.size(), cache_.capacity(), made_};
  }
  void set_cache_capacity(size_t entries) {
    std::lock_guard<std::mutex> lock(mutex_);
    cache_.set_capacity(entries);
  }

 private:
  struct Entry {
    std::optional<dnnl::matmul> primitive;  // none: not implemented on this CPU
    memory::desc a, b, c, scratchpad;
  };
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::mutex mutex_;
  LruCache<Key, Entry, KeyHash> cache_{kCacheCapacity};
  uint64_t made_ = 0;
};

OneDnn& onednn() {
  static OneDnn instance;
  return instance;
}

bool policy_picks_onednn(const GemmPlan& p) {
  if (forced_any()) return forced_to(GemmLibrary::OneDNN);
  return static_cast<int64_t>(p.a.offsets.size()) * p.m * p.n * p.k >= kOneDnnMinWork;
}

// The plan as one primitive (a constant-stride batch) or one per item.
bool run_plan(void* out, const GemmPlan& p, int threads, memory::data_type in, memory::data_type out_type) {
  const int64_t batch = static_cast<int64_t>(p.a.offsets.size());
  const int64_t in_size = static_cast<int64_t>(itemsize(p.a.t.dtype())), out_size = out_type == memory::data_type::f32 ? 4 : 2;
  Layout a = layout_of(p.a), b = layout_of(p.b);
  const char* pa = static_cast<const char*>(p.a.t.raw_data());
  const char* pb = static_cast<const char*>(p.b.t.raw_data());
  char* pc = static_cast<char*>(out);
  const bool one_primitive = constant_stride(p.a.offsets, &a.batch) && constant_stride(p.b.offsets, &b.batch) &&
                             (batch == 1 || a.batch != 0);  // oneDNN broadcasts the weights' batch, not the source's
  if (one_primitive)
    return onednn().run(Key{batch, p.m, p.n, p.k, a, b, threads, in, out_type}, pa + p.a.offsets[0] * in_size,
                        pb + p.b.offsets[0] * in_size, pc);
  a.batch = b.batch = 0;
  for (int64_t i = 0; i < batch; ++i)
    if (!onednn().run(Key{1, p.m, p.n, p.k, a, b, threads, in, out_type}, pa + p.a.offsets[i] * in_size, pb + p.b.offsets[i] * in_size,
                      pc + i * p.m * p.n * out_size))
      return false;  // only the first item can fail: every item has the same key
  return true;
}

bool plan_expressible(const GemmPlan& p) {
  return p.m > 0 && p.n > 0 && p.k > 0 && p.a.op != BlasOp::C && p.b.op != BlasOp::C;
}

}  // namespace

bool onednn_available() { return true; }

OneDnnCache onednn_cache() { return onednn().cache(); }

void set_onednn_cache_capacity(size_t entries) { onednn().set_cache_capacity(entries); }

bool onednn_gemm_f32(float* out, const GemmPlan& p, int threads) {
  if (!plan_expressible(p) || !policy_picks_onednn(p)) return false;
  return run_plan(out, p, threads, memory::data_type::f32, memory::data_type::f32);
}

bool onednn_gemm_bf16(void* out, DType out_dtype, const GemmPlan& p, int threads) {
  if (!plan_expressible(p) || forced_to(GemmLibrary::OpenBLAS)) return false;
  return run_plan(out, p, threads, memory::data_type::bf16,
                  out_dtype == DType::Float32 ? memory::data_type::f32 : memory::data_type::bf16);
}

#endif

}  // namespace phasor::cpu
