// The GEMM libraries run on the thread count Phasor gives them (the caller's
// omp_set_num_threads, `--threads`), on every path a product can take: oneDNN
// 2-D and batched, float32 and bfloat16, OpenBLAS.
//
// Two consequences are checked. A product at one thread starts no thread of
// its own (oneDNN made its primitives on a helper thread, which read libgomp's
// default count instead). And a child forked after a product runs the same
// product: the OpenMP pool does not survive fork, the child's first op drops
// it to one thread (tensor/cpu/fork.h), and a library that sized its team
// before the fork, or on another thread, hangs there.
//
// oneDNN picks its kernels for the CPU: on AVX-512 its brgemm matmul takes
// float32 and bfloat16 and sizes its team when it runs; below
// (DNNL_MAX_CPU_ISA=AVX2, as on an AMD EPYC without AVX-512) its gemm-based
// matmul runs a batch on a team sized when the primitive was made. Each case
// therefore runs in a fresh process (oneDNN reads the ISA once, and libgomp's
// pool starts empty there), forked from this one, which itself runs no
// product. Every wait has a deadline and kills a process that hangs, so a
// regression fails here instead of hanging the suite.
#include <doctest/doctest.h>
#include <dirent.h>
#include <omp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "phasor.h"
#include "tensor/cpu/onednn_gemm.h"

using namespace phasor;

namespace {

// Small integers (-2..2): every product and sum below is exact in float32 (and
// the operands in bfloat16), so a result must equal another to the bit
// whatever the thread count.
Tensor small_integers(const Dims& shape, DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>((i * 7 + i / 5) % 5 - 2);
  return from_vector<float>(v, shape).to(dtype);
}

struct Product {
  Dims a, b;
  DType dtype;
  std::optional<cpu::GemmLibrary> library;  // none: the shape policy picks
};

const std::vector<Product>& every_path() {
  using L = cpu::GemmLibrary;
  static const std::vector<Product> products = {
      {{256, 64}, {64, 128}, DType::Float32, std::nullopt},       // oneDNN, 2-D
      {{8, 64, 64}, {8, 64, 64}, DType::Float32, std::nullopt},   // oneDNN, one batched primitive
      {{256, 64}, {64, 128}, DType::BFloat16, std::nullopt},      // bfloat16, 2-D (oneDNN, or widened to float32)
      {{8, 64, 64}, {8, 64, 64}, DType::BFloat16, std::nullopt},  // bfloat16, batched
      {{256, 64}, {64, 512}, DType::Float32, L::OpenBLAS},        // OpenBLAS, one product split in blocks
      {{8, 64, 64}, {8, 64, 64}, DType::Float32, L::OpenBLAS},    // OpenBLAS, a batch over the threads
      {{256, 64}, {64, 512}, DType::Float64, std::nullopt},       // OpenBLAS, float64
  };
  return products;
}

std::vector<float> run(const Product& p, const Tensor& a, const Tensor& b) {
  cpu::set_gemm_library(p.library);
  const Tensor c = ops::matmul(a, b).to(DType::Float32);
  cpu::set_gemm_library(std::nullopt);
  return c.to_vector<float>();
}

std::vector<float> run(const Product& p) { return run(p, small_integers(p.a, p.dtype), small_integers(p.b, p.dtype)); }

// Exit statuses of the processes below.
enum Outcome { kDone = 0, kHung = 1, kThrew = 2, kDiffers = 3, kDied = 4, kNoFork = 5, kExtraThreads = 6 };

const char* describe(int outcome) {
  switch (outcome) {
    case kDone: return "";
    case kHung: return "hung";
    case kThrew: return "threw";
    case kDiffers: return "gave another result";
    case kDied: return "died of a signal";
    case kExtraThreads: return "started threads of its own";
    default: return "could not fork";
  }
}

// Runs `body` in a forked process that dies with this one, and returns its
// exit status; kHung, having killed it, when it runs past `deadline`.
template <class Body>
int in_own_process(std::chrono::seconds deadline, Body&& body) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return kNoFork;
  if (pid == 0) {
    int status = kThrew;
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 && getppid() == parent) {
      try {
        status = body();
      } catch (...) {
      }
    }
    _exit(status);
  }
  int status = 0;
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : kDied;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return kHung;
}

// A case's process: oneDNN's ISA capped at `max_isa` (null: the CPU's own)
// before oneDNN's first use, then `body`. Its child, if it forks one, gets
// the shorter deadline, so that the case's process reports a hung child itself.
// Forked, it is itself a forked child: its first op drops it to one thread,
// and OpenBLAS starts its pool again when its thread count is first set
// (tensor/cpu/fork.h, gemm.cpp). A small product on OpenBLAS does both here,
// before `body` sets a thread count or counts threads.
template <class Body>
std::string in_fresh_process(const char* max_isa, Body&& body) {
  return describe(in_own_process(std::chrono::seconds(90), [&] {
    if (max_isa != nullptr) setenv("DNNL_MAX_CPU_ISA", max_isa, 1);
    (void)ops::matmul(ones({2, 2}, DType::Float64), ones({2, 2}, DType::Float64));
    return body();
  }));
}

constexpr std::chrono::seconds kChildDeadline{45};

int threads_of_this_process() {
  int n = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (const dirent* e = readdir(dir))
    if (e->d_name[0] != '.') ++n;
  closedir(dir);
  return n;
}

// `p` on one thread; kExtraThreads if a thread it started outlives it (a
// joined helper may take a moment to leave /proc; a pool's threads stay).
int runs_on_one_thread(const Product& p) {
  omp_set_num_threads(1);
  const Tensor a = small_integers(p.a, p.dtype), b = small_integers(p.b, p.dtype);
  const int before = threads_of_this_process();
  (void)run(p, a, b);
  for (int waited_ms = 0; waited_ms < 2000; waited_ms += 10) {
    if (threads_of_this_process() == before) return kDone;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return kExtraThreads;
}

// `p` on 2 threads, then the same in a forked child, which must give the same bits.
int forked_child_reruns(const Product& p) {
  omp_set_num_threads(2);
  const std::vector<float> want = run(p);
  return in_own_process(kChildDeadline, [&] { return run(p) == want ? kDone : kDiffers; });
}

std::vector<const char*> isas() {
  if (!cpu::onednn_available()) return {nullptr};
  return {nullptr, "AVX2"};
}

}  // namespace

TEST_CASE("a product on one thread starts no thread: every GEMM library, 2-D and batched, float32 and bfloat16") {
  for (const char* max_isa : isas())
    for (const Product& p : every_path()) {
      CAPTURE(std::string(max_isa ? max_isa : "native"));
      CAPTURE(p.a);
      CAPTURE(p.b);
      CAPTURE(std::string(dtype_name(p.dtype)));
      CAPTURE(p.library ? static_cast<int>(*p.library) : -1);
      CHECK(in_fresh_process(max_isa, [&] { return runs_on_one_thread(p); }) == "");
    }
}

TEST_CASE("a child forked after a product runs the same product: every GEMM library, 2-D and batched, float32 and bfloat16") {
  for (const char* max_isa : isas())
    for (const Product& p : every_path()) {
      CAPTURE(std::string(max_isa ? max_isa : "native"));
      CAPTURE(p.a);
      CAPTURE(p.b);
      CAPTURE(std::string(dtype_name(p.dtype)));
      CAPTURE(p.library ? static_cast<int>(*p.library) : -1);
      CHECK(in_fresh_process(max_isa, [&] { return forked_child_reruns(p); }) == "");
    }
}
