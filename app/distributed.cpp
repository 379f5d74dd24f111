#include "app/distributed.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "app/distributed_transports.h"  // mpi and nccl, where the program links Phasor::mpi
#include "tensor/error.h"

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
  void all_reduce_max(std::vector<int64_t>&) override {}
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

bool Communicator::same_on_every_rank(const std::vector<int64_t>& values, std::vector<int64_t>* lo, std::vector<int64_t>* hi) {
  // The maximum of v and of -v over the ranks: the largest and the smallest v.
  // (Values are counts and 32-bit halves of hashes: -v does not overflow.)
  std::vector<int64_t> both(values);
  for (int64_t v : values) both.push_back(-v);
  all_reduce_max(both);
  const size_t n = values.size();
  bool same = true;
  for (size_t i = 0; i < n; ++i) same = same && both[i] == -both[n + i];
  if (lo != nullptr) {
    lo->resize(n);
    for (size_t i = 0; i < n; ++i) (*lo)[i] = -both[n + i];
  }
  if (hi != nullptr) hi->assign(both.begin(), both.begin() + static_cast<std::ptrdiff_t>(n));
  return same;
}

void require_ranks_agree(const std::vector<std::pair<std::string, std::string>>& parts) {
  Communicator& comm = world();
  if (comm.world_size() == 1) return;
  std::vector<int64_t> halves;
  for (const auto& part : parts) {
    uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits: the same on every platform
    for (unsigned char c : part.second) h = (h ^ c) * 1099511628211ull;
    halves.push_back(static_cast<int64_t>(h >> 32));
    halves.push_back(static_cast<int64_t>(h & 0xffffffffu));
  }
  std::vector<int64_t> lo, hi;
  if (comm.same_on_every_rank(halves, &lo, &hi)) return;
  std::string differ;
  for (size_t i = 0; i < parts.size(); ++i)
    if (lo[2 * i] != hi[2 * i] || lo[2 * i + 1] != hi[2 * i + 1]) differ += (differ.empty() ? "" : ", ") + parts[i].first;
  fail("distributed: the ranks were started with different ", differ,
       "; every rank must run the same command (only --threads and the paths may differ)");
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
