// Bounded resources on hostile input (docs/bad-input.md, rows L*): every
// command, on any input, either does its work or ends with one line on stderr
// starting "phasor: " and an exit status in 1..127; never an out-of-memory
// kill, an abort, another signal or a hang. Each case runs the built CLI in a
// child process whose address space is capped (setrlimit RLIMIT_AS, set
// between fork and exec) and which the test kills when its time is up.
// A refusal up front must also be quick and use little memory.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/model_io.h"
#include "models/transformer.h"
#include "nn/checkpoint.h"
#include "phasor.h"
#include "tests/helpers.h"

extern char** environ;

using namespace phasor;
using namespace phasor::test;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

constexpr rlim_t kMemoryLimit = rlim_t{3} << 29;  // 1.5 GiB of address space for the child
constexpr double kRefusalSeconds = 10;            // a refusal made up front, even on a busy 2-core machine
constexpr long kRefusalExtraRssKb = 200 * 1024;   // ... and without building what the input asks for: at most
                                                  // this much above the binary's own footprint (a CUDA build maps
                                                  // ~100 MB of cuBLAS before main)

fs::path scratch() { return scratch_root("limits", /*remove_at_exit=*/true); }

struct Outcome {
  bool exited = false;     // ended by itself, with an exit status
  int status = -1;         // that status
  int signal = 0;          // the signal that ended it, when not the test's own kill
  bool timed_out = false;  // still running at the deadline: killed by the test
  double seconds = 0;
  long max_rss_kb = 0;     // its peak resident memory
  std::string out, err;
};

// Runs the CLI with `args` under the memory limit, killing it after timeout_s.
// One thread each for OpenMP and OpenBLAS, so that the address space it needs
// does not grow with the machine's core count (thread stacks, BLAS buffers).
Outcome run_limited(const std::vector<std::string>& args, double timeout_s) {
  static int counter = 0;
  const std::string out_path = (scratch() / ("stdout." + std::to_string(counter))).string();
  const std::string err_path = (scratch() / ("stderr." + std::to_string(counter))).string();
  ++counter;
  // Everything the child needs is prepared here: between fork and exec it may
  // only make async-signal-safe calls (the parent may hold OpenMP threads).
  std::vector<std::string> argv_text{PHASOR_CLI_PATH};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_text{"OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1"};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "OMP_NUM_THREADS=", 16) != 0 && std::strncmp(*e, "OPENBLAS_NUM_THREADS=", 21) != 0) env_text.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  const rlimit limit{kMemoryLimit, kMemoryLimit};

  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int in = open("/dev/null", O_RDONLY);
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 || setrlimit(RLIMIT_AS, &limit) != 0)
      _exit(126);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  Outcome r;
  int wstatus = 0;
  rusage usage{};
  for (;;) {
    const pid_t done = wait4(pid, &wstatus, WNOHANG, &usage);
    if (done == pid) break;
    if (done < 0) FAIL("wait4: ", std::strerror(errno));
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s) {
      kill(pid, SIGKILL);
      REQUIRE(wait4(pid, &wstatus, 0, &usage) == pid);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.exited = !r.timed_out && WIFEXITED(wstatus);
  r.status = r.exited ? WEXITSTATUS(wstatus) : -1;
  r.signal = !r.timed_out && WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
  r.max_rss_kb = usage.ru_maxrss;
  r.out = read_bytes(out_path);
  r.err = read_bytes(err_path);
  fs::remove(out_path);
  fs::remove(err_path);
  return r;
}

std::string describe(const Outcome& r) {
  return "exited " + std::to_string(r.exited) + ", status " + std::to_string(r.status) + ", signal " + std::to_string(r.signal) +
         ", timed out " + std::to_string(r.timed_out) + ", " + std::to_string(r.seconds) + " s, " + std::to_string(r.max_rss_kb / 1024) +
         " MiB peak; stderr: " + r.err.substr(0, 600);
}

// An error the CLI ended on by itself: exit status 1..127 (not a signal, not
// the test's kill), exactly one short line on stderr starting "phasor: " and
// mentioning `must_mention`, nothing on stdout.
void check_failed_cleanly(const Outcome& r, const std::string& must_mention) {
  INFO(describe(r));
  CHECK(r.exited);
  CHECK(r.status >= 1);
  CHECK(r.status <= 127);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.starts_with("phasor: "));
  CHECK(r.err.ends_with("\n"));
  CHECK(r.err.size() < 1000);  // a line a person reads, not a list of every tensor
  CHECK(r.err.find(must_mention) != std::string::npos);
  CHECK(r.out.empty());
}

// The peak memory of the binary refusing a trivial input (a missing file): its
// own footprint, the baseline the refusals are measured against.
long baseline_rss_kb() {
  static const long kb = run_limited({"info", (scratch() / "no-such-file.safetensors").string()}, 60).max_rss_kb;
  return kb;
}
long refusal_max_rss_kb() { return baseline_rss_kb() + kRefusalExtraRssKb; }

// ... and refused up front: quickly, before allocating what the input asks for.
void check_refused(const Outcome& r, const std::string& must_mention) {
  check_failed_cleanly(r, must_mention);
  INFO(describe(r));
  CHECK(r.seconds < kRefusalSeconds);
  CHECK(r.max_rss_kb < refusal_max_rss_kb());
}

ModelConfig tiny_config(Position position = Position::Rope) {
  return model_config(position, {.d_model = 16, .n_layers = 1, .n_heads = 2, .d_ff = 32, .max_seq_len = 64});
}

fs::path model_file(const std::string& name, const ModelConfig& c) {
  const fs::path p = scratch() / "models" / (name + ".safetensors");
  if (!fs::exists(p)) {
    fs::create_directories(p.parent_path());
    save_model(p.string(), CausalLM(c, 1));
  }
  return p;
}

// The tensors of the tiny model (27 KB) under a config that claims `changes`.
fs::path claiming_file(const std::string& name, const Json& changes) {
  Json config = to_json(tiny_config());
  config.update(changes);
  const fs::path p = scratch() / "claims" / (name + ".safetensors");
  fs::create_directories(p.parent_path());
  nn::save_tensors(p.string(), CausalLM(tiny_config(), 1).state_dict(), {{"format", "phasor-model"}, {"config", config.dump()}});
  return p;
}

const fs::path& data_file() {  // 400 KB of numbered lines: long enough for windows of 100,000 tokens
  static const fs::path p = [] {
    const fs::path f = scratch() / "data.txt";
    std::string text;
    for (int i = 0; text.size() < 400'000; ++i) text += "line " + std::to_string(i) + " of the text the limits are tested on\n";
    write_bytes(f, text);
    return f;
  }();
  return p;
}

}  // namespace

TEST_CASE("L1 a tiny model file whose config claims a huge model: info, eval, generate and grad refuse it before building it") {
  // Each config is valid (under 2^31 parameters) and claims 1-3 GB of weights; the file holds 27 KB.
  const std::vector<std::pair<fs::path, std::string>> claims{
      {claiming_file("wide_vocab", {{"vocab_size", 30'000'000}}), "the file's data section holds only"},
      {claiming_file("wide_model", {{"d_model", 8192}, {"n_heads", 2}}), "the file's data section holds only"},
      {claiming_file("deep_model", {{"n_layers", 20'000}, {"d_model", 64}, {"d_ff", 128}}), "its config describes 20000 layers"}};
  for (const auto& claim : claims) {  // a pair, not a structured binding: clang 14 cannot capture those in CAPTURE's lambda
    const fs::path& file = claim.first;
    const std::string& must_mention = claim.second;
    CAPTURE(file.string());
    const fs::path grad_out = scratch() / "grad.safetensors";
    check_refused(run_limited({"info", file.string()}, 60), must_mention);
    check_refused(run_limited({"eval", "--checkpoint", file.string(), "--data", data_file().string(), "--seq-len", "16"}, 60), must_mention);
    check_refused(run_limited({"generate", "--checkpoint", file.string(), "--prompt", "hi", "--tokens", "4"}, 60), must_mention);
    check_refused(run_limited({"grad", "--checkpoint", file.string(), "--data", data_file().string(), "--seq-len", "16", "--out",
                               grad_out.string()},
                              60),
                  must_mention);
    CHECK(!fs::exists(grad_out));
  }
  // The message names the first tensor that shows the difference.
  const Outcome r = run_limited({"info", claims[0].first.string()}, 60);
  CHECK(r.err.find("shape mismatch for tensor 'tok_emb.weight': the config asks for [30000000, 16], the file holds [256, 16]") !=
        std::string::npos);
}

TEST_CASE("L2 generate: memory follows the tokens generated; a request past the limits is refused up front") {
  const fs::path model =
      model_file("wide", model_config(Position::Rope, {.d_model = 256, .n_layers = 2, .n_heads = 4, .d_ff = 64, .max_seq_len = 64}));
  // 1,000,000 tokens (under the 2^20 positions allowed): a KV cache allocated
  // for the whole request would take 4 GB before the first token. It streams
  // instead, until the test stops it.
  const Outcome r = run_limited({"generate", "--checkpoint", model.string(), "--prompt", "In", "--tokens", "1000000", "--seed", "1"}, 4);
  INFO(describe(r));
  CHECK(r.timed_out);  // still generating: neither an error nor a kill by the memory limit
  CHECK(r.out.starts_with("In"));
  CHECK(r.out.size() > 50);
  CHECK(r.err.empty());
  CHECK(r.max_rss_kb < refusal_max_rss_kb());

  // 100,000,000 tokens: more than the 2^20 positions a model supports; refused at once.
  check_refused(run_limited({"generate", "--checkpoint", model.string(), "--prompt", "In", "--tokens", "100000000"}, 60),
                "generate: a prompt of 2 tokens plus --tokens 100000000 is more than the limit of 1048576 positions");
  // A 'learned' model cannot go past max_seq_len: refused before the first token, whatever the size asked.
  const fs::path learned = model_file("learned", tiny_config(Position::Learned));
  check_refused(run_limited({"generate", "--checkpoint", learned.string(), "--prompt", "In", "--tokens", "1000000"}, 60),
                "generate: prompt + tokens 1000002 exceeds max_seq_len 64 of this 'learned' position model");
}

TEST_CASE("L3 train: sizes too large to build are refused up front, or end in a clean out-of-memory error") {
  const fs::path run = scratch() / "train" / "run";
  const auto train = [&](std::vector<std::string> extra) {
    fs::remove_all(run);
    std::vector<std::string> args{"train", "--data", data_file().string(), "--run-dir", run.string(), "--steps", "2", "--threads", "1",
                                  "--log-every", "1000", "--eval-every", "0", "--eval-windows", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_limited(args, 120);
  };
  // Over 2^31 parameters: the config's own limit.
  check_refused(train({"--d-model", "1000000000"}), "more than the limit of 2^31");
  // Under 2^31, but more than the memory this process may use (27 GiB of weights,
  // gradients and AdamW state against 1.5 GiB): refused before the data is read.
  check_refused(train({"--d-model", "12288", "--n-heads", "4", "--n-layers", "1", "--d-ff", "32768"}), "of memory available to this process");
  CHECK(!fs::exists(run));
  check_refused(train({"--n-layers", "2000000", "--d-model", "8", "--n-heads", "2", "--d-ff", "8"}), "of memory available to this process");
  // A model that fits, with activations that do not: 16 x 8192 positions of width 2048, 1 GiB a tensor.
  // (Attention's own memory is O(N): the fused op holds no 8192 x 8192 scores.)
  check_failed_cleanly(train({"--d-model", "2048", "--n-heads", "2", "--n-layers", "1", "--d-ff", "32", "--seq-len", "8192", "--batch", "16"}),
                       "out of host memory");
}

TEST_CASE("L4 eval and grad with a --seq-len far beyond what memory holds: a clean out-of-memory error") {
  // Attention holds O(N) memory (the fused op), so it is the activations that
  // cannot fit: 100,000 positions of width 1024 take 400 MB a tensor.
  const fs::path model =
      model_file("wide-eval", model_config(Position::Rope, {.d_model = 1024, .n_layers = 1, .n_heads = 2, .d_ff = 32, .max_seq_len = 64}));
  check_failed_cleanly(run_limited({"eval", "--checkpoint", model.string(), "--data", data_file().string(), "--seq-len", "100000"}, 120),
                       "out of host memory");
  const fs::path grad_out = scratch() / "grad.safetensors";
  check_failed_cleanly(run_limited({"grad", "--checkpoint", model.string(), "--data", data_file().string(), "--seq-len", "100000", "--out",
                                    grad_out.string()},
                                   120),
                       "out of host memory");
  CHECK(!fs::exists(grad_out));
  check_refused(run_limited({"eval", "--checkpoint", model.string(), "--data", data_file().string(), "--seq-len", "9223372036854775807"}, 60),
                "eval: --seq-len 9223372036854775807 exceeds the 1048576 positions Phasor supports");
}

TEST_CASE("L5 an allocation failing outside the tensor allocator (std::bad_alloc) is one line: out of memory") {
  // 256 MiB of text (sparse, no disk space) is under the 1 GiB data limit, but
  // its tokens take 2 GiB (8 bytes each): the token vector cannot be allocated.
  const fs::path big = scratch() / "big.txt";
  write_bytes(big, "x");
  fs::resize_file(big, uintmax_t{256} << 20);
  const fs::path model = model_file("tiny", tiny_config());
  check_failed_cleanly(run_limited({"eval", "--checkpoint", model.string(), "--data", big.string()}, 120), "phasor: out of memory");
  fs::remove(big);
}

TEST_CASE("L6 train --resume of a run whose state.json claims a huge model: refused before building it") {
  const fs::path run = scratch() / "resume" / "run";
  fs::remove_all(run);
  const Outcome trained = run_limited({"train", "--data", data_file().string(), "--run-dir", run.string(), "--steps", "1", "--d-model", "16",
                                       "--n-heads", "2", "--n-layers", "1", "--d-ff", "32", "--seq-len", "16", "--batch", "2", "--threads",
                                       "1", "--eval-windows", "2"},
                                      120);
  REQUIRE_MESSAGE((trained.exited && trained.status == 0), describe(trained));
  const fs::path state = run / "ckpt-00000001" / "state.json";
  Json j = Json::parse(read_bytes(state));
  j["options"]["model"]["n_layers"] = 20'000;
  write_bytes(state, j.dump());
  check_refused(run_limited({"train", "--resume", run.string(), "--steps", "2"}, 60), "its config describes 20000 layers");
}
