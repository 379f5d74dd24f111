// The device model of the CUDA simulator: a kernel's grid runs block by block
// (blocks in parallel on the OpenMP pool), each block's threads as fibers
// (ucontext) on one OS thread, switched at __syncthreads() and at the warp
// shuffles. Between two barriers a schedule orders the threads: in order and
// reversed run one warp at a time to the barrier (so a warp runs ahead of the
// others through its shuffles), warps in order or reversed; the seeded
// shuffle keeps all warps in lockstep at each shuffle, threads in a random order.
// Unless PHASOR_SIM_SCHEDULES=0, every launch runs under all three from the
// same memory and the results are compared bit for bit: a missing barrier or
// a warp-synchronous assumption shows as a difference naming the kernel.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <numeric>
#include <random>
#include <vector>

#include "device.h"
#include "internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define PHASOR_SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PHASOR_SIM_ASAN 1
#endif
#endif
#ifdef PHASOR_SIM_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

// The fiber switch: callee-saved registers, MXCSR and the x87 control word
// pushed on the old stack, the stack pointer saved, the new one loaded. No
// system call (swapcontext's signal-mask syscall made it 100 times slower).
//   void phasor_sim_switch(void** save_sp, void* load_sp);
#if !defined(__x86_64__)
#error "the CUDA simulator's fiber switch is written for x86-64"
#endif
asm(R"(
  .text
  .p2align 4
  .type phasor_sim_switch, @function
phasor_sim_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw (%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  fldcw (%rsp)
  ldmxcsr 8(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size phasor_sim_switch, .-phasor_sim_switch
)");
extern "C" void phasor_sim_switch(void** save_sp, void* load_sp);

namespace phasor::sim {

thread_local SimThread* current_thread = nullptr;
thread_local SimBlock* current_block = nullptr;

int max_dynamic_shared(const void* kernel);  // runtime.cpp
cudaError_t set_last_error(cudaError_t e);

namespace {

enum class State { Ready, Barrier, Warp, Done };
enum class Schedule { InOrder, Reversed, Shuffled };
const char* name(Schedule s) { return s == Schedule::InOrder ? "in-order" : s == Schedule::Reversed ? "reversed" : "shuffled"; }

#ifdef PHASOR_SIM_ASAN
constexpr size_t kStack = 512 * 1024;  // ASan's redzones make frames larger
#else
constexpr size_t kStack = 128 * 1024;
#endif

struct Fiber {
  void* sp = nullptr;  // saved stack pointer while switched out
  SimThread thread;
  State state = State::Ready;
  unsigned mask = 0;
  uint64_t seq = 0;  // shuffles done
  int lane = 0, warp = 0;
  char* stack = nullptr;
  void* fake_stack = nullptr;
};

// The state of the OS thread that runs blocks.
struct Worker {
  void* main_sp = nullptr;
  std::vector<Fiber> fibers;
  char* stacks = nullptr;
  size_t stacks_count = 0;
  SimBlock block;
  std::vector<unsigned char> shared;
  std::vector<uint64_t> slots;  // shuffle values: [warp][seq & 1][lane]
  Fiber* current = nullptr;
  void (*body)(const void*) = nullptr;
  const void* args = nullptr;
  std::string error;
  int64_t bytes_read = 0, bytes_written = 0, accesses = 0;  // the block's global accesses (global_access)
  const void* main_bottom = nullptr;
  size_t main_size = 0;
  void* main_fake = nullptr;

  void fail(const std::string& what) {
    if (error.empty()) error = what;
  }
  void reserve(size_t n) {
    if (n <= stacks_count) return;
    if (stacks) munmap(stacks, stacks_count * kStack);
    void* p = mmap(nullptr, n * kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "phasor: CUDA simulator: cannot map fiber stacks\n");
      std::abort();
    }
    stacks = static_cast<char*>(p);
    stacks_count = n;
  }
};
thread_local Worker* worker = nullptr;

Worker& this_worker() {
  if (!worker) worker = new Worker();  // one per OS thread, kept for its life
  return *worker;
}

// Switches between the scheduler (main) and a fiber, telling ASan which stack is live.
void enter(Worker& w, Fiber& f) {
  w.current = &f;
  current_thread = &f.thread;
#ifdef PHASOR_SIM_ASAN
  __sanitizer_start_switch_fiber(&w.main_fake, f.stack, kStack);
#endif
  phasor_sim_switch(&w.main_sp, f.sp);
#ifdef PHASOR_SIM_ASAN
  __sanitizer_finish_switch_fiber(w.main_fake, nullptr, nullptr);
#endif
}
void arrived(Worker& w, Fiber& f) {
#ifdef PHASOR_SIM_ASAN
  __sanitizer_finish_switch_fiber(f.fake_stack, &w.main_bottom, &w.main_size);
#else
  (void)w, (void)f;
#endif
}
void leave(Worker& w, Fiber& f) {
#ifdef PHASOR_SIM_ASAN
  __sanitizer_start_switch_fiber(f.state == State::Done ? nullptr : &f.fake_stack, w.main_bottom, w.main_size);
#endif
  phasor_sim_switch(&f.sp, w.main_sp);
  arrived(w, f);
}

void fiber_main() {
  Worker& w = *worker;
  Fiber& f = *w.current;
  arrived(w, f);
  w.body(w.args);
  f.state = State::Done;
  leave(w, f);  // never resumed
}

// A fresh fiber's stack, laid out as phasor_sim_switch leaves a switched-out
// one: its `ret` enters fiber_main as if called (which never returns).
void* initial_stack(char* stack) {
  auto* top = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(stack + kStack) & ~uintptr_t{15});
  top[-1] = 0;                                             // fiber_main's return address: none
  top[-2] = reinterpret_cast<uint64_t>(&fiber_main);       // popped by ret
  for (int r = 3; r <= 8; ++r) top[-r] = 0;                // rbp, rbx, r12-r15
  top[-9] = 0x1f80;                                        // MXCSR: round to nearest, exceptions masked
  top[-10] = 0x037f;                                       // x87 control word
  return top - 10;
}

std::string where(const Fiber& f) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "thread (%u, %u, %u)", f.thread.idx.x, f.thread.idx.y, f.thread.idx.z);
  return buf;
}

// Releases the warp of threads [base, base + lanes) if its lanes wait at a
// shuffle; reports a mask that does not cover exactly the lanes that reach it.
bool release_warp(Worker& w, int base, int lanes) {
  int first = -1;
  for (int l = 0; l < lanes && first < 0; ++l)
    if (w.fibers[base + l].state == State::Warp) first = l;
  if (first < 0) return false;
  const Fiber& lead = w.fibers[base + first];
  char buf[200];
  for (int l = 0; l < 32; ++l) {
    const bool in = (lead.mask >> l) & 1u;
    if (l >= lanes) {
      if (in) {
        std::snprintf(buf, sizeof buf, "a shuffle's mask 0x%08x covers lane %d of warp %d, which the block does not have", lead.mask, l, base / 32);
        w.fail(buf);
      }
      continue;
    }
    const Fiber& f = w.fibers[base + l];
    if (f.state == State::Warp) {
      if (f.mask != lead.mask || f.seq != lead.seq) {
        std::snprintf(buf, sizeof buf, "lanes %d and %d of warp %d reach a shuffle with different masks (0x%08x, 0x%08x) or at different calls",
                      first, l, base / 32, lead.mask, f.mask);
        w.fail(buf);
      }
    } else if (in) {
      std::snprintf(buf, sizeof buf, "a shuffle's mask 0x%08x covers lane %d of warp %d, which %s", lead.mask, l, base / 32,
                    f.state == State::Done ? "has exited" : "waits at __syncthreads()");
      w.fail(buf);
    }
  }
  if (!w.error.empty()) return false;
  for (int l = 0; l < lanes; ++l)
    if (w.fibers[base + l].state == State::Warp) w.fibers[base + l].state = State::Ready;
  return true;
}

bool release_warps(Worker& w, int n) {
  bool released = false;
  for (int base = 0; base < n && w.error.empty(); base += 32) released |= release_warp(w, base, std::min(32, n - base));
  return released;
}

// Runs each warp in turn, through its shuffles, until all its lanes wait at the
// barrier or have exited: warps in order (or reversed), lanes in order (or
// reversed) between shuffles. A warp thus runs ahead of the others from one
// barrier to the next, as on hardware, where nothing but a barrier orders warps.
void run_warps_serially(Worker& w, int n, bool reversed) {
  const int warps = (n + 31) / 32;
  for (int k = 0; k < warps && w.error.empty(); ++k) {
    const int base = 32 * (reversed ? warps - 1 - k : k), lanes = std::min(32, n - base);
    do {
      for (int l = 0; l < lanes && w.error.empty(); ++l) {
        Fiber& f = w.fibers[base + (reversed ? lanes - 1 - l : l)];
        if (f.state == State::Ready) enter(w, f);
      }
    } while (w.error.empty() && release_warp(w, base, lanes));
  }
}

void run_block(Worker& w, const LaunchConfig& c, uint3 block, Schedule schedule, uint64_t seed) {
  const int bx = static_cast<int>(c.block.x), by = static_cast<int>(c.block.y);
  const int n = bx * by * static_cast<int>(c.block.z);
  w.reserve(static_cast<size_t>(n));
  if (w.fibers.size() < static_cast<size_t>(n)) w.fibers.resize(static_cast<size_t>(n));
  w.slots.assign(static_cast<size_t>((n + 31) / 32) * 64, 0);
  w.shared.assign(c.shared, poison_enabled() ? kPoison : 0);
  w.block = SimBlock{block, c.block, c.grid, w.shared.data()};
  current_block = &w.block;
  for (int i = 0; i < n; ++i) {
    Fiber& f = w.fibers[i];
    f.thread.idx = uint3{static_cast<unsigned>(i % bx), static_cast<unsigned>((i / bx) % by), static_cast<unsigned>(i / (bx * by))};
    f.state = State::Ready;
    f.seq = 0;
    f.lane = i & 31;
    f.warp = i >> 5;
    f.stack = w.stacks + static_cast<size_t>(i) * kStack;
    f.fake_stack = nullptr;
    f.sp = initial_stack(f.stack);
  }
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed ^ (uint64_t{block.x} * 0x9E3779B97F4A7C15ull) ^ (uint64_t{block.y} << 40) ^ (uint64_t{block.z} << 52));
  for (;;) {
    if (schedule == Schedule::Shuffled) {  // all warps in lockstep, one shuffle at a time, threads in a random order
      std::shuffle(order.begin(), order.end(), rng);
      for (int i : order)
        if (w.fibers[i].state == State::Ready) enter(w, w.fibers[i]);
      if (!w.error.empty()) return;
      if (release_warps(w, n)) continue;
    } else {
      run_warps_serially(w, n, schedule == Schedule::Reversed);
    }
    if (!w.error.empty()) return;
    int live = 0, waiting = 0, shuffling = 0;
    for (int i = 0; i < n; ++i) {
      live += w.fibers[i].state != State::Done;
      waiting += w.fibers[i].state == State::Barrier;
      shuffling += w.fibers[i].state == State::Warp;
    }
    if (live == 0) return;
    if (waiting == live) {  // exited threads count as arrived, as on the hardware
      for (int i = 0; i < n; ++i)
        if (w.fibers[i].state == State::Barrier) w.fibers[i].state = State::Ready;
      continue;
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, "deadlock: %d threads wait at __syncthreads() while %d wait at a warp shuffle", waiting, shuffling);
    w.fail(buf);
    return;
  }
}

// What a grid's run under one schedule gave: "" or the first fault, and the
// global bytes its blocks read and wrote.
struct GridRun {
  std::string error;
  int64_t bytes_read = 0, bytes_written = 0, accesses = 0;
};
GridRun run_grid(const LaunchConfig& c, void (*body)(const void*), const void* args, Schedule schedule, uint64_t seed) {
  const int64_t gx = c.grid.x, gy = c.grid.y, total = gx * gy * static_cast<int64_t>(c.grid.z);
  std::mutex m;
  std::string first;
  std::atomic<bool> failed{false};
  std::atomic<int64_t> bytes_read{0}, bytes_written{0}, accesses{0};
#pragma omp parallel for schedule(dynamic, 1) if (total > 1)
  for (int64_t b = 0; b < total; ++b) {
    if (failed.load(std::memory_order_relaxed)) continue;
    Worker& w = this_worker();
    w.body = body;
    w.args = args;
    w.error.clear();
    w.bytes_read = w.bytes_written = w.accesses = 0;
    const uint3 block{static_cast<unsigned>(b % gx), static_cast<unsigned>((b / gx) % gy), static_cast<unsigned>(b / (gx * gy))};
    run_block(w, c, block, schedule, seed);
    bytes_read.fetch_add(w.bytes_read, std::memory_order_relaxed);
    bytes_written.fetch_add(w.bytes_written, std::memory_order_relaxed);
    accesses.fetch_add(w.accesses, std::memory_order_relaxed);
    current_block = nullptr;
    current_thread = nullptr;
    if (!w.error.empty()) {
      std::lock_guard<std::mutex> g(m);
      if (first.empty()) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "block (%u, %u, %u), %s schedule: ", block.x, block.y, block.z, name(schedule));
        first = buf + w.error;
      }
      failed = true;
    }
  }
  return {first, bytes_read.load(), bytes_written.load(), accesses.load()};
}

// The device allocations a launch can reach: those its argument bytes point into.
std::vector<Region> reachable(const void* args, size_t bytes) {
  std::vector<Region> out;
  const char* p = static_cast<const char*>(args);
  for (size_t off = 0; off + sizeof(void*) <= bytes; off += alignof(void*)) {
    void* v;
    std::memcpy(&v, p + off, sizeof v);
    Region r;
    if (v && find_allocation(v, r) && std::none_of(out.begin(), out.end(), [&](const Region& o) { return o.base == r.base; }))
      out.push_back(r);
  }
  return out;
}

using Snapshot = std::vector<std::vector<char>>;
Snapshot take(const std::vector<Region>& rs) {
  Snapshot s;
  for (const Region& r : rs) s.emplace_back(r.base, r.base + r.size);
  return s;
}
void put(const std::vector<Region>& rs, const Snapshot& s) {
  for (size_t i = 0; i < rs.size(); ++i) std::memcpy(rs[i].base, s[i].data(), rs[i].size);
}

void execute(const LaunchConfig& c, void (*body)(const void*), const void* bound, const void* args, size_t args_bytes, uint64_t seed) {
  static const bool schedules = check_enabled("PHASOR_SIM_SCHEDULES");
  const std::vector<Region> regions = schedules ? reachable(args, args_bytes) : std::vector<Region>{};
  const Snapshot before = regions.empty() ? Snapshot{} : take(regions);
  const GridRun first = run_grid(c, body, bound, Schedule::InOrder, seed);
  record_traffic(c.name, first.bytes_read, first.bytes_written, first.accesses);  // once, not once per schedule
  std::string error = first.error;
  if (!regions.empty()) {
    const Snapshot reference = error.empty() ? take(regions) : Snapshot{};
    for (Schedule s : {Schedule::Reversed, Schedule::Shuffled}) {
      if (!error.empty()) break;
      put(regions, before);
      error = run_grid(c, body, bound, s, seed).error;
      if (!error.empty()) break;
      for (size_t i = 0; i < regions.size() && error.empty(); ++i) {
        const char* now = regions[i].base;
        const auto diff = std::mismatch(reference[i].begin(), reference[i].end(), now).first - reference[i].begin();
        if (static_cast<size_t>(diff) != regions[i].size) {
          char buf[240];
          std::snprintf(buf, sizeof buf,
                        "its results differ between the in-order and the %s schedule of its threads (byte %zu of a %zu-byte allocation): "
                        "a missing __syncthreads() or a warp-synchronous assumption",
                        name(s), static_cast<size_t>(diff), regions[i].size);
          error = buf;
        }
      }
    }
  }
  if (!error.empty()) record_failure(std::string(c.name) + ": " + error);
}

}  // namespace

void syncthreads() {
  Worker& w = *worker;
  Fiber& f = *w.current;
  f.state = State::Barrier;
  leave(w, f);
}

void global_access(const void* p, size_t bytes, bool write) {
  Worker& w = *worker;
  (write ? w.bytes_written : w.bytes_read) += static_cast<int64_t>(bytes);
  ++w.accesses;
  if (reinterpret_cast<uintptr_t>(p) % bytes != 0) {  // the hardware's "misaligned address"
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s makes a misaligned %zu-byte %s of global memory at %p", where(*w.current).c_str(), bytes,
                  write ? "store" : "load", p);
    w.fail(buf);
  }
}

void shuffle(unsigned mask, const void* in, void* out, size_t bytes, Shfl kind, int arg) {
  Worker& w = *worker;
  Fiber& f = *w.current;
  char buf[160];
  if (!((mask >> f.lane) & 1u)) {
    std::snprintf(buf, sizeof buf, "%s (lane %d) reaches a shuffle whose mask 0x%08x does not cover it", where(f).c_str(), f.lane, mask);
    w.fail(buf);
  }
  uint64_t* slot = &w.slots[(static_cast<size_t>(f.warp) * 2 + (f.seq & 1)) * 32];
  std::memcpy(&slot[f.lane], in, bytes);
  f.mask = mask;
  f.state = State::Warp;
  leave(w, f);
  int src = kind == Shfl::Down ? f.lane + arg : f.lane ^ arg;
  if (src < 0 || src >= 32) src = f.lane;  // past the warp: the lane's own value
  if (!((mask >> src) & 1u)) {
    std::snprintf(buf, sizeof buf, "%s reads lane %d in a shuffle whose mask 0x%08x does not cover it", where(f).c_str(), src, mask);
    w.fail(buf);
  }
  std::memcpy(out, &slot[src], bytes);
  ++f.seq;
}

bool launch_ok(const LaunchConfig& c) {
  const dim3 b = c.block, g = c.grid;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (b.x == 0 || b.y == 0 || b.z == 0 || b.x > 1024 || b.y > 1024 || b.z > 64 || threads > 1024 || g.x == 0 || g.y == 0 || g.z == 0 ||
      g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535) {
    set_last_error(cudaErrorInvalidConfiguration);
    return false;
  }
  if (c.shared > static_cast<size_t>(max_dynamic_shared(c.kernel))) {  // over 48 KiB only after cudaFuncSetAttribute
    set_last_error(cudaErrorInvalidValue);
    return false;
  }
  return true;
}

void enqueue_kernel(const LaunchConfig& c, std::shared_ptr<const void> bound, const void* args, size_t args_bytes,
                    void (*body)(const void*)) {
  static std::atomic<uint64_t> launches{0};
  const uint64_t seed = 0x5EEDull + launches++;
  count_launch();
  enqueue(c.stream, [c, bound, args, args_bytes, body, seed] { execute(c, body, bound.get(), args, args_bytes, seed); });
}

}  // namespace phasor::sim
