// The CUDA runtime of the simulator (PHASOR_CUDA_SIM): one simulated H200.
// Memory: one heap block per cudaMalloc (so ASan sees overflows), filled with
// poison. Streams: queues of work run in order, deferred until the host
// synchronises with them, so that a host read that skips a synchronisation
// reads the poison a device-to-host copy leaves in its destination until it runs.
// Stream capture (CUDA Graphs): while a stream captures, the work queued on it
// is recorded in a graph instead of queued; launching the graph queues the
// recording again. What cannot be captured (a host read, a synchronisation, an
// allocation outside relaxed capture mode) fails as on a GPU, with
// cudaErrorStreamCaptureUnsupported, and invalidates the capture.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cuda_runtime_api.h"
#include "internal.h"
#include "sync_counts.h"

using Task = std::function<bool()>;  // a queued operation (enqueue_polled)

struct CUgraph_st {
  std::vector<Task> nodes;  // the captured operations, in stream order
};
struct CUgraphExec_st {
  std::vector<Task> nodes;
};
struct CUstream_st {
  // A task returns false while it cannot finish yet (a collective waiting for
  // its peers: cuda/sim/nccl.cpp); it stays at the front and is polled again.
  std::deque<Task> queue;
  uint64_t enqueued = 0, done = 0;
  std::unique_ptr<CUgraph_st> capture;  // while capturing: where the stream's work goes
  bool capture_invalidated = false;     // an operation that cannot be captured was tried
};
struct CUevent_st {
  CUstream_st* stream = nullptr;
  uint64_t target = 0;
};

namespace phasor::sim {

namespace {

constexpr size_t kTotalMemory = size_t{141} << 30;  // an H200's 141 GiB
constexpr int kSharedOptin = 227 * 1024;

std::recursive_mutex& lock() {
  static std::recursive_mutex m;
  return m;
}

struct State {
  std::map<uintptr_t, size_t> allocations;  // base -> bytes
  size_t allocated = 0;
  std::map<uintptr_t, size_t> pinned;  // base -> bytes (cudaHostAlloc)
  CUstream_st legacy;                          // stream 0
  std::set<CUstream_st*> streams{&legacy};
  std::map<const void*, int> max_dynamic_shared;
  std::string failure;   // the first fault not yet reported by a synchronisation
  std::string detail;    // cudaGetErrorString(cudaErrorLaunchFailure)
  std::string capture_detail;  // cudaGetErrorString(cudaErrorStreamCaptureUnsupported): what was refused
  int capturing = 0;     // streams capturing now
  SyncCounts counts;     // sync_counts.h
};
State& state() {
  static State* s = new State();  // never destroyed: tensors may be freed during static destruction
  return *s;
}

thread_local cudaError_t last_error = cudaSuccess;
thread_local cudaStreamCaptureMode thread_capture_mode = cudaStreamCaptureModeGlobal;  // cudaThreadExchangeStreamCaptureMode

cudaError_t fail_with(cudaError_t e) {
  last_error = e;
  return e;
}

// Counts one host synchronisation (or launch) of the kind `field` names.
void count(int64_t SyncCounts::*field) {
  std::lock_guard<std::recursive_mutex> g(lock());
  ++(state().counts.*field);
}

CUstream_st* resolve(cudaStream_t s) { return s ? s : &state().legacy; }

// Runs the stream's work up to `target`. A task that is not ready is polled
// until it is (`block`, a synchronisation) or makes it return false (a query).
bool run_until(CUstream_st* s, uint64_t target, bool block = true) {
  while (s->done < target) {
    if (!s->queue.front()()) {
      if (!block) return false;
      std::this_thread::yield();
      continue;
    }
    s->queue.pop_front();
    ++s->done;
  }
  return true;
}
void run_all() {
  for (CUstream_st* s : state().streams) run_until(s, s->enqueued);
}
// What a synchronisation returns: the first fault of the work it waited for.
cudaError_t report() {
  State& st = state();
  if (st.failure.empty()) return cudaSuccess;
  st.detail = "unspecified launch failure: " + st.failure;
  st.failure.clear();
  return fail_with(cudaErrorLaunchFailure);
}

// An operation that cannot be captured, tried while `s` (null: any stream)
// captures: every capture it concerns is invalidated (its cudaStreamEndCapture
// fails), and the call fails naming `what`, as CUDA fails it.
cudaError_t refuse_capture(CUstream_st* s, const char* what) {
  State& st = state();
  for (CUstream_st* c : st.streams)
    if (c->capture && (!s || c == s)) c->capture_invalidated = true;
  st.capture_detail = std::string("operation not permitted when stream is capturing: ") + what;
  return fail_with(cudaErrorStreamCaptureUnsupported);
}
bool captures(CUstream_st* s) { return s->capture != nullptr; }
// Whether a call that waits for the whole device, or allocates, must be refused
// now: some stream captures. An allocation is let through where the calling
// thread chose cudaStreamCaptureModeRelaxed (a graph's private memory pool).
bool device_wide_refused() { return state().capturing > 0; }
bool allocation_refused() { return state().capturing > 0 && thread_capture_mode != cudaStreamCaptureModeRelaxed; }

bool is_device_range(const void* p, size_t n) {
  Region r;
  return find_allocation(p, r) && static_cast<const char*>(p) + n <= r.base + r.size;
}

}  // namespace

namespace {
// The block of `blocks` (base -> bytes) that holds [u, u + bytes), or, with
// bytes 0, that holds u or ends at it.
bool find_block(const std::map<uintptr_t, size_t>& blocks, uintptr_t u, size_t bytes, Region& r) {
  auto it = blocks.upper_bound(u);
  if (it != blocks.begin() && (--it, u - it->first < it->second || (bytes == 0 && u == it->first + it->second))) {
    if (u + bytes > it->first + it->second) return false;
    r.base = reinterpret_cast<char*>(it->first);
    r.size = it->second;
    return true;
  }
  return false;
}
bool in_device_memory_unlocked(const void* p, size_t bytes) {
  const uintptr_t u = reinterpret_cast<uintptr_t>(p);
  Region r;
  return find_block(state().allocations, u, bytes, r) || find_block(state().pinned, u, bytes, r);
}
}  // namespace

bool find_allocation(const void* p, Region& r) {
  std::lock_guard<std::recursive_mutex> g(lock());
  return find_block(state().allocations, reinterpret_cast<uintptr_t>(p), 1, r);
}

bool in_device_memory(const void* p, size_t bytes) {
  std::lock_guard<std::recursive_mutex> g(lock());
  return in_device_memory_unlocked(p, bytes);
}

bool in_device_memory_while_running(const void* p, size_t bytes) { return in_device_memory_unlocked(p, bytes); }

bool check_enabled(const char* name) {
  const char* v = std::getenv(name);
  return !(v && v[0] == '0');
}

bool poison_enabled() {
  static const bool on = check_enabled("PHASOR_SIM_POISON");
  return on;
}

void enqueue_polled(cudaStream_t stream, std::function<bool()> poll) {
  static const bool defer = check_enabled("PHASOR_SIM_DEFER");
  std::lock_guard<std::recursive_mutex> g(lock());
  CUstream_st* s = resolve(stream);
  if (s->capture) {  // recorded, not run; an invalidated capture records nothing more
    if (!s->capture_invalidated) s->capture->nodes.push_back(std::move(poll));
    return;
  }
  s->queue.push_back(std::move(poll));
  ++s->enqueued;
  if (!defer) run_until(s, s->enqueued);
}

void enqueue(cudaStream_t stream, std::function<void()> task) {
  enqueue_polled(stream, [task = std::move(task)] {
    task();
    return true;
  });
}

SyncCounts sync_counts() {
  std::lock_guard<std::recursive_mutex> g(lock());
  return state().counts;
}
void reset_sync_counts() {
  std::lock_guard<std::recursive_mutex> g(lock());
  state().counts = SyncCounts{};
}
void count_launch() { count(&SyncCounts::launches); }

void record_failure(const std::string& what) {
  std::lock_guard<std::recursive_mutex> g(lock());
  if (state().failure.empty()) state().failure = what;
}

cudaError_t set_max_dynamic_shared(const void* kernel, int bytes) {
  if (bytes < 0 || bytes > kSharedOptin) return fail_with(cudaErrorInvalidValue);
  std::lock_guard<std::recursive_mutex> g(lock());
  state().max_dynamic_shared[kernel] = bytes;
  return cudaSuccess;
}

int max_dynamic_shared(const void* kernel) {
  std::lock_guard<std::recursive_mutex> g(lock());
  auto it = state().max_dynamic_shared.find(kernel);
  return it == state().max_dynamic_shared.end() ? 48 * 1024 : it->second;
}

cudaError_t set_last_error(cudaError_t e) { return fail_with(e); }

}  // namespace phasor::sim

using namespace phasor::sim;

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : fail_with(cudaErrorInvalidDevice); }
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (device != 0) return fail_with(cudaErrorInvalidDevice);
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "NVIDIA H200 (Phasor's CUDA simulator)");
  p->totalGlobalMem = kTotalMemory;
  p->sharedMemPerBlock = 48 * 1024;
  p->sharedMemPerBlockOptin = kSharedOptin;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7fffffff, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = 132;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) return fail_with(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 * 1024; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = 132; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = kSharedOptin; return cudaSuccess;
  }
  return fail_with(cudaErrorInvalidValue);
}
cudaError_t cudaDeviceSynchronize() {
  std::lock_guard<std::recursive_mutex> g(lock());
  if (device_wide_refused()) return refuse_capture(nullptr, "cudaDeviceSynchronize");
  count(&SyncCounts::device_syncs);
  run_all();
  return report();
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return last_error; }
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorStubLibrary: return "cudaErrorStubLibrary";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
  }
  return "cudaErrorUnknown";
}
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: {
      std::lock_guard<std::recursive_mutex> g(lock());
      return state().detail.empty() ? "unspecified launch failure" : state().detail.c_str();
    }
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorStreamCaptureUnsupported: {
      std::lock_guard<std::recursive_mutex> g(lock());
      return state().capture_detail.empty() ? "operation not permitted when stream is capturing" : state().capture_detail.c_str();
    }
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    default: return cudaGetErrorName(e);
  }
}

cudaError_t cudaMalloc(void** ptr, size_t size) {
  std::lock_guard<std::recursive_mutex> g(lock());
  State& st = state();
  *ptr = nullptr;
  if (allocation_refused()) return refuse_capture(nullptr, "cudaMalloc (outside relaxed capture mode: a graph's memory pool)");
  if (size == 0) return cudaSuccess;
  if (size > kTotalMemory - st.allocated) return fail_with(cudaErrorMemoryAllocation);
  void* p = nullptr;
  if (posix_memalign(&p, 256, size) != 0) return fail_with(cudaErrorMemoryAllocation);  // the exact size: ASan sees the end
  std::memset(p, poison_enabled() ? kPoison : 0, size);
  st.allocations.emplace(reinterpret_cast<uintptr_t>(p), size);
  st.allocated += size;
  *ptr = p;
  return cudaSuccess;
}
cudaError_t cudaFree(void* ptr) {
  std::lock_guard<std::recursive_mutex> g(lock());
  State& st = state();
  if (device_wide_refused()) return refuse_capture(nullptr, "cudaFree (it waits for the device)");
  run_all();  // cudaFree waits for the device
  count(&SyncCounts::device_syncs);
  if (!ptr) return report();
  auto it = st.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == st.allocations.end()) return fail_with(cudaErrorInvalidDevicePointer);
  st.allocated -= it->second;
  st.allocations.erase(it);
  std::free(ptr);
  return report();
}
cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned) {
  std::lock_guard<std::recursive_mutex> g(lock());
  if (allocation_refused()) return refuse_capture(nullptr, "cudaHostAlloc (outside relaxed capture mode)");
  *ptr = std::malloc(size ? size : 1);
  if (!*ptr) return fail_with(cudaErrorMemoryAllocation);
  state().pinned.emplace(reinterpret_cast<uintptr_t>(*ptr), size ? size : 1);
  return cudaSuccess;
}
// Pinned memory is the device's to read and write too (mapped, under one
// address space): the simulated device runs on the host.
cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned flags) {
  std::lock_guard<std::recursive_mutex> g(lock());
  if (flags != 0 || state().pinned.count(reinterpret_cast<uintptr_t>(host)) == 0) return fail_with(cudaErrorInvalidValue);
  *device = host;
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** ptr, size_t size) { return cudaHostAlloc(ptr, size, 0); }
cudaError_t cudaFreeHost(void* ptr) {
  std::lock_guard<std::recursive_mutex> g(lock());
  if (device_wide_refused()) return refuse_capture(nullptr, "cudaFreeHost (it waits for the device)");
  run_all();
  count(&SyncCounts::device_syncs);
  if (state().pinned.erase(reinterpret_cast<uintptr_t>(ptr)) == 0) return fail_with(cudaErrorInvalidValue);
  std::free(ptr);
  return report();
}
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  std::lock_guard<std::recursive_mutex> g(lock());
  *total = kTotalMemory;
  *free = kTotalMemory - state().allocated;
  return cudaSuccess;
}

namespace {
// Checks that the device side of a copy lies inside one allocation.
cudaError_t check_copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind == cudaMemcpyDefault || kind == cudaMemcpyHostToHost) return cudaSuccess;
  if ((dst_dev && !is_device_range(dst, n)) || (src_dev && !is_device_range(src, n))) return fail_with(cudaErrorInvalidValue);
  if (!dst_dev && is_device_range(dst, 1)) return fail_with(cudaErrorInvalidValue);
  if (!src_dev && is_device_range(src, 1)) return fail_with(cudaErrorInvalidValue);
  return cudaSuccess;
}
}  // namespace

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  std::lock_guard<std::recursive_mutex> g(lock());
  if (n == 0) return cudaSuccess;
  if (const cudaError_t e = check_copy(dst, src, n, kind)) return e;
  if (device_wide_refused()) return refuse_capture(nullptr, "cudaMemcpy (synchronous)");
  run_until(&state().legacy, state().legacy.enqueued);
  count(&SyncCounts::device_syncs);
  if (kind == cudaMemcpyDeviceToHost) count(&SyncCounts::d2h_copies);
  std::memmove(dst, src, n);
  return report();
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (const cudaError_t e = check_copy(dst, src, n, kind)) return e;
  std::lock_guard<std::recursive_mutex> g(lock());
  // A captured copy to the host would be a host read inside the graph: refused.
  // A captured copy from the host reads `src` at each launch: it must outlive the graph.
  if (kind == cudaMemcpyDeviceToHost && captures(resolve(stream))) return refuse_capture(resolve(stream), "cudaMemcpyAsync (device to host)");
  // Until the copy runs, its host destination holds poison: a host read that
  // skipped the synchronisation sees it (NaN, -1) instead of stale values.
  if (kind == cudaMemcpyDeviceToHost && poison_enabled()) std::memset(dst, kPoison, n);
  if (kind == cudaMemcpyDeviceToHost) count(&SyncCounts::d2h_copies);
  enqueue(stream, [dst, src, n] { std::memmove(dst, src, n); });
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (!is_device_range(dst, n)) return fail_with(cudaErrorInvalidValue);
  enqueue(stream, [dst, value, n] { std::memset(dst, value, n); });
  return cudaSuccess;
}
cudaError_t cudaMemset(void* dst, int value, size_t n) {
  std::lock_guard<std::recursive_mutex> g(lock());
  if (device_wide_refused()) return refuse_capture(nullptr, "cudaMemset (synchronous)");
  if (const cudaError_t e = cudaMemsetAsync(dst, value, n, nullptr)) return e;
  run_until(&state().legacy, state().legacy.enqueued);
  count(&SyncCounts::device_syncs);
  return report();
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  std::lock_guard<std::recursive_mutex> g(lock());
  *stream = new CUstream_st();
  state().streams.insert(*stream);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> g(lock());
  if (!stream || state().streams.count(stream) == 0) return fail_with(cudaErrorInvalidResourceHandle);
  if (device_wide_refused()) return refuse_capture(nullptr, "cudaStreamDestroy");
  state().streams.erase(stream);
  run_until(stream, stream->enqueued);  // queued work completes, as on a GPU
  count(&SyncCounts::device_syncs);
  delete stream;
  return report();
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> g(lock());
  CUstream_st* s = resolve(stream);
  if (captures(s)) return refuse_capture(s, "cudaStreamSynchronize");
  count(&SyncCounts::stream_syncs);
  run_until(s, s->enqueued);
  return report();
}
// Runs what can run now; "not ready" while a task waits (a collective's peers).
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> g(lock());
  CUstream_st* s = resolve(stream);
  if (captures(s)) return refuse_capture(s, "cudaStreamQuery");
  count(&SyncCounts::queries);
  if (!run_until(s, s->enqueued, /*block=*/false)) return cudaErrorNotReady;  // not an error: cudaGetLastError stays clean
  return report();
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  if (!event) return fail_with(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::recursive_mutex> g(lock());
  if (captures(resolve(stream))) return refuse_capture(resolve(stream), "cudaStreamWaitEvent (the simulator captures no event nodes)");
  CUstream_st* other = event->stream;
  const uint64_t target = event->target;
  if (other) enqueue_polled(stream, [other, target] { return run_until(other, target, /*block=*/false); });
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  *event = new CUevent_st();
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return fail_with(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return fail_with(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::recursive_mutex> g(lock());
  if (captures(resolve(stream))) return refuse_capture(resolve(stream), "cudaEventRecord (the simulator captures no event nodes)");
  event->stream = resolve(stream);
  event->target = event->stream->enqueued;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return fail_with(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::recursive_mutex> g(lock());
  if (device_wide_refused()) return refuse_capture(nullptr, "cudaEventSynchronize");
  count(&SyncCounts::event_syncs);
  if (event->stream) run_until(event->stream, event->target);
  return report();
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event) return fail_with(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::recursive_mutex> g(lock());
  if (device_wide_refused()) return refuse_capture(nullptr, "cudaEventQuery");
  count(&SyncCounts::queries);
  if (event->stream && !run_until(event->stream, event->target, /*block=*/false)) return cudaErrorNotReady;
  return report();
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!start || !end) return fail_with(cudaErrorInvalidResourceHandle);
  *ms = 0.0f;  // the simulator has no device time
  return cudaSuccess;
}

// ---- stream capture and graphs

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  std::lock_guard<std::recursive_mutex> g(lock());
  // The legacy stream synchronises with every other: CUDA cannot capture it.
  if (!stream) return refuse_capture(nullptr, "cudaStreamBeginCapture on the legacy stream");
  if (state().streams.count(stream) == 0) return fail_with(cudaErrorInvalidResourceHandle);
  if (stream->capture) return fail_with(cudaErrorIllegalState);
  stream->capture = std::make_unique<CUgraph_st>();
  stream->capture_invalidated = false;
  ++state().capturing;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  std::lock_guard<std::recursive_mutex> g(lock());
  *graph = nullptr;
  CUstream_st* s = resolve(stream);
  if (!s->capture) return fail_with(cudaErrorIllegalState);
  std::unique_ptr<CUgraph_st> captured = std::move(s->capture);
  --state().capturing;
  if (s->capture_invalidated) return fail_with(cudaErrorStreamCaptureInvalidated);
  *graph = captured.release();
  return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  std::lock_guard<std::recursive_mutex> g(lock());
  const CUstream_st* s = resolve(stream);
  *status = !s->capture ? cudaStreamCaptureStatusNone : s->capture_invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}
cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  std::swap(*mode, thread_capture_mode);
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!graph) return fail_with(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}
// The recorded operations queued again, in their order: the stream runs them
// as it ran them eagerly (deferred until a synchronisation), with no host work.
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return fail_with(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::recursive_mutex> g(lock());
  if (captures(resolve(stream))) return refuse_capture(resolve(stream), "cudaGraphLaunch (the simulator captures no child graphs)");
  for (const Task& node : exec->nodes) enqueue_polled(stream, node);
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;  // queued launches hold their own copies of the operations
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
