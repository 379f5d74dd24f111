// Data-parallel `phasor train` under mpirun (docs/distributed.md): two ranks of
// --batch B train the same parameters as one process of --batch 2B; rank 0
// alone writes files; a rank that dies or hangs takes the job down with a clear
// error within the timeout; checkpoints of a 2-rank run resume with 2 ranks
// (only), and load in a single-process `phasor eval`. A case that needs MPI
// skips (tests/skip.h: ctest reports the binary as skipped, never as passed)
// when mpirun or the MPI transport is missing, and fails instead in a build
// configured with PHASOR_REQUIRE_ALL (CI). The NCCL case, which needs a GPU, is
// its own ctest test, test_distributed_nccl (tests/CMakeLists.txt).
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/distributed.h"
#ifdef PHASOR_WITH_CUDA
#include "cuda/cuda.h"
#endif
#include "nn/checkpoint.h"
#include "phasor.h"
#include "tests/helpers.h"
#include "tests/skip.h"

using namespace phasor;
using namespace phasor::test;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

fs::path scratch() { return scratch_root("distributed"); }

fs::path fresh_dir(const std::string& name) { return fresh_folder(scratch() / name) / "run"; }

// Runs a shell command (under `timeout`, so a hang fails the test instead of
// stalling it), capturing stdout and stderr separately.
Cli shell(const std::string& command, int timeout_s = 180) {
  return run_shell("timeout -k 5 " + std::to_string(timeout_s) + " " + command, scratch());
}

Cli phasor_cli(const std::string& args) { return shell(phasor_command() + " " + args); }

// `phasor <args>` as `ranks` MPI processes; `env` is exported to every rank.
Cli mpirun(int ranks, const std::string& args, const std::string& env = "", int timeout_s = 180) {
  // OpenMPI's own allocations at exit are not ours to fix: no leak report in sanitizer builds.
  std::string cmd = "mpirun -np " + std::to_string(ranks) + " --oversubscribe --allow-run-as-root --bind-to none -x ASAN_OPTIONS=detect_leaks=0";
  if (!env.empty()) cmd += " -x " + env;
  return shell(cmd + " " + phasor_command() + " " + args, timeout_s);
}

// Why the MPI tests cannot run here ("" when they can).
std::string skip_reason() {
  const std::vector<std::string> t = built_transports();
  if (std::find(t.begin(), t.end(), "mpi") == t.end())
    return "phasor was built without MPI (install libopenmpi-dev, re-run cmake)";
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0) return "mpirun is not on PATH";
  return "";
}

#define SKIP_WITHOUT_MPI()                                    \
  do {                                                        \
    const std::string why = skip_reason();                    \
    if (!why.empty()) PHASOR_SKIP_UNLESS_REQUIRED(why);       \
  } while (0)

// A few KB of text, deterministic.
const fs::path& data_file() {
  static const fs::path p = write_bytes(scratch() / "data.txt", verse_text(8192));
  return p;
}

// The tiny model of every run; `batch` is per rank.
std::string train_args(const fs::path& run_dir, int batch, const std::string& extra) {
  return "train --d-model 32 --n-layers 1 --n-heads 2 --d-ff 64 --seq-len 32 --threads 1 --log-every 1 --eval-windows 2"
         " --seed 5 --warmup 8 --batch " + std::to_string(batch) + " --data " + quote(data_file()) + " --run-dir " + quote(run_dir) +
         " " + extra;
}

std::vector<Json> log_lines(const fs::path& run_dir) {
  std::vector<Json> lines;
  std::ifstream in(run_dir / "log.jsonl");
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(Json::parse(line));
  return lines;
}

// The largest |a - b| / (atol + rtol |a|) over every tensor of two safetensors files.
double worst_difference(const fs::path& a, const fs::path& b, double atol, double rtol) {
  const nn::StateDict ta = nn::load_tensors(a.string()), tb = nn::load_tensors(b.string());
  REQUIRE(ta.size() == tb.size());
  REQUIRE(!ta.empty());
  double worst = 0;
  for (const auto& entry : ta) {
    const auto& t = entry.second;
    const std::string& name = entry.first;
    CAPTURE(name);
    REQUIRE(tb.count(name) == 1);
    REQUIRE(t.shape() == tb.at(name).shape());
    const std::vector<double> x = t.is_complex() ? view_as_real(t).to_vector<double>() : t.to_vector<double>();
    const std::vector<double> y = t.is_complex() ? view_as_real(tb.at(name)).to_vector<double>() : tb.at(name).to_vector<double>();
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]) / (atol + rtol * std::abs(x[i])));
  }
  return worst;
}

bool same_bytes(const fs::path& a, const fs::path& b) {
  const std::string x = read_bytes(a);
  return !x.empty() && x == read_bytes(b);
}

}  // namespace

TEST_CASE("2 ranks of --batch 2 train the parameters of 1 process of --batch 4, to float32 rounding") {
  SKIP_WITHOUT_MPI();
  const fs::path one = fresh_dir("one"), two = fresh_dir("two");
  const std::string common = "--steps 6 --eval-every 3";
  const Cli a = phasor_cli(train_args(one, 4, common));
  REQUIRE_MESSAGE(a.status == 0, a.err);
  const Cli b = mpirun(2, train_args(two, 2, common));
  REQUIRE_MESSAGE(b.status == 0, b.out, b.err);

  // Rank 0 alone prints and writes: one summary line, one log line per step.
  CHECK_MESSAGE(count_of(b.out, "trained 6 steps") == 1, b.out);
  const std::vector<Json> la = log_lines(one), lb = log_lines(two);
  REQUIRE(la.size() == lb.size());  // a second writer would have doubled the log
  for (size_t i = 0; i < la.size(); ++i) {
    CAPTURE(lb[i].dump());
    CHECK(la[i]["step"] == lb[i]["step"]);
    for (const char* key : {"loss", "val_loss", "grad_norm"})
      if (la[i].contains(key)) CHECK(lb[i][key].get<double>() == doctest::Approx(la[i][key].get<double>()).epsilon(1e-5).scale(0));
  }
  // The global batch (tokens/s counts every rank's rows) matches.
  const fs::path ca = latest_folder(one), cb = latest_folder(two);
  CHECK(ca.filename() == "ckpt-00000006");
  CHECK(cb.filename() == "ckpt-00000006");
  const double worst = worst_difference(ca / "model.safetensors", cb / "model.safetensors", 1e-6, 1e-4);
  MESSAGE("largest parameter difference, in units of 1e-6 + 1e-4 |p|: ", worst);
  CHECK(worst <= 1.0);
  const Json state = Json::parse(read_bytes(cb / "state.json"));
  CHECK(state["world_size"] == 2);
}

TEST_CASE("checkpoints of a 2-rank run resume exactly with 2 ranks, refuse 1, and load in a single-process eval") {
  SKIP_WITHOUT_MPI();
  const fs::path whole = fresh_dir("whole"), split = fresh_dir("split");
  const Cli w = mpirun(2, train_args(whole, 2, "--steps 8"));
  REQUIRE_MESSAGE(w.status == 0, w.err);
  const Cli s1 = mpirun(2, train_args(split, 2, "--steps 4"));
  REQUIRE_MESSAGE(s1.status == 0, s1.err);
  CHECK(latest_folder(split).filename() == "ckpt-00000004");

  // A different number of ranks is refused, leaving the run as it was.
  const Cli single = phasor_cli("train --resume " + quote(split) + " --steps 8");
  CHECK(single.status != 0);
  CHECK_MESSAGE(single.err.find("trained by 2 process") != std::string::npos, single.err);
  CHECK_MESSAGE(count_of(single.err, "\n") == 1, single.err);
  CHECK(latest_folder(split).filename() == "ckpt-00000004");

  const Cli s2 = mpirun(2, "train --resume " + quote(split) + " --steps 8 --dist-timeout 60");  // how to run may change
  REQUIRE_MESSAGE(s2.status == 0, s2.err);
  CHECK_MESSAGE(count_of(s2.out, "trained 8 steps") == 1, s2.out);
  const fs::path fw = latest_folder(whole), fs_ = latest_folder(split);
  CHECK(fw.filename() == "ckpt-00000008");
  CHECK(fs_.filename() == "ckpt-00000008");
  CHECK(same_bytes(fw / "model.safetensors", fs_ / "model.safetensors"));
  CHECK(same_bytes(fw / "optimizer.safetensors", fs_ / "optimizer.safetensors"));

  const Cli e = phasor_cli("eval --checkpoint " + quote(fs_ / "model.safetensors") + " --data " + quote(split / "validation.txt") +
                           " --seq-len 32 --json");
  REQUIRE_MESSAGE(e.status == 0, e.err);
  const Json r = Json::parse(e.out);
  CHECK(std::isfinite(r["loss"].get<double>()));
  CHECK(r["loss"].get<double>() < std::log(256.0));
}

TEST_CASE("a rank that exits abruptly takes the job down, non-zero, instead of leaving the other waiting") {
  SKIP_WITHOUT_MPI();
  const fs::path dir = fresh_dir("dies");
  const Cli r = mpirun(2, train_args(dir, 2, "--steps 50 --dist-timeout 5"), "PHASOR_TEST_FAULT=1:2:exit", 120);
  CHECK(r.status != 0);
  CHECK(r.status != 124);  // not our `timeout`: the job ended by itself
  CHECK_MESSAGE(r.seconds < 60, r.seconds);
  CHECK_MESSAGE(r.err.find("rank 1 exit at step 2") != std::string::npos, r.err);
  CHECK(!fs::exists(dir / "latest"));  // no step past 2 completed, so no checkpoint
}

TEST_CASE("a rank that hangs: the other times out with a clear error and aborts the job within the timeout") {
  SKIP_WITHOUT_MPI();
  const fs::path dir = fresh_dir("hangs");
  const Cli r = mpirun(2, train_args(dir, 2, "--steps 50 --dist-timeout 3"), "PHASOR_TEST_FAULT=1:2:hang", 120);
  CHECK(r.status != 0);
  CHECK(r.status != 124);
  CHECK_MESSAGE(r.seconds < 60, r.seconds);
  CHECK_MESSAGE(r.err.find("phasor: rank 0 of 2: distributed: all_reduce_mean at step 2 waited") != std::string::npos, r.err);
  CHECK_MESSAGE(r.err.find("another rank died or hung") != std::string::npos, r.err);
}

TEST_CASE("--distributed nccl on CPU tensors, or where it is not built, is one clear error") {
  SKIP_WITHOUT_MPI();
  const fs::path dir = fresh_dir("nccl");
  const Cli r = mpirun(2, train_args(dir, 2, "--steps 3 --distributed nccl --dist-timeout 20"));
  CHECK(r.status != 0);
  CHECK_MESSAGE(r.seconds < 60, r.seconds);
  const std::vector<std::string> t = built_transports();
  const bool built = std::find(t.begin(), t.end(), "nccl") != t.end();
  CHECK_MESSAGE(r.err.find(built ? "the nccl transport averages GPU gradients, but a gradient is on cpu"
                                 : "--distributed nccl is not built into this phasor") != std::string::npos,
                r.err);
}

// `phasor train` as 2 ranks started with different arguments (mpirun's MPMD form).
Cli mpirun_each(const std::string& rank0, const std::string& rank1) {
  const std::string mpi = " --oversubscribe --allow-run-as-root --bind-to none -x ASAN_OPTIONS=detect_leaks=0 ";
  return shell("mpirun -np 1" + mpi + phasor_command() + " " + rank0 + " : -np 1" + mpi + phasor_command() + " " + rank1);
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

// Before, a different --seed or --lr trained on and exited 0, and a different
// --d-model all-reduced gradients of other sizes: heap corruption, SIGABRT.
TEST_CASE("ranks started with a different model, seed, learning rate or data are refused at the start, on every rank") {
  SKIP_WITHOUT_MPI();
  const fs::path other = write_bytes(scratch() / "other.txt", verse_text(9000));
  struct Variant {
    const char* name;
    std::string from, to, differs;
  };
  const fs::path dir = fresh_dir("disagree");
  const std::string args = train_args(dir, 2, "--steps 3 --dist-timeout 60");
  for (const Variant& v : {Variant{"seed", "--seed 5", "--seed 6", "training options"},
                           Variant{"lr", "--warmup 8", "--warmup 8 --lr 0.002", "training options"},
                           Variant{"d_model", "--d-model 32", "--d-model 48", "model config"},
                           Variant{"data", "--data " + quote(data_file()), "--data " + quote(other), "data"}}) {
    CAPTURE(v.name);
    fs::remove_all(dir);
    const Cli r = mpirun_each(args, replaced(args, v.from, v.to));
    CHECK(r.status != 0);
    CHECK(r.status != 124);
    CHECK_MESSAGE(r.err.find("distributed: the ranks were started with different " + v.differs + ";") != std::string::npos, r.err);
    CHECK_MESSAGE(r.err.find("munmap") == std::string::npos, r.err);
    CHECK(!fs::exists(dir / "latest"));  // refused before any step
  }
  // The threads and the paths of the same text may differ.
  fs::remove_all(dir);
  const fs::path copy = write_bytes(scratch() / "copy.txt", read_bytes(data_file()));
  const Cli ok = mpirun_each(args, replaced(replaced(args, "--threads 1", "--threads 2"), "--data " + quote(data_file()), "--data " + quote(copy)));
  CHECK_MESSAGE(ok.status == 0, ok.err);
}

// Each all-reduce checks, with the other ranks, that they are in the same
// collective with the same element counts before it moves data: a rank with
// fewer elements would otherwise be read and written past its buffer. The
// test re-runs itself under mpirun, as the nccl case below does.
TEST_CASE("mpi: all-reduces whose ranks pass different element counts are refused on every rank") {
  if (std::getenv("PHASOR_COUNTS_CHILD") == nullptr) {
    SKIP_WITHOUT_MPI();
    const std::string self = fs::read_symlink("/proc/self/exe").string();
    const Cli r = shell("mpirun -np 2 --oversubscribe --allow-run-as-root --bind-to none -x PHASOR_COUNTS_CHILD=1 "
                        "-x ASAN_OPTIONS=detect_leaks=0 " + quote(self) + " '--test-case=mpi: all-reduces whose*' --no-colors");
    CHECK_MESSAGE(r.status == 0, r.out, r.err);
    CHECK_MESSAGE(r.out.find("Status: SUCCESS") != std::string::npos, r.out, r.err);
    return;
  }
  Communicator& comm = init_distributed({"mpi", 60.0});
  REQUIRE(comm.world_size() == 2);
  const int64_t n = comm.rank() == 0 ? 6 : 9;
  std::vector<double> sums(static_cast<size_t>(n), 1.0);
  CHECK_THROWS_WITH_AS(comm.all_reduce_sum(sums), doctest::Contains("all_reduce_sum: the ranks pass different element counts (from 6 to 9"),
                       Error);
  const Tensor g = zeros({n});
  CHECK_THROWS_WITH_AS(comm.all_reduce_mean({g}), doctest::Contains("all_reduce_mean: the ranks pass different element counts"), Error);
  // One rank in all_reduce_mean, the other in all_reduce_sum.
  std::vector<double> one{1.0};
  if (comm.rank() == 0) CHECK_THROWS_WITH_AS(comm.all_reduce_mean({zeros({4})}), doctest::Contains("in different collectives"), Error);
  else CHECK_THROWS_WITH_AS(comm.all_reduce_sum(one), doctest::Contains("in different collectives"), Error);
  // Agreeing ranks still reduce.
  std::vector<double> same{1.0, 2.0};
  comm.all_reduce_sum(same);
  CHECK(same == std::vector<double>{2.0, 4.0});
  finalize_distributed();
}

TEST_CASE("without a launcher, phasor train is one process whatever --distributed auto finds") {
  // Needs no MPI: the single-process path is the default and stays unchanged.
  const fs::path dir = fresh_dir("single");
  const Cli r = phasor_cli(train_args(dir, 2, "--steps 2 --distributed auto"));
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(Json::parse(read_bytes(latest_folder(dir) / "state.json"))["world_size"] == 1);
  const Cli bad = phasor_cli(train_args(fresh_dir("bad"), 2, "--steps 2 --distributed carrier-pigeon"));
  CHECK(bad.status != 0);
  CHECK(bad.err.find("--distributed") != std::string::npos);
}

// The NCCL transport on GPU buffers. The test re-runs itself under mpirun with
// PHASOR_NCCL_CHILD=1, one rank per GPU (PHASOR_NCCL_RANKS, default 1: one GPU
// is all a test machine is sure to have; NCCL refuses two ranks on one GPU).
// On the CUDA simulator (cuda/sim/) every rank has its own simulated GPU, and
// the default is 2 ranks; its NCCL carries the all-reduce over MPI.
// Each rank fills its gradients with (rank + 1) * pattern: the mean is
// (K + 1) / 2 * pattern. Tiny buckets make every gradient span several of them.
TEST_CASE("nccl: GPU gradients (float, complex, float64, strided) are averaged over the ranks") {
  const bool child = std::getenv("PHASOR_NCCL_CHILD") != nullptr;
  if (!child) {
    const std::vector<std::string> t = built_transports();
    if (std::find(t.begin(), t.end(), "nccl") == t.end())
      PHASOR_SKIP("the NCCL transport is not built (it needs MPI, CUDA and NCCL)");
    SKIP_WITHOUT_MPI();
#ifdef PHASOR_WITH_CUDA  // always, where NCCL is built
    // Only a machine without a GPU skips; a GPU that is there but fails is a failure.
    if (!gpu::available()) {
      if (!gpu::absent()) FAIL("a GPU is present but cannot be used: " << gpu::unavailable_reason());
      PHASOR_SKIP("no GPU on this machine (" + gpu::unavailable_reason() + ")");
    }
#endif
    const char* n = std::getenv("PHASOR_NCCL_RANKS");
#ifdef PHASOR_CUDA_SIM
    const std::string ranks = n != nullptr && *n != '\0' ? n : "2";
#else
    const std::string ranks = n != nullptr && *n != '\0' ? n : "1";
#endif
    const std::string self = fs::read_symlink("/proc/self/exe").string();
    const Cli r = shell("mpirun -np " + ranks + " --oversubscribe --allow-run-as-root --bind-to none -x PHASOR_NCCL_CHILD=1 "
                        "-x ASAN_OPTIONS=detect_leaks=0 " +
                        quote(self) + " '--test-case=nccl:*' --no-colors");
    CHECK_MESSAGE(r.status == 0, r.out, r.err);
    CHECK_MESSAGE(r.out.find("Status: SUCCESS") != std::string::npos, r.out, r.err);
    MESSAGE("nccl under mpirun -np ", ranks, ": ", r.out.substr(r.out.find("[doctest] test cases")));
    return;
  }
  Communicator& comm = init_distributed({"nccl", 60.0});  // before any CUDA call: it picks this rank's GPU
  REQUIRE(std::string(comm.transport()) == "nccl");
  comm.set_bucket_bytes(24);
  const double k = comm.world_size(), scale = comm.rank() + 1.0, mean = (k + 1.0) / 2.0;
  std::vector<float> f(15);
  std::vector<double> d(7);
  std::vector<c64> c(4);
  for (size_t i = 0; i < f.size(); ++i) f[i] = 0.25f * static_cast<float>(i) - 1.0f;
  for (size_t i = 0; i < d.size(); ++i) d[i] = 1.0 / (1.0 + static_cast<double>(i));
  for (size_t i = 0; i < c.size(); ++i) c[i] = c64(static_cast<float>(i), -2.0f * static_cast<float>(i));
  const Device gpu = cuda(0);
  auto scaled = [&](auto values) {
    for (auto& v : values) v *= static_cast<typename real_of_t<std::decay_t<decltype(v)>>::type>(scale);
    return values;
  };
  const Tensor gf = from_vector(scaled(f), {3, 5}).to(gpu);
  const Tensor gd = from_vector(scaled(d)).to(gpu);
  const Tensor gc = from_vector(scaled(c)).to(gpu);
  const Tensor base = from_vector(scaled(f), {3, 5}).to(gpu);
  const Tensor strided = base.transpose(0, 1);  // [5, 3], not contiguous
  REQUIRE(!strided.is_contiguous());
  comm.all_reduce_mean({gf, gd, gc, strided});
  const std::vector<double> rf = gf.to(kCPU).to_vector<double>(), rd = gd.to(kCPU).to_vector<double>();
  const std::vector<double> rc = view_as_real(gc.to(kCPU)).to_vector<double>();
  const std::vector<double> rs = base.to(kCPU).to_vector<double>();
  for (size_t i = 0; i < f.size(); ++i) CHECK(rf[i] == doctest::Approx(mean * f[i]).epsilon(1e-6));
  for (size_t i = 0; i < f.size(); ++i) CHECK(rs[i] == doctest::Approx(mean * f[i]).epsilon(1e-6));
  for (size_t i = 0; i < d.size(); ++i) CHECK(rd[i] == doctest::Approx(mean * d[i]).epsilon(1e-12));
  for (size_t i = 0; i < c.size(); ++i) {
    CHECK(rc[2 * i] == doctest::Approx(mean * c[i].real()).epsilon(1e-6));
    CHECK(rc[2 * i + 1] == doctest::Approx(mean * c[i].imag()).epsilon(1e-6));
  }

  // The two streams are ordered (NcclCommunicator, app/distributed_nccl.cpp): large
  // gradients, one strided, that Phasor's stream is still computing (GEMMs)
  // when the all-reduce starts, in two rounds of different values, so that
  // NCCL's stream reading a staging copy before Phasor's stream wrote it, or
  // Phasor's stream reading a mean before NCCL's wrote it, sees the other
  // round's numbers (or garbage). Every value is an exact float32 integer.
  // The simulator needs no long GEMMs: it defers each stream's work until
  // something waits for it, so a missing order shows at any size.
  comm.set_bucket_bytes(16 << 20);
#ifdef PHASOR_CUDA_SIM
  const int64_t n = 64;
#else
  const int64_t n = 2048;
#endif
  const Tensor all_ones = ones({n, n}, DType::Float32, gpu);
  for (int round = 1; round <= 2; ++round) {
    Tensor m = ops::matmul(all_ones, all_ones);  // n everywhere
    for (int i = 0; i < 4; ++i) m = ops::matmul(m, all_ones) * (1.0 / static_cast<double>(n));
    const Tensor filled = m * (static_cast<double>(round) * scale / static_cast<double>(n));  // round * (rank + 1)
    const Tensor other = m * (static_cast<double>(round + 2) * scale / static_cast<double>(n));
    const Tensor strided_big = filled.transpose(0, 1);
    comm.all_reduce_mean({strided_big, other});
    const std::vector<float> got = filled.to(kCPU).to_vector<float>(), got_other = other.to(kCPU).to_vector<float>();
    const float want = static_cast<float>(round * mean), want_other = static_cast<float>((round + 2) * mean);
    size_t wrong = 0, wrong_other = 0;
    for (float v : got) wrong += v != want;
    for (float v : got_other) wrong_other += v != want_other;
    CAPTURE(round);
    CHECK_MESSAGE(wrong == 0, wrong, " of ", got.size(), " strided values are not ", want, " (first: ", got[0], ")");
    CHECK_MESSAGE(wrong_other == 0, wrong_other, " of ", got_other.size(), " values are not ", want_other, " (first: ", got_other[0], ")");
  }
  finalize_distributed();
}

#ifdef PHASOR_CUDA_SIM
// On the CUDA simulator the NCCL transport averages as the MPI transport does
// (the simulator's ncclAvg is MPI's sum divided by the ranks), so 2 ranks
// training on device cuda through either end with the same bytes. On GPUs
// NCCL may round its mean differently, and needs one GPU per rank.
TEST_CASE("nccl: on the CUDA simulator, --distributed nccl trains exactly as --distributed mpi") {
  if (std::getenv("PHASOR_NCCL_CHILD") != nullptr) return;  // the case above's ranks
  SKIP_WITHOUT_MPI();
  const std::string common = "--steps 2 --device cuda --dist-timeout 60";
  const fs::path mpi = fresh_dir("sim_mpi"), nccl = fresh_dir("sim_nccl");
  const Cli a = mpirun(2, train_args(mpi, 2, common + " --distributed mpi"));
  REQUIRE_MESSAGE(a.status == 0, a.out, a.err);
  const Cli b = mpirun(2, train_args(nccl, 2, common + " --distributed nccl"));
  REQUIRE_MESSAGE(b.status == 0, b.out, b.err);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    CAPTURE(file);
    CHECK(read_bytes(latest_folder(mpi) / file) == read_bytes(latest_folder(nccl) / file));
  }
  const std::vector<Json> la = log_lines(mpi), lb = log_lines(nccl);
  REQUIRE(la.size() == lb.size());
  for (size_t i = 0; i < la.size(); ++i)
    if (la[i].contains("loss")) CHECK(la[i]["loss"] == lb[i]["loss"]);
}
#endif
