#include "tensor/backend.h"

#include <array>

#include "tensor/device_graph.h"
#include "tensor/ops.h"

namespace phasor {

// Each backend registers itself through one function of its own folder
// (tensor/cpu/backend.cpp, cuda/runtime.cpp). Calling them from here, an
// object every program links, keeps a static link from dropping them; calling
// them on first lookup makes a backend there for a lookup made during another
// object's static initialisation. The registry knows no backend's class.
namespace cpu {
void register_cpu();
}
// The CUDA backend is a library of its own (Phasor::cuda): a weak reference,
// null in a program that does not link it, so the core needs no CUDA library.
// Phasor::cuda's link option (--undefined=register_cuda) keeps a static
// libphasor_cuda's registration in the programs that link it.
namespace gpu {
[[gnu::weak]] void register_cuda();
}

namespace {
Backend*& slot(DeviceType type) {
  static Backend* table[2] = {nullptr, nullptr};
  return table[static_cast<int>(type)];
}
// The hooks every lookup runs first; a fixed array, read without a lock (all
// are registered by register_all, before the first lookup returns).
std::array<BeforeOpHook, 4>& before_op_hooks() {
  static std::array<BeforeOpHook, 4> hooks{};
  return hooks;
}
DeviceGraphMaker& graph_maker(DeviceType type) {
  static DeviceGraphMaker table[2] = {nullptr, nullptr};
  return table[static_cast<int>(type)];
}
void register_all() {
  static const bool registered = [] {
    cpu::register_cpu();
    if (&gpu::register_cuda != nullptr) gpu::register_cuda();
    return true;
  }();
  (void)registered;
}
}  // namespace

void register_backend(DeviceType type, Backend* backend) { slot(type) = backend; }

void register_before_op(BeforeOpHook hook) {
  for (BeforeOpHook& h : before_op_hooks()) {
    if (h == hook) return;
    if (h == nullptr) {
      h = hook;
      return;
    }
  }
  fail("register_before_op: more than ", before_op_hooks().size(), " hooks");
}

Backend& backend(Device device) {
  register_all();
  for (BeforeOpHook h : before_op_hooks()) {
    if (h == nullptr) break;
    h();
  }
  Backend* b = slot(device.type);
  PHASOR_CHECK(b != nullptr, "device ", device, " is not available (Phasor was built without CUDA or no GPU is present)");
  return *b;
}

void register_device_graph(DeviceType type, DeviceGraphMaker maker) { graph_maker(type) = maker; }

std::unique_ptr<DeviceGraph> make_device_graph(Device device) {
  register_all();
  const DeviceGraphMaker maker = graph_maker(device.type);
  PHASOR_CHECK(maker != nullptr, "device ", device, " records no graphs (CUDA Graphs need a program linked with Phasor's CUDA backend)");
  return maker();
}

Device op_device(const char* op, const Tensor& t, std::initializer_list<Tensor> others) {
  Device d = t.device();
  for (const Tensor& o : others)
    if (o.defined() && d.is_cpu() && !o.device().is_cpu() && t.dim() == 0) d = o.device();
  auto fits = [&](const Tensor& o) { return !o.defined() || o.device() == d || (o.device().is_cpu() && o.dim() == 0); };
  PHASOR_CHECK(fits(t), op, ": tensors on different devices (", t.device(), " and ", d, ")");
  for (const Tensor& o : others) PHASOR_CHECK(fits(o), op, ": tensors on different devices (", d, " and ", o.device(), ")");
  return d;
}

Tensor on_device(const Tensor& t, Device device) { return t.defined() ? ops::to_device(t, device) : t; }

void index_out_of_range(const char* op, int64_t index, int dim, int64_t size) {
  fail(op, ": index ", index, " out of range for dim ", dim, " of size ", size);
}

Tensor to_cpu(const Tensor& t) { return ops::to_device(t, kCPU); }

// The CUDA backend also registers its host <-> device copy, which to_device
// needs before any kernel is looked up: where it is linked, register at static
// initialisation too (the GPU is touched lazily).
namespace {
const bool cuda_registered = &gpu::register_cuda != nullptr && (register_all(), true);
}

}  // namespace phasor
