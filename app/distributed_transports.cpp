#include "app/distributed_transports.h"

#include <cstdlib>

#include "app/distributed_mpi.h"   // PHASOR_WITH_MPI: always, in phasor_mpi
#include "app/distributed_nccl.h"  // PHASOR_WITH_NCCL

namespace phasor::distributed {

namespace {

#ifdef PHASOR_WITH_NCCL
// Before anything touches CUDA: give each rank on a node its own GPU unless the
// launcher (srun --gpus-per-task, a wrapper) already chose.
void pick_gpu_per_local_rank() {
  if (std::getenv("CUDA_VISIBLE_DEVICES") != nullptr) return;
  int local = env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("MPI_LOCALRANKID", env_int("SLURM_LOCALID", -1)));
  int local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", env_int("MPI_LOCALNRANKS", env_int("SLURM_NTASKS_PER_NODE", 1)));
  if (local >= 0 && local_size > 1) setenv("CUDA_VISIBLE_DEVICES", std::to_string(local).c_str(), 1);
}
#endif

}  // namespace

std::vector<std::string> transports() {
  std::vector<std::string> t{"mpi"};
#ifdef PHASOR_WITH_NCCL
  t.push_back("nccl");
#endif
  return t;
}

std::unique_ptr<Communicator> connect(const std::string& transport) {
#ifdef PHASOR_WITH_NCCL
  if (transport == "nccl") {
    pick_gpu_per_local_rank();
    return make_nccl_communicator();
  }
#endif
  PHASOR_CHECK(transport == "mpi", "distributed: no transport '", transport, "'");
  return std::make_unique<MpiCommunicator>();
}

void disconnect(Communicator& world) {
  if (auto* mpi = dynamic_cast<MpiCommunicator*>(&world)) mpi->finalize();
}

}  // namespace phasor::distributed
