#include "tensor/cpu/backend.h"

namespace phasor::cpu {

Backend* backend_instance() {
  static CpuBackend backend;
  return &backend;
}

}  // namespace phasor::cpu
