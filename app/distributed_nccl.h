#pragma once
// The NCCL transport of data-parallel training (app/distributed.h), built with
// PHASOR_WITH_NCCL: GPU gradients all-reduced by NCCL on device buffers, MPI
// for the rest (app/distributed_nccl.cpp, docs/distributed.md).
#include <memory>

#include "app/distributed.h"

namespace phasor::distributed {

std::unique_ptr<Communicator> make_nccl_communicator();

}  // namespace phasor::distributed
