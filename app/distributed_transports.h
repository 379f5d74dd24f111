#pragma once
// The transports beyond one process (mpi; nccl where built) are a library of
// their own, phasor_mpi (the package's Phasor::mpi), so that a program on
// Phasor::app alone links no MPI or NCCL library. app/distributed.cpp reaches
// them only through these functions, declared weak: their address is null in a
// program that does not link the library. Phasor::mpi's link option
// (--undefined=phasor::distributed::disconnect) keeps their object, which a
// static link would otherwise drop, in the programs that link it.
#include <memory>
#include <string>
#include <vector>

#include "app/distributed.h"

namespace phasor::distributed {

// The transports linked: "mpi", then "nccl" where built.
[[gnu::weak]] std::vector<std::string> transports();
// A communicator of `transport`, one of transports().
[[gnu::weak]] std::unique_ptr<Communicator> connect(const std::string& transport);
// Ends MPI if `world` is an MPI communicator (finalize_distributed()).
[[gnu::weak]] void disconnect(Communicator& world);

// An integer from the environment, `fallback` when unset or not a number.
int env_int(const char* name, int fallback);

}  // namespace phasor::distributed
