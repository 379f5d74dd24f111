// Fault injection: a checkpoint save that dies at any point (a write that fails
// after N bytes, SIGKILL between a file's write and its rename, SIGKILL at a
// random moment of `phasor train`), a full disk, a run folder that cannot be
// written, and NaN/Inf losses or gradients. In every case the previous
// checkpoint stays the latest one, loadable and byte for byte unchanged, no
// partial files (*.tmp.*, half-written checkpoint folders) are left behind, and
// the run resumes to exactly the result of an uninterrupted one.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/train.h"
#include "models/model_io.h"
#include "nn/atomic_file.h"
#include "nn/checkpoint.h"
#include "tests/helpers.h"

extern char** environ;

using namespace phasor;
using namespace phasor::test;
namespace fs = std::filesystem;
using Json = nlohmann::json;

// ------------------------------------------------------------ rename hook
//
// This binary's own rename() replaces the C library's for every caller in it,
// write_file_atomic included. Armed (only ever in a child process, see
// "fault child" below), the k-th rename (0-based) tells the parent through a
// pipe and waits there, after the file was written and synced but before it
// takes its final name, for the parent's SIGKILL.
// Armed in this process instead (RenameFault), the k-th rename fails with EIO.
namespace {
std::atomic<int> g_renames_before_stop{-1};
std::atomic<int> g_renames_before_failure{-1};
int g_stop_fd = -1;
}  // namespace

extern "C" int rename(const char* from, const char* to) noexcept {
  const int k = g_renames_before_stop.load();
  if (k == 0) {
    const char c = 'r';
    (void)!::write(g_stop_fd, &c, 1);
    for (;;) ::pause();
  }
  if (k > 0) g_renames_before_stop.store(k - 1);
  const int f = g_renames_before_failure.load();
  if (f == 0) {
    g_renames_before_failure.store(-1);
    errno = EIO;
    return -1;
  }
  if (f > 0) g_renames_before_failure.store(f - 1);
  return static_cast<int>(::syscall(SYS_renameat, AT_FDCWD, from, AT_FDCWD, to));
}

namespace {

fs::path scratch() { return scratch_root("faults"); }

fs::path fresh_dir(const std::string& name) { return fresh_folder(scratch() / name); }

std::vector<std::string> checkpoint_folders(const fs::path& run) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(run))
    if (e.path().filename().string().starts_with("ckpt-")) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

const fs::path& data_file() {
  static const fs::path p = write_bytes(scratch() / "data.txt", sample_text(4096));
  return p;
}

// A tiny run: warm-up longer than any run here, so a step's learning rate does
// not depend on the total (runs of different lengths agree step for step).
TrainOptions tiny_options(const fs::path& run_dir, int64_t steps) {
  TrainOptions o;
  o.model = tiny_cli_config(o.model.position);
  o.data = data_file().string();
  o.run_dir = run_dir.string();
  o.seq_len = 16;
  o.batch = 2;
  o.steps = steps;
  o.warmup = 50;
  o.eval_every = 0;
  o.eval_windows = 2;
  o.log_every = 1000;
  o.threads = 1;
  return o;
}

// The same run on the command line (progress and validation lines off, so a
// failure's message is the only line on stderr).
std::string train_args(const fs::path& run_dir, int64_t steps, const std::string& extra = "") {
  return "train --d-model 16 --n-layers 1 --n-heads 2 --d-ff 32 --max-seq-len 32 --seq-len 16 --batch 2 --warmup 50"
         " --eval-every 0 --eval-windows 2 --log-every 1000 --threads 1 --data " +
         quote(data_file()) + " --run-dir " + quote(run_dir) + " --steps " + std::to_string(steps) + " " + extra;
}

// Runs `[env] phasor <args>` through the shell, capturing stdout and stderr.
// A bound on each run: a command that should be refused must not hang the suite.
Cli phasor_cli(const std::string& args, const std::string& env = "") {
  return run_shell(env + " timeout -s KILL 600 " + phasor_command() + " " + args, scratch());
}

// Two checkpoint folders hold the same training state: model and optimizer
// byte for byte, state.json equal but for the run folder it names.
void check_same_checkpoint(const fs::path& a, const fs::path& b) {
  for (const char* f : {"model.safetensors", "optimizer.safetensors"}) {
    CAPTURE(f);
    CHECK(read_bytes(a / f) == read_bytes(b / f));
  }
  Json sa = Json::parse(read_bytes(a / "state.json")), sb = Json::parse(read_bytes(b / "state.json"));
  sa["options"].erase("run_dir");
  sb["options"].erase("run_dir");
  CHECK(sa == sb);
}

class RenameFault {
 public:
  explicit RenameFault(int k) { g_renames_before_failure.store(k); }
  ~RenameFault() { g_renames_before_failure.store(-1); }
};

// A run folder trained `steps` steps with one checkpoint at the end, made once
// per name and copied for each use.
fs::path pristine_run(const std::string& name, int64_t steps) {
  const fs::path run = scratch() / "pristine" / name;
  if (!fs::exists(run / "latest")) {
    fs::remove_all(run);
    fs::create_directories(run.parent_path());
    train(tiny_options(run, steps));
  }
  return run;
}

fs::path copy_of(const fs::path& run, const std::string& name) {
  const fs::path copy = fresh_dir(name) / "run";
  fs::copy(run, copy, fs::copy_options::recursive);
  return copy;
}

}  // namespace

// ============================================================== write failures

TEST_CASE("a checkpoint save that fails after N bytes, for N across every file, keeps the previous checkpoint") {
  const fs::path pristine = pristine_run("three_steps", 3);
  REQUIRE(latest_name(pristine) == "ckpt-00000003");
  const std::map<std::string, std::string> before = tree_bytes(pristine, {"log.jsonl"});
  const std::string latest_before = read_bytes(pristine / "latest");

  // What an uninterrupted resume to step 6 writes, to aim the faults at.
  const fs::path clean = copy_of(pristine, "fault_sweep_clean");
  resume(clean.string(), 6);
  REQUIRE(latest_name(clean) == "ckpt-00000006");
  const size_t model = fs::file_size(clean / "ckpt-00000006" / "model.safetensors");
  const size_t optimizer = fs::file_size(clean / "ckpt-00000006" / "optimizer.safetensors");
  const size_t state = fs::file_size(clean / "ckpt-00000006" / "state.json");
  const size_t largest = std::max({model, optimizer, state});
  std::vector<size_t> budgets{0, 1, 7, 8, 9, 13, 14, 15, 100, state - 1, state, state + 1, model - 1, model, model + 1,
                              optimizer - 1};
  for (size_t i = 1; i < 16; ++i) budgets.push_back(largest * i / 16);

  for (size_t budget : budgets) {
    CAPTURE(budget);
    const fs::path run = copy_of(pristine, "fault_sweep");
    std::string e;
    {
      WriteFault fault(budget);
      e = error_of([&] { resume(run.string(), 6); });
    }
    // Every file is written whole to a temporary name first, so the save fails
    // as soon as any of its files is larger than the budget.
    CHECK(contains(e, "No space left"));
    CHECK(read_bytes(run / "latest") == latest_before);
    CHECK(tree_bytes(run, {"log.jsonl"}) == before);  // no new folder, no temporary, old checkpoint byte for byte
    CHECK(temporaries(run).empty());
    const nn::TrainingCheckpoint ck = nn::load_training_checkpoint((run / "ckpt-00000003").string());
    CHECK(ck.state.at("step") == 3);
  }
  // With room again, the run resumes to exactly the uninterrupted result.
  const fs::path run = copy_of(pristine, "fault_sweep_after");
  {
    WriteFault fault(largest);  // every file fits
    resume(run.string(), 6);
  }
  check_same_checkpoint(run / "ckpt-00000006", clean / "ckpt-00000006");
}

TEST_CASE("a rename that fails, at every rename of a save (the last being `latest`), keeps the previous checkpoint") {
  const fs::path pristine = pristine_run("three_steps", 3);
  const std::map<std::string, std::string> before = tree_bytes(pristine, {"log.jsonl"});
  const char* const files[] = {"model.safetensors", "optimizer.safetensors", "state.json", "latest"};
  for (int k = 0; k < 4; ++k) {
    CAPTURE(k);
    const fs::path run = copy_of(pristine, "rename_fault");
    std::string e;
    {
      RenameFault fault(k);
      e = error_of([&] { resume(run.string(), 6); });
    }
    CHECK(contains(e, files[k]));
    CHECK(contains(e, "Input/output error"));
    CHECK(tree_bytes(run, {"log.jsonl"}) == before);  // no step-6 folder, not even a complete one `latest` never named
    CHECK(temporaries(run).empty());
  }
}

TEST_CASE("an unwritable run folder: clear one-line error, nothing left behind, previous checkpoint intact") {
  const fs::path root = fresh_dir("unwritable");
  // A run folder under a regular file cannot be created.
  write_bytes(root / "file", "a regular file\n");
  const Cli r = phasor_cli(train_args(root / "file" / "run", 3));
  check_one_line_failure(r, "file/run");
  CHECK(read_bytes(root / "file") == "a regular file\n");
  CHECK(tree_bytes(root).size() == 1);

  // The next checkpoint's folder cannot be created (a regular file holds its name).
  const fs::path run = root / "run";
  const Cli first = phasor_cli(train_args(run, 3, "--ckpt-every 1"));
  REQUIRE_MESSAGE(first.status == 0, first.err);
  REQUIRE(latest_name(run) == "ckpt-00000003");
  write_bytes(run / "ckpt-00000004", "in the way\n");
  const std::map<std::string, std::string> before = tree_bytes(run, {"log.jsonl"});
  const Cli again = phasor_cli("train --resume " + quote(run) + " --steps 6");
  check_one_line_failure(again, "ckpt-00000004");
  CHECK(tree_bytes(run, {"log.jsonl"}) == before);  // the blocking file too: nothing of the user's is removed
  CHECK(temporaries(run).empty());
  CHECK(nn::load_training_checkpoint((run / "ckpt-00000003").string()).state.at("step") == 3);
  // Once the way is clear the run continues.
  fs::remove(run / "ckpt-00000004");
  const Cli resumed = phasor_cli("train --resume " + quote(run) + " --steps 6");
  CHECK_MESSAGE(resumed.status == 0, resumed.err);
  CHECK(latest_name(run) == "ckpt-00000006");
}

// ============================================================== SIGKILL

// Runs only as the child process of the SIGKILL test below (the variables are
// unset in a normal run, so this case does nothing): resumes the run and stops
// at the k-th rename, where the parent kills it.
TEST_CASE("fault child: resume a run and stop at the k-th rename (only as a child of the SIGKILL test)") {
  const char* run = std::getenv("PHASOR_FAULTS_CHILD_RUN");
  if (!run) return;
  g_stop_fd = std::atoi(std::getenv("PHASOR_FAULTS_CHILD_FD"));
  g_renames_before_stop.store(std::atoi(std::getenv("PHASOR_FAULTS_CHILD_RENAME")));
  resume(run, std::atoll(std::getenv("PHASOR_FAULTS_CHILD_STEPS")));
  const char done = 'd';
  (void)!::write(g_stop_fd, &done, 1);
  ::_exit(0);
}

namespace {

// Starts this test binary as a child running only the "fault child" case.
pid_t spawn_child(const fs::path& run, int rename_index, int64_t steps, int write_fd) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  env_strings.push_back("PHASOR_FAULTS_CHILD_RUN=" + run.string());
  env_strings.push_back("PHASOR_FAULTS_CHILD_RENAME=" + std::to_string(rename_index));
  env_strings.push_back("PHASOR_FAULTS_CHILD_STEPS=" + std::to_string(steps));
  env_strings.push_back("PHASOR_FAULTS_CHILD_FD=" + std::to_string(write_fd));
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::string filter = "--test-case=fault child*";
  std::vector<char*> argv{const_cast<char*>(self.c_str()), filter.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(rc == 0);
  return pid;
}

// Waits up to `seconds` for one byte from fd; returns it, or 0 on timeout or EOF.
char wait_byte(int fd, int seconds) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, seconds * 1000) <= 0) return 0;
  char c = 0;
  return ::read(fd, &c, 1) == 1 ? c : 0;
}

}  // namespace

TEST_CASE("SIGKILL between a file's write and its rename, at every rename of a save, keeps the previous checkpoint") {
  const fs::path pristine = pristine_run("three_steps", 3);
  const fs::path clean = copy_of(pristine, "kill_clean");
  resume(clean.string(), 6);
  const std::map<std::string, std::string> before = tree_bytes(pristine / "ckpt-00000003");
  const std::string latest_before = read_bytes(pristine / "latest");

  // The save at step 6 renames model.safetensors, optimizer.safetensors,
  // state.json, then latest: stop before each of them.
  for (int k = 0; k < 4; ++k) {
    CAPTURE(k);
    const fs::path run = copy_of(pristine, "kill");
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    ::fcntl(fds[1], F_SETFD, 0);  // the child inherits the write end
    const pid_t pid = spawn_child(run, k, 6, fds[1]);
    ::close(fds[1]);
    const char got = wait_byte(fds[0], 300);
    ::close(fds[0]);
    ::kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE_MESSAGE(got == 'r', "the child did not stop at rename ", k, " (got '", got, "')");
    CHECK(WIFSIGNALED(status));

    // Killed mid-save: `latest` still names the step-3 checkpoint, which is whole.
    CHECK(read_bytes(run / "latest") == latest_before);
    CHECK(tree_bytes(run / "ckpt-00000003") == before);
    CHECK(nn::load_training_checkpoint((run / "ckpt-00000003").string()).state.at("step") == 3);
    CHECK(!temporaries(run).empty());  // the killed save's file, still under its temporary name
    // Resuming finishes the run exactly as if nothing happened, and clears the debris.
    const TrainSummary s = resume(run.string(), 6);
    CHECK(s.steps_done == 6);
    CHECK(latest_name(run) == "ckpt-00000006");
    check_same_checkpoint(run / "ckpt-00000006", clean / "ckpt-00000006");
    CHECK_MESSAGE(temporaries(run).empty(), temporaries(run).front());
  }
}

TEST_CASE("`phasor train` killed at random moments always leaves a loadable latest checkpoint and resumes") {
  const fs::path run = fresh_dir("random_kill") / "run";
  const std::string cli = PHASOR_CLI_PATH;
  const std::vector<std::string> args_text{"train", "--d-model", "16", "--n-layers", "1", "--n-heads", "2", "--d-ff", "32",
                                           "--seq-len", "16", "--batch", "2", "--warmup", "50", "--eval-every", "0",
                                           "--eval-windows", "2", "--log-every", "1000", "--threads", "1", "--ckpt-every", "1",
                                           "--steps", "100000", "--data", data_file().string(), "--run-dir", run.string()};
  int kills = 0;
  for (int delay_ms : {0, 3, 11, 29, 57}) {
    CAPTURE(delay_ms);
    std::vector<std::string> args = args_text;
    if (fs::exists(run / "latest")) args = {"train", "--resume", run.string()};
    std::string program = cli;
    std::vector<char*> argv{program.data()};
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    const std::string err_file = (run.parent_path() / "stderr").string();
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    REQUIRE(posix_spawn(&pid, cli.c_str(), &actions, nullptr, argv.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&actions);
    // Wait for a checkpoint newer than the last one seen, then a little more.
    const std::string seen = latest_name(run);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    int status = 0;
    bool exited = false;
    while (latest_name(run) == seen && std::chrono::steady_clock::now() < give_up) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        exited = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    if (!exited) {
      ::kill(pid, SIGKILL);
      REQUIRE(::waitpid(pid, &status, 0) == pid);
      ++kills;
    }
    REQUIRE_MESSAGE(!exited, "phasor train ended by itself with status ", status, ": ", read_bytes(err_file));

    const std::string latest = latest_name(run);
    REQUIRE(!latest.empty());
    const nn::TrainingCheckpoint ck = nn::load_training_checkpoint((run / latest).string());
    CHECK(latest == "ckpt-" + std::string(8 - std::to_string(ck.state.at("step").get<int64_t>()).size(), '0') +
                        std::to_string(ck.state.at("step").get<int64_t>()));
    CHECK(load_model((run / latest / "model.safetensors").string())->config().d_model == 16);
  }
  CHECK(kills == 5);
  // The run then finishes, whatever moment it was killed at.
  const Cli done = phasor_cli("train --resume " + quote(run) + " --steps " + std::to_string(
      nn::load_training_checkpoint((run / latest_name(run)).string()).state.at("step").get<int64_t>() + 2));
  CHECK_MESSAGE(done.status == 0, done.err);
  CHECK(temporaries(run).empty());
}

// ============================================================== NaN and Inf

TEST_CASE("a NaN or Inf loss or gradient: the step is skipped, counted and logged, and the run goes on") {
  for (const std::string kind : {"loss", "inf", "grad"}) {
    CAPTURE(kind);
    const fs::path run = fresh_dir("nan_" + kind) / "run";
    const Cli r = phasor_cli(train_args(run, 5), "PHASOR_FAULT_NAN_AT_STEP=2,1," + kind);
    REQUIRE_MESSAGE(r.status == 0, r.err);
    CHECK(contains(r.out, "trained 5 steps"));
    const Json state = Json::parse(read_bytes(run / "ckpt-00000005" / "state.json"));
    CHECK(state.at("skipped_steps") == 1);
    CHECK(state.at("optimizer_steps") == 4);  // the parameters were not updated by the bad step
    int skipped_lines = 0;
    std::istringstream log(read_bytes(run / "log.jsonl"));
    for (std::string line; std::getline(log, line);) {
      const Json j = Json::parse(line);
      if (j.value("skipped", false)) {
        ++skipped_lines;
        CHECK(j.at("step") == 2);
      }
    }
    CHECK(skipped_lines == 1);
  }
  // A malformed hook value is refused, not ignored.
  const fs::path run = fresh_dir("nan_bad_hook") / "run";
  check_one_line_failure(phasor_cli(train_args(run, 2), "PHASOR_FAULT_NAN_AT_STEP=soon"), "PHASOR_FAULT_NAN_AT_STEP");
}

TEST_CASE("NaN steps past --max-bad-steps in a row stop the run; the checkpoint before the divergence stays the latest") {
  const fs::path run = fresh_dir("diverge") / "run";
  const Cli r = phasor_cli(train_args(run, 10, "--ckpt-every 1 --max-bad-steps 3"), "PHASOR_FAULT_NAN_AT_STEP=3,1000");
  check_one_line_failure(r, "3 steps in a row had a NaN or Inf");
  CHECK(r.out.empty());
  CHECK(latest_name(run) == "ckpt-00000003");
  CHECK(checkpoint_folders(run) == std::vector<std::string>{"ckpt-00000002", "ckpt-00000003"});
  CHECK(temporaries(run).empty());
  // That checkpoint is exactly the one a clean 3-step run writes.
  const fs::path clean = fresh_dir("diverge_clean") / "run";
  const Cli c = phasor_cli(train_args(clean, 3, "--ckpt-every 1 --max-bad-steps 3"));
  REQUIRE_MESSAGE(c.status == 0, c.err);
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    CHECK(read_bytes(run / "ckpt-00000003" / f) == read_bytes(clean / "ckpt-00000003" / f));
  // Without the fault, the run resumes from it and finishes.
  const Cli resumed = phasor_cli("train --resume " + quote(run));
  CHECK_MESSAGE(resumed.status == 0, resumed.err);
  CHECK(latest_name(run) == "ckpt-00000010");
}

TEST_CASE("SIGTERM and SIGHUP stop `phasor train` as Ctrl-C does: a checkpoint of the step reached, exit 130, and it resumes") {
  for (const int sig : {SIGTERM, SIGHUP, SIGINT}) {
    CAPTURE(sig);
    const fs::path run = fresh_dir("signal_" + std::to_string(sig)) / "run";
    const std::string cli = PHASOR_CLI_PATH;
    std::vector<std::string> args{"train", "--d-model", "16", "--n-layers", "1", "--n-heads", "2", "--d-ff", "32", "--seq-len", "16",
                                  "--batch", "2", "--eval-every", "0", "--eval-windows", "2", "--log-every", "1", "--threads", "1",
                                  "--steps", "1000000", "--data", data_file().string(), "--run-dir", run.string()};
    std::string program = cli;
    std::vector<char*> argv{program.data()};
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    const std::string err_file = (run.parent_path() / "stderr").string();
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    REQUIRE(posix_spawn(&pid, cli.c_str(), &actions, nullptr, argv.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&actions);
    // Wait until it has logged a few steps (it never saves on its own before its millionth step).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < give_up) {
      std::error_code ec;
      if (fs::exists(run / "log.jsonl") && fs::file_size(run / "log.jsonl", ec) > 200) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::kill(pid, sig);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE_MESSAGE(WIFEXITED(status), "ended by signal ", WTERMSIG(status), ": the run was lost");
    CHECK(WEXITSTATUS(status) == 130);
    CHECK(contains(read_bytes(err_file), "interrupted: saving a checkpoint"));
    const std::string latest = latest_name(run);
    REQUIRE(!latest.empty());
    CHECK(nn::load_training_checkpoint((run / latest).string()).state.at("step").get<int64_t>() > 0);
    CHECK(temporaries(run).empty());
  }
}

TEST_CASE("NaN steps past --max-bad-steps without --ckpt-every: the last good state is saved before the run stops") {
  const fs::path run = fresh_dir("diverge_no_ckpt") / "run";
  const Cli r = phasor_cli(train_args(run, 10, "--max-bad-steps 3"), "PHASOR_FAULT_NAN_AT_STEP=3,1000");
  check_one_line_failure(r, "3 steps in a row had a NaN or Inf");
  const std::string latest = latest_name(run);
  REQUIRE(!latest.empty());  // before: no checkpoint at all, the whole run lost
  const nn::TrainingCheckpoint ck = nn::load_training_checkpoint((run / latest).string());
  CHECK(ck.state.at("optimizer_steps") == 3);  // the skipped steps changed nothing
  // Its weights are those of a clean 3-step run.
  const fs::path clean = fresh_dir("diverge_no_ckpt_clean") / "run";
  const Cli c = phasor_cli(train_args(clean, 3, "--max-bad-steps 3"));
  REQUIRE_MESSAGE(c.status == 0, c.err);
  check_same_tensors(run / latest / "model.safetensors", clean / "ckpt-00000003" / "model.safetensors");
  check_same_tensors(run / latest / "optimizer.safetensors", clean / "ckpt-00000003" / "optimizer.safetensors");
}
