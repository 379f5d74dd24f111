#include "app/distributed.h"

#include <cstdio>
#include <cstdlib>

#include "app/distributed_mpi.h"   // PHASOR_WITH_MPI
#include "app/distributed_nccl.h"  // PHASOR_WITH_NCCL

namespace phasor {

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return (end != v && *end == '\0') ? static_cast<int>(n) : fallback;
}

// ------------------------------------------------------------ one process

class SingleProcess final : public Communicator {
 public:
  const char* transport() const override { return "single"; }
  void all_reduce_mean(const std::vector<Tensor>&) override {}
  void all_reduce_sum(std::vector<double>&) override {}
  void barrier() override {}
  [[noreturn]] void abort(int code) override {
    std::fflush(nullptr);
    std::_Exit(code);
  }
};

std::unique_ptr<Communicator>& world_slot() {
  static std::unique_ptr<Communicator> slot = std::make_unique<SingleProcess>();
  return slot;
}

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

// ------------------------------------------------------------ entry points

void Communicator::average_gradients(const std::vector<Tensor>& params) {
  if (world_ == 1) return;
  std::vector<Tensor> grads;
  grads.reserve(params.size());
  for (const Tensor& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  all_reduce_mean(grads);
}

std::vector<std::string> built_transports() {
  std::vector<std::string> t{"single"};
#ifdef PHASOR_WITH_MPI
  t.push_back("mpi");
#endif
#ifdef PHASOR_WITH_NCCL
  t.push_back("nccl");
#endif
  return t;
}

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const int n = env_int(name, 0);
    if (n > 0) return n;
  }
  return 1;
}

Communicator& world() { return *world_slot(); }

Communicator& init_distributed(const DistributedOptions& o) {
  PHASOR_CHECK(o.mode == "auto" || o.mode == "off" || o.mode == "mpi" || o.mode == "nccl",
               "--distributed must be auto, off, mpi or nccl, got '", o.mode, "'");
  PHASOR_CHECK(o.timeout_s > 0, "--dist-timeout must be positive, got ", o.timeout_s);
  PHASOR_CHECK(std::string(world().transport()) == "single" && world().world_size() == 1,
               "distributed: already initialised");
  const int launched = launcher_world_size();
  std::string mode = o.mode;
  if (mode == "auto") mode = launched > 1 ? "mpi" : "off";
  std::string built;
  for (const std::string& t : built_transports()) built += (built.empty() ? "" : ", ") + t;
  if (mode == "mpi") {
#ifdef PHASOR_WITH_MPI
    world_slot() = std::make_unique<distributed::MpiCommunicator>();
#else
    fail("distributed: ", o.mode == "auto" ? "launched as one of " + std::to_string(launched) + " processes, but " : std::string(),
         "this phasor was built without MPI (built transports: ", built,
         "); install an MPI (libopenmpi-dev), re-run cmake and rebuild, or run a single process");
#endif
  } else if (mode == "nccl") {
#ifdef PHASOR_WITH_NCCL
    pick_gpu_per_local_rank();
    world_slot() = distributed::make_nccl_communicator();
#else
    fail("distributed: --distributed nccl is not built into this phasor (built transports: ", built,
         "); it needs MPI, the CUDA toolkit with NCCL and the CUDA backend at cmake time");
#endif
  }
  world().set_timeout_s(o.timeout_s);
  return world();
}

void finalize_distributed() {
#ifdef PHASOR_WITH_MPI
  if (auto* mpi = dynamic_cast<distributed::MpiCommunicator*>(world_slot().get())) mpi->finalize();
#endif
}

}  // namespace phasor
