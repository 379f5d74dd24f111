// The device model of the CUDA simulator: a kernel's grid runs block by block
// (blocks in parallel on the OpenMP pool), each block's threads as fibers
// (ucontext) on one OS thread, switched at __syncthreads() and at the warp
// shuffles. Between two barriers a schedule orders the threads: in order and
// reversed run one warp at a time to the barrier (so a warp runs ahead of the
// others through its shuffles), warps in order or reversed; the seeded
// shuffle keeps all warps in lockstep at each shuffle, threads in a random order.
// Unless PHASOR_SIM_SCHEDULES=0, every launch runs under all three from the
// same memory and the results are compared bit for bit: a missing barrier or
// a warp-synchronous assumption shows as a difference naming the kernel. The
// reversed and shuffled schedules also run the blocks in another order
// (reversed, seeded shuffle; PHASOR_SIM_BLOCK_ORDER=0 keeps them in order),
// so blocks that depend on each other's writes show the same way.
//
// What a GPU faults on ends the thread that does it (end_thread) and is
// reported: a counted global access outside live device memory or off its
// alignment, a read or write past the launch's dynamic shared memory (a
// SIGSEGV on the guard page after it, caught here), a pointer parameter that
// points into no live device memory.
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>
#include <vector>

#include "device.h"
#include "internal.h"
#include "races.h"
#include "shared_memory.h"

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
  const char* barrier_file = nullptr;  // the __syncthreads() it waits at
  int barrier_line = 0;
  char* stack = nullptr;
  void* fake_stack = nullptr;
};

// What every block of a launch shares: the device memory its arguments point
// into (where a counted access is looked up first), and, on the first
// schedule, the counted accesses of its blocks (cuda/sim/races.h).
struct LaunchContext {
  std::vector<Region> regions;
  bool record_accesses = false;
};

// The state of the OS thread that runs blocks.
struct Worker {
  void* main_sp = nullptr;
  std::vector<Fiber> fibers;
  char* stacks = nullptr;
  size_t stacks_count = 0;
  SimBlock block;
  BlockSharedMemory shared;
  std::vector<uint64_t> slots;  // shuffle values: [warp][seq & 1][lane]
  Fiber* current = nullptr;
  bool in_fiber = false;  // a fiber runs (not the scheduler): a fault is the fiber's
  const LaunchContext* launch = nullptr;
  int64_t block_index = 0;               // linear, in the grid
  std::vector<GlobalAccess> block_accesses;  // the block's counted accesses, when the launch records them
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
  w.in_fiber = true;
  phasor_sim_switch(&w.main_sp, f.sp);
  w.in_fiber = false;
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

// A fault, as the hardware has one: the thread that makes it goes no further
// (it never resumes), and its block's run reports `what`. (A C string: an
// object of the caller's frame would never be destroyed.)
[[noreturn]] void end_thread(Worker& w, Fiber& f, const char* what) {
  w.fail(what);
  f.state = State::Done;
  leave(w, f);
  __builtin_unreachable();
}

const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// Releases the barrier, which every live thread has reached, if they all wait
// at the same __syncthreads(); reports the first two that do not.
bool release_barrier(Worker& w, int n) {
  const Fiber* first = nullptr;
  for (int i = 0; i < n; ++i) {
    const Fiber& f = w.fibers[i];
    if (f.state != State::Barrier) continue;
    if (!first) {
      first = &f;
    } else if (f.barrier_line != first->barrier_line || std::strcmp(f.barrier_file, first->barrier_file) != 0) {
      char buf[320];
      std::snprintf(buf, sizeof buf,
                    "%s waits at the __syncthreads() of %s:%d while %s waits at the one of %s:%d: all of a block's threads must reach the same barrier",
                    where(*first).c_str(), base_name(first->barrier_file), first->barrier_line, where(f).c_str(), base_name(f.barrier_file),
                    f.barrier_line);
      w.fail(buf);
      return false;
    }
  }
  for (int i = 0; i < n; ++i)
    if (w.fibers[i].state == State::Barrier) w.fibers[i].state = State::Ready;
  return true;
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
  w.block = SimBlock{block, c.block, c.grid, w.shared.start_block(c.shared)};
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
      if (!release_barrier(w, n)) return;
      continue;
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, "deadlock: %d threads wait at __syncthreads() while %d wait at a warp shuffle", waiting, shuffling);
    w.fail(buf);
    return;
  }
}

uint3 block_at(const LaunchConfig& c, int64_t b) {
  const int64_t gx = c.grid.x, gy = c.grid.y;
  return uint3{static_cast<unsigned>(b % gx), static_cast<unsigned>((b / gx) % gy), static_cast<unsigned>(b / (gx * gy))};
}
std::string block_name(const LaunchConfig& c, int64_t b) {
  const uint3 i = block_at(c, b);
  char buf[64];
  std::snprintf(buf, sizeof buf, "(%u, %u, %u)", i.x, i.y, i.z);
  return buf;
}

// The order in which a schedule starts the blocks of a grid of `total`:
// in order, or (unless PHASOR_SIM_BLOCK_ORDER=0) reversed and shuffled.
std::vector<int64_t> block_order(Schedule schedule, int64_t total, uint64_t seed) {
  static const bool permute = check_enabled("PHASOR_SIM_BLOCK_ORDER");
  std::vector<int64_t> order(static_cast<size_t>(total));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!permute || schedule == Schedule::InOrder) return order;
  if (schedule == Schedule::Reversed) std::reverse(order.begin(), order.end());
  else std::shuffle(order.begin(), order.end(), std::mt19937_64(seed ^ 0xB10C0DE5ull));
  return order;
}

// What a grid's run under one schedule gave: "" or the first fault, the
// global bytes its blocks read and wrote, and (if recorded) their accesses.
struct GridRun {
  std::string error;
  int64_t bytes_read = 0, bytes_written = 0, accesses = 0;
  std::vector<GlobalAccess> recorded;
};
GridRun run_grid(const LaunchConfig& c, void (*body)(const void*), const void* args, const LaunchContext& launch, Schedule schedule,
                 uint64_t seed) {
  const int64_t total = static_cast<int64_t>(c.grid.x) * c.grid.y * static_cast<int64_t>(c.grid.z);
  const std::vector<int64_t> order = block_order(schedule, total, seed);
  std::mutex m;
  std::string first;
  std::vector<GlobalAccess> recorded;
  std::atomic<bool> failed{false};
  std::atomic<int64_t> bytes_read{0}, bytes_written{0}, accesses{0};
#pragma omp parallel for schedule(dynamic, 1) if (total > 1)
  for (int64_t k = 0; k < total; ++k) {
    if (failed.load(std::memory_order_relaxed)) continue;
    Worker& w = this_worker();
    w.body = body;
    w.args = args;
    w.launch = &launch;
    w.error.clear();
    w.bytes_read = w.bytes_written = w.accesses = 0;
    w.block_accesses.clear();
    const int64_t b = order[static_cast<size_t>(k)];
    w.block_index = b;
    run_block(w, c, block_at(c, b), schedule, seed);
    if (w.error.empty()) w.error = w.shared.finish_block();
    bytes_read.fetch_add(w.bytes_read, std::memory_order_relaxed);
    bytes_written.fetch_add(w.bytes_written, std::memory_order_relaxed);
    accesses.fetch_add(w.accesses, std::memory_order_relaxed);
    current_block = nullptr;
    current_thread = nullptr;
    if (launch.record_accesses && !w.block_accesses.empty()) {
      std::lock_guard<std::mutex> g(m);
      recorded.insert(recorded.end(), w.block_accesses.begin(), w.block_accesses.end());
    }
    if (!w.error.empty()) {
      std::lock_guard<std::mutex> g(m);
      if (first.empty()) first = "block " + block_name(c, b) + ", " + name(schedule) + " schedule: " + w.error;
      failed = true;
    }
  }
  return {first, bytes_read.load(), bytes_written.load(), accesses.load(), std::move(recorded)};
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

// "" or the first pointer parameter that is not null and points into no live
// device memory (a host pointer, a freed block, past an allocation's end):
// the hardware would fault on its first access.
std::string check_pointer_args(const std::vector<PointerArg>& pointers) {
  for (const PointerArg& a : pointers)
    if (a.value && !in_device_memory(a.value, 0)) {
      char buf[240];
      std::snprintf(buf, sizeof buf,
                    "its argument %d (%p) points into no live device memory: a host pointer, a freed allocation, or past an allocation's end",
                    a.index, a.value);
      return buf;
    }
  return "";
}

// The SIGSEGV of a read or write past a block's dynamic shared memory (its
// guard page) ends the thread and is reported; any other goes on to the
// handler that was there before.
struct sigaction previous_segv;
void on_segv(int sig, siginfo_t* info, void* context) {
  Worker* w = worker;
  size_t beyond = 0;
  if (w && w->in_fiber && w->shared.past_dynamic(info->si_addr, beyond)) {
    const bool write = (static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & 2) != 0;  // the page fault's W bit
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s %s dynamic shared memory %zu bytes past the launch's %zu", where(*w->current).c_str(),
                  write ? "writes" : "reads", beyond, w->shared.dynamic_bytes());
    end_thread(*w, *w->current, buf);
  }
  // Not ours: the handler from before takes it, and stays (one that re-raises
  // the signal, as doctest's and Python's do, must not come back here).
  sigaction(SIGSEGV, &previous_segv, nullptr);
  if (previous_segv.sa_flags & SA_SIGINFO) previous_segv.sa_sigaction(sig, info, context);
  else if (previous_segv.sa_handler != SIG_DFL && previous_segv.sa_handler != SIG_IGN) previous_segv.sa_handler(sig);
  // (SIG_DFL or SIG_IGN: returning repeats the access, which ends the process as it would have.)
}
// Installs on_segv unless it is the handler now (a test framework may have
// replaced it since the last launch). Runs where the runtime's lock is held.
void install_segv_handler() {
  struct sigaction now;
  if (sigaction(SIGSEGV, nullptr, &now) != 0) return;
  if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_segv) return;
  struct sigaction mine;
  std::memset(&mine, 0, sizeof mine);
  mine.sa_sigaction = on_segv;
  mine.sa_flags = SA_SIGINFO | SA_NODEFER;  // never returned from when it ends a thread: SIGSEGV must stay unblocked
  sigemptyset(&mine.sa_mask);
  sigaction(SIGSEGV, &mine, &previous_segv);
}

void execute(const LaunchConfig& c, void (*body)(const void*), const void* bound, const void* args, size_t args_bytes,
             const std::vector<PointerArg>& pointers, uint64_t seed) {
  static const bool schedules = check_enabled("PHASOR_SIM_SCHEDULES");
  std::string error = check_pointer_args(pointers);
  if (!error.empty()) {
    record_failure(std::string(c.name) + ": " + error);
    return;
  }
  install_segv_handler();
  LaunchContext launch{reachable(args, args_bytes), /*record_accesses=*/true};
  const std::vector<Region>& regions = launch.regions;
  const Snapshot before = schedules && !regions.empty() ? take(regions) : Snapshot{};
  GridRun first = run_grid(c, body, bound, launch, Schedule::InOrder, seed);
  record_traffic(c.name, first.bytes_read, first.bytes_written, first.accesses);  // once, not once per schedule
  error = first.error;
  if (error.empty()) error = first_race(first.recorded, [&c](int64_t b) { return block_name(c, b); });
  launch.record_accesses = false;
  if (schedules && !regions.empty()) {
    const Snapshot reference = error.empty() ? take(regions) : Snapshot{};
    for (Schedule s : {Schedule::Reversed, Schedule::Shuffled}) {
      if (!error.empty()) break;
      put(regions, before);
      error = run_grid(c, body, bound, launch, s, seed).error;
      if (!error.empty()) break;
      for (size_t i = 0; i < regions.size() && error.empty(); ++i) {
        const char* now = regions[i].base;
        const auto diff = std::mismatch(reference[i].begin(), reference[i].end(), now).first - reference[i].begin();
        if (static_cast<size_t>(diff) != regions[i].size) {
          char buf[320];
          std::snprintf(buf, sizeof buf,
                        "its results differ between the in-order and the %s schedule of its threads and blocks (byte %zu of a %zu-byte allocation): "
                        "a missing __syncthreads(), a warp-synchronous assumption, or blocks that depend on each other's writes",
                        name(s), static_cast<size_t>(diff), regions[i].size);
          error = buf;
        }
      }
    }
  }
  if (!error.empty()) record_failure(std::string(c.name) + ": " + error);
}

}  // namespace

void syncthreads(const char* file, int line) {
  Worker& w = *worker;
  Fiber& f = *w.current;
  f.state = State::Barrier;
  f.barrier_file = file;
  f.barrier_line = line;
  leave(w, f);
}

void* static_shared(const void* site, size_t bytes) {
  Worker& w = *worker;
  void* p = w.shared.static_array(site, bytes);
  if (!p) end_thread(w, *w.current, "its static shared arrays take over the 48 KiB a kernel may declare");
  return p;
}

void global_access(const void* p, size_t bytes, bool write) {
  Worker& w = *worker;
  Fiber& f = *w.current;
  (write ? w.bytes_written : w.bytes_read) += static_cast<int64_t>(bytes);
  ++w.accesses;
  char buf[240];
  if (reinterpret_cast<uintptr_t>(p) % bytes != 0) {  // the hardware's "misaligned address"
    std::snprintf(buf, sizeof buf, "%s makes a misaligned %zu-byte %s of global memory at %p", where(f).c_str(), bytes, write ? "store" : "load", p);
    end_thread(w, f, buf);
  }
  const char* c = static_cast<const char*>(p);
  const bool in_arguments = std::any_of(w.launch->regions.begin(), w.launch->regions.end(),
                                        [&](const Region& r) { return c >= r.base && c + bytes <= r.base + r.size; });
  if (!in_arguments && !in_device_memory_while_running(p, bytes)) {  // the hardware's "illegal address"
    std::snprintf(buf, sizeof buf, "%s makes a %zu-byte %s of global memory at %p, outside every live device allocation", where(f).c_str(), bytes,
                  write ? "store" : "load", p);
    end_thread(w, f, buf);
  }
  if (w.launch->record_accesses) {
    const uintptr_t u = reinterpret_cast<uintptr_t>(p);
    w.block_accesses.push_back(GlobalAccess{u, u + bytes, w.block_index, write});
  }
}

void shuffle(unsigned mask, const void* in, void* out, size_t bytes, Shfl kind, int arg, int width) {
  Worker& w = *worker;
  Fiber& f = *w.current;
  char buf[160];
  if (!((mask >> f.lane) & 1u)) {
    std::snprintf(buf, sizeof buf, "%s (lane %d) reaches a shuffle whose mask 0x%08x does not cover it", where(f).c_str(), f.lane, mask);
    w.fail(buf);
  }
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    std::snprintf(buf, sizeof buf, "%s shuffles with width %d: a shuffle's width is a power of 2 up to 32", where(f).c_str(), width);
    end_thread(w, f, buf);
  }
  uint64_t* slot = &w.slots[(static_cast<size_t>(f.warp) * 2 + (f.seq & 1)) * 32];
  std::memcpy(&slot[f.lane], in, bytes);
  f.mask = mask;
  f.state = State::Warp;
  leave(w, f);
  // The warp is cut into segments of `width` lanes; a source past the end of
  // the caller's segment gives the caller's own value (CUDA's shfl.down / shfl.bfly).
  const int last = (f.lane & ~(width - 1)) | (width - 1);
  int src = kind == Shfl::Down ? f.lane + arg : f.lane ^ arg;
  if (src < 0 || src > last) src = f.lane;
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
                    void (*body)(const void*), std::vector<PointerArg> pointers) {
  static std::atomic<uint64_t> launches{0};
  const uint64_t seed = 0x5EEDull + launches++;
  count_launch();
  enqueue(c.stream, [c, bound, args, args_bytes, body, pointers = std::move(pointers), seed] {
    execute(c, body, bound.get(), args, args_bytes, pointers, seed);
  });
}

}  // namespace phasor::sim
