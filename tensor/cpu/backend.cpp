#include "tensor/cpu/backend.h"

#include "tensor/cpu/fork.h"

namespace phasor::cpu {

Backend* backend_instance() {
  static CpuBackend backend;
  install_fork_handler();  // before the first parallel op (tensor/cpu/fork.h)
  return &backend;
}

// Called by the registry (tensor/backend.cpp) on its first lookup. The
// after-fork rule runs before every op, on any device (tensor/cpu/fork.h).
void register_cpu() {
  register_backend(DeviceType::CPU, backend_instance());
  register_before_op(&settle_after_fork);
}

}  // namespace phasor::cpu
