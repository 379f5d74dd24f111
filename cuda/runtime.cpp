// The device, its one stream, the cuBLAS handle, the caching allocator and the
// host <-> device copies of the CUDA backend.
#include "cuda/runtime.h"

#include <cublas_v2.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensor/backend.h"
#include "tensor/ops.h"

namespace phasor::gpu {

Backend* backend_instance();  // cuda/backend.cpp

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear a sticky-free error so the next call starts clean
  fail("cuda: ", what, " failed: ", cudaGetErrorString(status), " (", cudaGetErrorName(status), ")");
}

// A fault inside a kernel surfaces at a later synchronisation, naming no
// kernel. PHASOR_CUDA_CHECK_KERNELS=1 makes every launch wait for its kernel
// and name it (the simulator's faults name their kernel either way).
void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) fail("cuda: launching ", kernel, " failed: ", cudaGetErrorString(status));
  static const bool wait = [] {
    const char* v = std::getenv("PHASOR_CUDA_CHECK_KERNELS");
    return v && v[0] == '1';
  }();
  if (!wait) return;
  const cudaError_t done = cudaStreamSynchronize(stream());
  if (done != cudaSuccess) {
    cudaGetLastError();
    fail("cuda: kernel ", kernel, " failed: ", cudaGetErrorString(done), " (", cudaGetErrorName(done), ")");
  }
}

namespace {

std::string human(size_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024) std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1024.0 * 1024));
  else std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  return buf;
}

std::atomic<bool> tf32_flag{[] {
  const char* v = std::getenv("PHASOR_TF32");
  return v && v[0] == '1';
}()};

struct DeviceState {
  std::once_flag once;
  std::string error;    // non-empty when no GPU can be used
  bool absent = false;  // ... because the machine has none (gpu::absent)
  std::string name;
  int sms = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
};

DeviceState& device_state() {
  static DeviceState s;
  return s;
}

// Whether an NVIDIA driver is installed: its kernel module's /proc entry, or a
// device node (/dev/dxg: WSL's GPU).
bool nvidia_driver_installed() {
  for (const char* path : {"/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg"})
    if (access(path, F_OK) == 0) return true;
  return false;
}

void init_device(DeviceState& s) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    cudaGetLastError();
    // No GPU at all, or one that is there and fails (gpu::absent, cuda/cuda.h).
    // Without a driver the runtime says "insufficient driver" (or finds only a
    // stub libcuda): that is an absence only when no driver is installed.
    const bool no_driver = status == cudaErrorInsufficientDriver || status == cudaErrorStubLibrary;
    s.absent = status == cudaSuccess || status == cudaErrorNoDevice || (no_driver && !nvidia_driver_installed());
    s.error = std::string("device cuda is not available: ") + (s.absent ? "no NVIDIA GPU on this machine (" : "the NVIDIA GPU cannot be used (") +
              (status != cudaSuccess ? std::string(cudaGetErrorString(status)) + ", " + cudaGetErrorName(status)
                                     : std::string("cudaGetDeviceCount found 0 devices")) +
              ")";
    return;
  }
  cudaDeviceProp prop{};
  if (cudaSetDevice(0) != cudaSuccess || cudaGetDeviceProperties(&prop, 0) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) != cudaSuccess) {
    s.error = std::string("device cuda is not available: initialising GPU 0 failed (") + cudaGetErrorString(cudaGetLastError()) + ")";
    return;
  }
  s.sms = prop.multiProcessorCount;
  s.name = std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ")";
  const cublasStatus_t bs = cublasCreate(&s.blas);
  if (bs != CUBLAS_STATUS_SUCCESS) {
    s.error = std::string("device cuda is not available: cublasCreate failed (") + cublasGetStatusString(bs) + ")";
    return;
  }
  cublasSetStream(s.blas, s.stream);
}

// The calling thread in relaxed stream-capture mode for its scope: the
// allocations a graph's capture makes for its own memory.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() { cudaThreadExchangeStreamCaptureMode(&previous_); }
  ~RelaxedCaptureMode() { cudaThreadExchangeStreamCaptureMode(&previous_); }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode previous_ = cudaStreamCaptureModeRelaxed;
};

// Pinned staging memory for small host -> device copies, so they stay
// asynchronous: two halves, and a half is refilled only after the event
// recorded when it was last left has completed (normally long since).
class Staging {
 public:
  static constexpr size_t kHalf = 2 << 20;
  bool copy(void* dst, const void* src, size_t nbytes) {
    if (nbytes > kHalf) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!host_) {
      check(cudaHostAlloc(reinterpret_cast<void**>(&host_), 2 * kHalf, cudaHostAllocDefault), "cudaHostAlloc (staging)");
      for (auto& e : left_) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    }
    if (head_ + nbytes > kHalf) {
      check(cudaEventRecord(left_[half_], stream()), "cudaEventRecord");
      recorded_[half_] = true;
      half_ ^= 1;
      if (recorded_[half_]) check(cudaEventSynchronize(left_[half_]), "cudaEventSynchronize");
      head_ = 0;
    }
    char* slot = host_ + half_ * kHalf + head_;
    std::memcpy(slot, src, nbytes);
    check(cudaMemcpyAsync(dst, slot, nbytes, cudaMemcpyHostToDevice, stream()), "cudaMemcpyAsync (host to device)");
    head_ += (nbytes + 255) / 256 * 256;
    return true;
  }

 private:
  std::mutex mutex_;
  char* host_ = nullptr;
  size_t head_ = 0;
  int half_ = 0;
  cudaEvent_t left_[2] = {};
  bool recorded_[2] = {false, false};
};

// Freed blocks are kept and reused by size (best fit within a quarter of
// the request); the driver is asked only when none fits, and on failure the
// cache is released and the request retried once before the error.
//
// A CUDA Graph (Graph, below) has a private pool: while it captures, blocks
// come from its pool, and every block freed then joins it (the graph's kernels
// may use it); its blocks go back only to it, whoever frees them, since each
// replay writes them again, until the graph is destroyed (release_pool).
class CachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    ensure_device();
    const size_t size = round(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.allocations;
    Pool& pool = pools_[capture_pool_];
    auto it = pool.free.lower_bound(size);
    if (it != pool.free.end() && it->first <= size + kSlack * (size / 4)) {
      void* p = it->second;
      const size_t got = it->first;
      pool.free.erase(it);
      pool.cached -= got;
      ++stats_.cache_hits;
#ifdef PHASOR_CUDA_SIM
      // What the block's last tensor left is not this one's: poison it, in stream order.
      if (sim::poison_enabled()) check(cudaMemsetAsync(p, 0xff, got, stream()), "cudaMemsetAsync (poison)");
#endif
      return take(p, got);
    }
    void* p = nullptr;
    cudaError_t status = device_malloc(&p, size);
    if (status != cudaSuccess && capture_pool_ == 0) {  // no cudaFree while capturing: it would wait for the device
      cudaGetLastError();
      release_cached();
      status = cudaMalloc(&p, size);
    }
    if (status != cudaSuccess) {
      cudaGetLastError();
      size_t free_bytes = 0, total = 0;
      cudaMemGetInfo(&free_bytes, &total);
      fail("cuda: out of memory allocating ", nbytes, " bytes (", human(nbytes), "): the GPU has ", human(free_bytes), " free of ",
           human(total), "; Phasor holds ", human(stats_.allocated), " in live tensors and ", human(stats_.reserved), " reserved");
    }
    stats_.reserved += size;
    return take(p, size);
  }

  void deallocate(void* ptr, size_t) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return;
    const Block block = it->second;
    live_.erase(it);
    stats_.allocated -= block.size;
    // A graph's block stays its graph's; an eager block freed while a graph captures joins that graph's pool.
    const int owner = block.pool != 0 && pools_.count(block.pool) ? block.pool : capture_pool_;
    Pool& pool = pools_[owner];
    pool.free.emplace(block.size, ptr);
    pool.cached += block.size;
    if (owner == 0 && capture_pool_ == 0 && pool.cached > kMaxCached) release_cached();
  }

  // A new private pool, which serves the allocations until end_capture().
  int begin_capture() {
    std::lock_guard<std::mutex> lock(mutex_);
    PHASOR_CHECK(capture_pool_ == 0, "cuda graph: another graph is being captured");
    capture_pool_ = next_pool_++;
    pools_[capture_pool_];
    return capture_pool_;
  }
  void end_capture() {
    std::lock_guard<std::mutex> lock(mutex_);
    capture_pool_ = 0;
  }
  // The graph of `id` is gone: its free blocks return to the eager cache, and so will its live ones when freed.
  void release_pool(int id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pools_.find(id);
    if (id == 0 || it == pools_.end()) return;
    Pool& eager = pools_[0];
    eager.free.insert(it->second.free.begin(), it->second.free.end());
    eager.cached += it->second.cached;
    pools_.erase(it);
    if (eager.cached > kMaxCached) release_cached();
  }

  MemoryStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_allocated = stats_.allocated;
  }
  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (capture_pool_ == 0) release_cached();
  }

 private:
#ifdef PHASOR_CUDA_SIM
  // The simulator: blocks of the exact size asked (ASan sees a tensor's end),
  // reused for the same size only, and a bounded cache (sizes vary more).
  static constexpr size_t kSlack = 0, kMaxCached = size_t{256} << 20;
  static size_t round(size_t n) { return n ? n : 1; }
#else
  static constexpr size_t kSlack = 1, kMaxCached = SIZE_MAX;
  static size_t round(size_t n) {
    if (n == 0) n = 1;
    if (n < (1u << 20)) return (n + 511) / 512 * 512;
    return (n + (2u << 20) - 1) / (2u << 20) * (2u << 20);
  }
#endif
  struct Block {
    size_t size;
    int pool;  // 0: eager; else the graph's pool it was allocated in
  };
  struct Pool {
    std::multimap<size_t, void*> free;
    size_t cached = 0;  // bytes in free
  };
  // cudaMalloc; while a graph captures, in relaxed capture mode, as a capture
  // in global mode refuses allocations that are not the graph's pool's.
  cudaError_t device_malloc(void** p, size_t size) {
    if (capture_pool_ == 0) return cudaMalloc(p, size);
    const RelaxedCaptureMode relaxed;
    return cudaMalloc(p, size);
  }
  void* take(void* p, size_t size) {
    live_.emplace(p, Block{size, capture_pool_});
    stats_.allocated += size;
    if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
    return p;
  }
  void release_cached() {  // the eager pool's; cudaFree waits for the device, so no queued kernel still uses these
    Pool& eager = pools_[0];
    for (auto& [size, p] : eager.free) {
      cudaFree(p);
      stats_.reserved -= size;
    }
    eager.free.clear();
    eager.cached = 0;
  }

  std::mutex mutex_;
  std::map<int, Pool> pools_{{0, Pool{}}};
  int capture_pool_ = 0;  // the pool of the graph being captured; 0: none
  int next_pool_ = 1;
  std::unordered_map<void*, Block> live_;
  MemoryStats stats_;
};

// The index fault record (runtime.h): host and device pointers to one pinned block.
struct FaultRecord {
  IndexFault* host = nullptr;
  IndexFault* device = nullptr;
};
FaultRecord& fault_record() {
  static FaultRecord* r = [] {
    auto* f = new FaultRecord();
    void* p = nullptr;
    check(cudaHostAlloc(&p, sizeof(IndexFault), cudaHostAllocMapped), "cudaHostAlloc (index fault)");
    std::memset(p, 0, sizeof(IndexFault));
    void* d = nullptr;
    check(cudaHostGetDevicePointer(&d, p, 0), "cudaHostGetDevicePointer (index fault)");
    f->host = static_cast<IndexFault*>(p);
    f->device = static_cast<IndexFault*>(d);
    return f;
  }();
  return *r;
}

CachingAllocator& allocator() {
  static CachingAllocator* a = new CachingAllocator();  // never destroyed: tensors may outlive static destruction
  return *a;
}

Staging& staging() {
  static Staging* s = new Staging();
  return *s;
}

GraphState* active_capture = nullptr;  // the Graph capturing now (one at a time, like the allocator's pool)

}  // namespace

struct GraphState {
  int pool = 0;  // the allocator's private pool
  cudaGraphExec_t exec = nullptr;
  std::vector<void*> uploads;  // pinned copies of the host data the captured uploads read at each replay

  // A captured upload: its source copied to pinned memory that lives as long as the graph.
  void upload(void* dst, const void* src, size_t nbytes) {
    void* kept = nullptr;
    {
      const RelaxedCaptureMode relaxed;
      check(cudaHostAlloc(&kept, nbytes, cudaHostAllocDefault), "cudaHostAlloc (a graph's upload)");
    }
    uploads.push_back(kept);
    std::memcpy(kept, src, nbytes);
    check(cudaMemcpyAsync(dst, kept, nbytes, cudaMemcpyHostToDevice, stream()), "cudaMemcpyAsync (host to device)");
  }
};

namespace {

// Fails where a graph is capturing: the host cannot wait for the device inside a graph.
void refuse_host_wait(const char* what) {
  if (active_capture) fail("cuda graph: ", what, " cannot be captured: the host would wait for the device inside the graph");
}

void check_index(Device d) {
  PHASOR_CHECK(d.index == 0, "device ", d, " is not available: Phasor drives one GPU, cuda:0");
}

Tensor device_copy(const Tensor& t, Device to) {
  if (to.is_cuda() && t.device().is_cpu()) {
    check_index(to);
    const Tensor src = ops::contiguous(t);
    Tensor out = empty(src.shape(), src.dtype(), to);
    copy_to_device(out.raw_data(), src.raw_data(), src.nbytes());
    return out;
  }
  if (to.is_cpu() && t.device().is_cuda()) {
    const Tensor src = ops::contiguous(t);
    Tensor out = empty(src.shape(), src.dtype(), kCPU);
    copy_to_host(out.raw_data(), src.raw_data(), src.nbytes());
    return out;
  }
  fail("to: cannot copy from ", t.device(), " to ", to, " (Phasor drives one GPU, cuda:0)");
}

}  // namespace

void ensure_device() {
  DeviceState& s = device_state();
  std::call_once(s.once, [&] { init_device(s); });
  if (!s.error.empty()) throw Error(s.error);
}

cudaStream_t stream() {
  ensure_device();
  return device_state().stream;
}

cublasContext* cublas() {
  ensure_device();
  return device_state().blas;
}

int multiprocessors() {
  ensure_device();
  return device_state().sms;
}

Buffer::Buffer(size_t nbytes) : nbytes_(nbytes) { ptr_ = allocator().allocate(nbytes); }
Buffer::~Buffer() { allocator().deallocate(ptr_, nbytes_); }

void copy_to_device(void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  if (active_capture) return active_capture->upload(dst, src, nbytes);
  if (staging().copy(dst, src, nbytes)) return;
  check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, stream()), "cudaMemcpyAsync (host to device)");
  check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");  // pageable source: finish before it can go away
}

void copy_to_host(void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  refuse_host_wait("a read of device memory on the host (a copy to the host: item(), to_vector(), to(cpu))");
  check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, stream()), "cudaMemcpyAsync (device to host)");
  check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
  raise_index_fault();
}

IndexFault* index_fault() {
  ensure_device();
  return fault_record().device;
}

void raise_index_fault() {
  if (!device_state().stream) return;  // no device: nothing can have been recorded
  IndexFault& f = *fault_record().host;
  if (f.op == static_cast<int64_t>(IndexOp::None)) return;
  const IndexFault seen = f;
  f = IndexFault{};
  switch (static_cast<IndexOp>(seen.op)) {
    case IndexOp::CrossEntropy:
      fail("cross_entropy: target ", seen.value, " at row ", seen.position, " is outside [0, ", seen.size, ")");
    case IndexOp::IndexSelect: index_out_of_range("index_select", seen.value, static_cast<int>(seen.dim), seen.size);
    case IndexOp::IndexAdd: index_out_of_range("index_add", seen.value, static_cast<int>(seen.dim), seen.size);
    case IndexOp::Gather: index_out_of_range("gather", seen.value, static_cast<int>(seen.dim), seen.size);
    case IndexOp::ScatterAdd: index_out_of_range("scatter_add", seen.value, static_cast<int>(seen.dim), seen.size);
    case IndexOp::None: break;
  }
  fail("cuda: unknown index fault ", seen.op);
}

void register_cuda() {
  register_allocator(DeviceType::CUDA, &allocator());
  register_backend(DeviceType::CUDA, backend_instance());
  ops::register_device_copy(&device_copy);
  register_device_graph(DeviceType::CUDA, []() -> std::unique_ptr<DeviceGraph> { return std::make_unique<Graph>(); });
}

// ---- public API (cuda/cuda.h) ----

bool available() {
  try {
    ensure_device();
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string unavailable_reason() {
  try {
    ensure_device();
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

bool absent() {
  return !available() && device_state().absent;
}

std::string device_name() {
  ensure_device();
  return device_state().name;
}

bool simulated() {
#ifdef PHASOR_CUDA_SIM
  return true;
#else
  return false;
#endif
}

MemoryStats memory_stats() { return allocator().stats(); }
void reset_peak_memory() { allocator().reset_peak(); }
void empty_cache() {
  if (available()) allocator().empty_cache();
}
void synchronize() {
  refuse_host_wait("gpu::synchronize");
  check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
  raise_index_fault();
}
CUstream_st* native_stream() { return stream(); }

Graph::Graph() : state_(std::make_unique<GraphState>()) {}

Graph::~Graph() {
  if (state_->exec) cudaGraphExecDestroy(state_->exec);
  for (void* p : state_->uploads) cudaFreeHost(p);  // waits for the device: no queued replay still reads them
  if (state_->pool) allocator().release_pool(state_->pool);
}

void Graph::capture(const std::function<void()>& body) {
  PHASOR_CHECK(!state_->exec && !state_->pool, "cuda graph: already captured (a Graph captures once)");
  PHASOR_CHECK(!active_capture, "cuda graph: another graph is being captured");
  check(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  state_->pool = allocator().begin_capture();
  active_capture = state_.get();
  std::string error;
  try {
    body();
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "an exception that is not a std::exception";
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream(), &graph);
  active_capture = nullptr;
  allocator().end_capture();
  if (!error.empty()) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    fail("cuda graph: capture failed: ", error);
  }
  check(ended, "cudaStreamEndCapture");
  const cudaError_t made = cudaGraphInstantiate(&state_->exec, graph, 0);
  cudaGraphDestroy(graph);
  check(made, "cudaGraphInstantiate");
}

void Graph::replay() const {
  PHASOR_CHECK(state_->exec, "cuda graph: replay() before capture()");
  check(cudaGraphLaunch(state_->exec, stream()), "cudaGraphLaunch");
}

bool Graph::captured() const { return state_->exec != nullptr; }

bool capturing() { return active_capture != nullptr; }
void set_allow_tf32(bool allow) { tf32_flag.store(allow); }
bool allow_tf32() { return tf32_flag.load(); }

}  // namespace phasor::gpu
