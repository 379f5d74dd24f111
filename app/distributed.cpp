#include "app/distributed.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "app/distributed_transports.h"  // mpi and nccl, where the program links Phasor::mpi

namespace phasor {

int distributed::env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return (end != v && *end == '\0') ? static_cast<int>(n) : fallback;
}

namespace {

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
  if (&distributed::transports != nullptr)
    for (std::string& name : distributed::transports()) t.push_back(std::move(name));
  return t;
}

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const int n = distributed::env_int(name, 0);
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
  const std::vector<std::string> transports = built_transports();
  std::string built;
  for (const std::string& t : transports) built += (built.empty() ? "" : ", ") + t;
  const bool linked = std::find(transports.begin(), transports.end(), mode) != transports.end();
  if (mode == "mpi" && !linked) {
    fail("distributed: ", o.mode == "auto" ? "launched as one of " + std::to_string(launched) + " processes, but " : std::string(),
         "this phasor was built without MPI (built transports: ", built,
         "); install an MPI (libopenmpi-dev), re-run cmake and rebuild, or run a single process");
  } else if (mode == "nccl" && !linked) {
    fail("distributed: --distributed nccl is not built into this phasor (built transports: ", built,
         "); it needs MPI, the CUDA toolkit with NCCL and the CUDA backend at cmake time");
  }
  if (mode != "off") world_slot() = distributed::connect(mode);
  world().set_timeout_s(o.timeout_s);
  return world();
}

void finalize_distributed() {
  if (&distributed::disconnect != nullptr) distributed::disconnect(world());
}

}  // namespace phasor
