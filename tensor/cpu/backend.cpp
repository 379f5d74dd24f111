#include "tensor/cpu/backend.h"

#include "tensor/cpu/fork.h"

namespace phasor::cpu {

Backend* backend_instance() {
  static CpuBackend backend;
  install_fork_handler();  // before the first parallel op (tensor/cpu/fork.h)
  return &backend;
}

// Called by the registry (tensor/backend.cpp) on its first lookup.
void register_cpu() { register_backend(DeviceType::CPU, backend_instance()); }

}  // namespace phasor::cpu
