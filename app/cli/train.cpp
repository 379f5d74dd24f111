// `phasor train`: a new run from flags and an optional config file, or --resume of one.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/command.h"
#include "app/cli/field_flags.h"
#include "app/distributed.h"
#include "app/output_path.h"
#include "app/train.h"
#include "nn/atomic_file.h"
#include "tensor/error.h"

namespace phasor::cli {

namespace {

TrainOptions options_from_file(const std::string& path) {
  PHASOR_CHECK(!std::filesystem::is_directory(path), "config file '", path, "' is a folder");
  PHASOR_CHECK(::access(path.c_str(), R_OK) == 0, "config file '", path, "' cannot be read");
  // A regular file of at most 16 MiB (a FIFO or a device is refused, not waited on).
  const std::string text = read_file_bytes(path, 16u << 20, "16 MiB for a config file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("config file '", path, "' is not valid JSON (", e.what(), ")");
  }
  return train_options_from_json(j);
}

// The value of `--config` on the command line, read before parsing so that
// the flags, bound to the same options, override the file.
std::string config_argument(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) return argv[i + 1];
    if (a.starts_with("--config=")) return a.substr(9);
  }
  return "";
}

class Train final : public Command {
 public:
  Train() : Command("train", "train a model") {}

  void prepare(int argc, char** argv) override {
    if (!config_argument(argc, argv).empty()) options_ = options_from_file(config_argument(argc, argv));
  }

  void add_flags(Flags& flags) override {
    flags.option("--config", config_file_, "JSON file of options (flags override it)");
    flags.option("--resume", resume_dir_, "continue the run in this folder exactly where it stopped");
    flags.option("--extend", extend_, "with --resume and a larger --steps: stretch (the cosine spans the new total), hold (the added steps at "
                                      "min_lr) or restart (a new warm-up and cosine over them) (default stretch)")
        .one_of({"stretch", "hold", "restart"});
    // model and optimizer flags; each overrides the config file
    field_flags_.add<ModelConfig>(flags, options_.model, kModelConfigFields);
    field_flags_.add<TrainOptions>(flags, options_, kTrainOptionFields);
    // data parallelism across processes (docs/distributed.md)
    flags.option("--distributed", dist_.mode, "auto (MPI when mpirun/srun started several processes), off, mpi or nccl (default " + dist_.mode + ")")
        .one_of({"auto", "off", "mpi", "nccl"});
    flags.option("--dist-timeout", dist_.timeout_s, "seconds a rank waits for the others in a collective before aborting the job (at most 10^6; default " + nlohmann::json(dist_.timeout_s).dump() + ")")
        .finite_within(1e-3, 1e6);
  }

  int run(const Flags& flags) override {
    init_distributed(dist_);
    if (!resume_dir_.empty())  // a resumed run is the checkpoint's run: only its length may change
      for (const std::string& name : flags.given())
        PHASOR_CHECK(name == "--resume" || name == "--steps" || name == "--precision" || name == "--extend" || name == "--data" ||
                         name == "--distributed" || name == "--dist-timeout",  // how to run, not what
                     "train: ", name, " cannot be combined with --resume (the run continues with its own options; only --steps, --extend, "
                     "--precision and --data, for the same text moved elsewhere, may change)");
    field_flags_.apply();
    // --val-data replaces the held-out part of --data: --val-fraction defaults to 0 there.
    if (!options_.val_data.empty() && flags.count("--val-fraction") == 0) options_.val_fraction = 0;
    if (resume_dir_.empty())  // the run's own files must not replace its data or config
      for (const char* file : {"config.json", "validation.txt", "log.jsonl", "latest"})
        refuse_output_over_inputs("train", "the run file", options_.run_dir + "/" + file,
                                  {{"--data", options_.data}, {"--val-data", options_.val_data}, {"--config", config_file_}});
    PHASOR_CHECK(flags.count("--extend") == 0 || (!resume_dir_.empty() && flags.count("--steps") > 0),
                 "train: --extend says how a resumed run schedules the steps a larger --steps adds; give it with --resume and --steps");
    ResumeChanges changes;
    changes.extend = parse_schedule_on_extend(extend_);
    if (flags.count("--precision")) changes.precision = options_.precision;
    if (flags.count("--data")) changes.data = options_.data;
    const TrainSummary s = resume_dir_.empty() ? train(options_) : resume(resume_dir_, flags.count("--steps") ? options_.steps : 0, changes);
    const auto loss_text = [](bool computed, double loss, const std::string& of = "") {
      char text[32] = "not computed";
      if (computed) std::snprintf(text, sizeof text, "%.4f", loss);
      return std::string(text) + (computed && !of.empty() ? " (" + of + ")" : "");
    };
    if (world().is_root())
      std::printf("trained %ld steps: loss %s, validation loss %s, %.0f tokens/s%s\n", static_cast<long>(s.steps_done),
                  loss_text(!std::isnan(s.final_loss), s.final_loss).c_str(), loss_text(s.validated, s.final_val_loss, s.val_windows).c_str(),
                  s.tokens_per_second, s.interrupted ? " (interrupted; checkpoint saved)" : "");
    finalize_distributed();
    return s.interrupted ? 130 : 0;
  }

 private:
  TrainOptions options_;
  std::string config_file_, resume_dir_, extend_ = "stretch";
  FieldFlags field_flags_;
  DistributedOptions dist_;
};

}  // namespace

std::unique_ptr<Command> train_command() { return std::make_unique<Train>(); }

}  // namespace phasor::cli
