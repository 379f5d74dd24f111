// `phasor sweep`: every variant on every task with several seeds; resumable (docs/RESULTS.md).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "app/cli/command.h"
#include "app/output_path.h"
#include "app/sweep.h"
#include "tensor/error.h"

namespace phasor::cli {

namespace {

class Sweep final : public Command {
 public:
  Sweep() : Command("sweep", "train and evaluate every variant on every task with several seeds (docs/RESULTS.md)") {}

  void add_flags(Flags& flags) override {
    flags.option("--preset", preset_,
                 "quick (a 2-core CPU, under 40 minutes), long (long context to 65,536 positions, 2 cores, about an hour), full (a GPU) "
                 "scale (three model sizes in bf16, 2 cores, at most 6 hours: run it in pieces with --stop-after) or rivals "
                 "(complexformer beside rope, pope and carope at quick's size, every task at 1x, 4x and 16x the training length, with PI and YaRN) "
                 "or length (every variant on the tasks passkey, copy, recall and flipflop, trained at 128 and scored by exact match at 1x to 16x; "
                 "2 cores, at most 6 hours: run it in pieces)")
        .one_of({"quick", "long", "full", "scale", "rivals", "length"});
    flags.option("--out", out_, "folder of the sweep; rerunning continues it, and more --seeds, lengths, --tasks or --variants extend it").required();
    flags.option("--jobs", jobs_, "cells trained at once (default: the preset's)").within(1, 256);
    flags.option("--steps", steps_, "training steps per cell (default: the preset's)").within(int64_t{1}, int64_t{1'000'000'000'000});
    flags.option("--seeds", seeds_, "seeds per cell (default: the preset's)").within(int64_t{1}, int64_t{100});
    flags.option("--eval-tokens", eval_tokens_, "predictions scored per evaluation length (default: the preset's)").within(int64_t{1}, int64_t{1} << 31);
    flags.option("--arith-problems", arith_, "held-out problems for arith exact match (default: the preset's)").within(int64_t{0}, int64_t{100'000});
    flags.option("--examples", task_examples_, "examples per evaluation length of a built-in task, scored by exact match (default: the preset's, 100)")
        .within(int64_t{1}, int64_t{1'000'000});
    flags.option("--tasks", tasks_, "only these of the preset's tasks (kjv, code, arith, passkey, copy, recall, flipflop)")
        .one_of({"kjv", "code", "arith", "passkey", "copy", "recall", "flipflop"});
    flags.option("--data", files_, "text files (or folders of them) to sweep, each a task named by its stem, or built-in tasks (passkey, copy, "
                                   "recall, flipflop) (instead of the preset's tasks, unless --tasks names some too)");
    flags.option("--variants", variants_, "only these of the preset's variants, by name (e.g. complexformer-rope rope), and evaluation-time "
                                          "entries VARIANT+METHOD (rope+pi, rope+ntk, rope+yarn: the trained variant evaluated with that "
                                          "context extension, S = length / training length)");
    flags.option("--d-model", shape_.d_model, "model width of every main-grid variant (default: the preset's; the efficiency twins keep their ratio)")
        .within(int64_t{2}, int64_t{65536});
    flags.option("--n-layers", shape_.n_layers, "layers (default: the preset's)").within(int64_t{1}, int64_t{1024});
    flags.option("--n-heads", shape_.n_heads, "attention heads (default: the preset's)").within(int64_t{1}, int64_t{1024});
    flags.option("--d-ff", shape_.d_ff, "feed-forward width (default: the preset's)").within(int64_t{1}, int64_t{1} << 20);
    flags.option("--seq-len", shape_.seq_len, "training length; the evaluation lengths keep their ratio to it (default: the preset's)")
        .within(int64_t{1}, int64_t{1} << 20);
    flags.option("--eval-lengths", eval_lengths_, "lengths the long-context task is evaluated at besides the training length (default: the preset's)")
        .within(int64_t{1}, int64_t{1} << 20);
    flags.option("--throughput-rounds", rounds_, "rounds of the throughput measurement (default: the preset's)").within(int64_t{0}, int64_t{100});
    flags.option("--device", device_, "cpu or cuda (default: the preset's)").one_of({"cpu", "cuda"});
    flags.option("--stop-after", stop_after_, "start no cell after this many minutes (running ones finish; 0: only write the plan); rerun to continue").finite_within(0, 1e6);
    flags.flag("--report-only", report_only_, "only rewrite report.md and the plots from the results so far");
    flags.option("--cell", cell_, "run one cell of an existing sweep in this process (what the sweep itself starts)");
  }

  int run(const Flags&) override {
    PHASOR_CHECK(!is_run_folder(out_), "sweep: --out '", out_, "' holds a training run, not a sweep; choose another --out");
    if (!cell_.empty()) {
      run_sweep_cell(out_, cell_);
      return 0;
    }
    if (!report_only_) {
      SweepPlan plan = sweep_preset(preset_);
      if (jobs_ > 0) plan.jobs = jobs_;
      if (steps_ > 0) set_sweep_steps(plan, steps_);
      if (seeds_ > 0) plan.seeds = seeds_;
      set_sweep_shape(plan, shape_);
      if (!eval_lengths_.empty()) {
        std::erase(eval_lengths_, plan.seq_len());
        std::sort(eval_lengths_.begin(), eval_lengths_.end());
        eval_lengths_.erase(std::unique(eval_lengths_.begin(), eval_lengths_.end()), eval_lengths_.end());
        eval_lengths_.insert(eval_lengths_.begin(), plan.seq_len());
        plan.eval_lengths = eval_lengths_;
      }
      if (eval_tokens_ > 0) plan.eval_tokens = eval_tokens_;
      if (arith_ >= 0) plan.arith_problems = arith_;
      if (task_examples_ > 0) plan.task_examples = task_examples_;
      if (rounds_ >= 0) plan.throughput_rounds = rounds_;
      choose_sweep_tasks(plan, tasks_, files_, variants_);
      if (!device_.empty()) plan.device = device_;
      run_sweep(plan, out_, std::filesystem::read_symlink("/proc/self/exe").string(), stop_after_);
    }
    write_sweep_report(out_);
    std::printf("wrote %s/report.md\n", out_.c_str());
    return 0;
  }

 private:
  std::string preset_ = "quick", out_, cell_, device_;
  int64_t steps_ = 0, seeds_ = 0, eval_tokens_ = 0, arith_ = -1, rounds_ = -1, task_examples_ = 0;
  std::vector<std::string> tasks_, files_, variants_;
  SweepShape shape_;
  std::vector<int64_t> eval_lengths_;
  int jobs_ = 0;
  double stop_after_ = -1;  // no limit
  bool report_only_ = false;
};

}  // namespace

std::unique_ptr<Command> sweep_command() { return std::make_unique<Sweep>(); }

}  // namespace phasor::cli
