#include "tensor/backend.h"

#include "tensor/cpu/backend.h"
#include "tensor/cpu/fork.h"

namespace phasor {

namespace {
// Built on first use, so a backend looked up during static initialisation is there.
Backend*& slot(DeviceType type) {
  static Backend* table[2] = {cpu::backend_instance(), nullptr};
  return table[static_cast<int>(type)];
}
}  // namespace

void register_backend(DeviceType type, Backend* backend) { slot(type) = backend; }

Backend& backend(Device device) {
  cpu::settle_after_fork();  // a forked child's first op drops it to one thread (tensor/cpu/fork.h)
  Backend* b = slot(device.type);
  PHASOR_CHECK(b != nullptr, "device ", device, " is not available (Phasor was built without CUDA or no GPU is present)");
  return *b;
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

void target_out_of_range(int64_t target, int64_t row, int64_t classes) {
  fail("cross_entropy: target ", target, " at row ", row, " is outside [0, ", classes, ")");
}

Tensor to_cpu(const Tensor& t) { return ops::to_device(t, kCPU); }

#ifdef PHASOR_WITH_CUDA
// Linking the CUDA backend (cuda/) registers it here, from an object every
// program links, so a static link cannot drop it; the GPU is touched lazily.
namespace gpu {
void register_cuda();
}
namespace {
const bool cuda_registered = (gpu::register_cuda(), true);
}
#endif

}  // namespace phasor
