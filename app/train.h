#pragma once
// The training loop behind `phasor train`: AdamW with warm-up + cosine
// schedule, gradient clipping, periodic validation, a JSONL log, crash-safe
// checkpoints with exact resume, Ctrl-C saving, and skipping of NaN steps.
#include <cmath>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "models/config.h"
#include "models/options.h"
#include "models/rotary_scaling.h"

namespace phasor {

struct TrainOptions {
  ModelConfig model;
  std::string data = "kjv";  // a file or a built-in corpus (kjv, code, arith)
  std::string val_data;      // non-empty: the validation text, instead of the last val_fraction of data (which is then 0)
  std::string run_dir = "runs/default";
  int64_t seq_len = 128;
  int64_t batch = 16;
  int64_t steps = 300;
  double lr = 3e-3;
  double min_lr = 3e-4;
  int64_t warmup = 30;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double grad_clip = 1.0;
  uint64_t seed = 1;
  double val_fraction = 0.05;
  int64_t eval_every = 100;    // 0: only at the end
  int64_t eval_windows = 32;   // validation windows per evaluation (0: all)
  int64_t log_every = 10;
  int64_t ckpt_every = 0;      // 0: only at the end (and on Ctrl-C)
  int64_t max_bad_steps = 5;   // consecutive NaN/Inf steps before giving up
  int threads = 0;             // 0: all cores
  bool log_heads = false;      // per-head CMHA statistics in the log
  bool cuda_graph = false;     // capture one step as a CUDA Graph and replay it (app/step_graph.h)
  std::string device = "cpu";  // cpu or cuda (the CUDA backend, one GPU)
  std::string precision = "float32";  // float32, bf16 or auto (nn/precision.h: resolve_precision); a resumed run may change it
  int64_t angle_warmup = 0;   // the seed's angle warm-up: position phases times min(1, (step + 1) / N) (0: off)
  std::string init_from;      // a model file whose config and weights the run starts from (fine-tuning)
  // Context extension the run trains with (models/rotary_scaling.h); recorded in its checkpoints.
  std::string rope_scaling = "none";
  double rope_factor = 1.0;
  int64_t original_length = 0;  // 0: the --init-from model's recorded length, else seq_len
  double yarn_alpha = 1.0, yarn_beta = 32.0;
  // The learning-rate schedule's span: warm-up from schedule_start, cosine decay
  // to min_lr at schedule_end (0: at `steps`), min_lr after it. Set when a resumed
  // run is lengthened (ScheduleOnExtend); not flags, and left out of the JSON at 0.
  int64_t schedule_start = 0, schedule_end = 0;
  // The text the run trains on, as recorded when it started (data_location,
  // text_hash: models/data/corpus.h), so that a resumed run finds it from any
  // folder and refuses other text. Not flags; left out of the JSON when unset
  // (runs of earlier versions, which resume unchecked).
  int64_t data_bytes = 0;
  std::string data_hash;
};

// The learning rate of step `step` (from 0) under o's schedule.
double scheduled_lr(const TrainOptions& o, int64_t step);

// The fields besides `model` (whose own are kModelConfigFields), in the order of
// their flags in `phasor train --help`. Cross-field rules are in validate().
inline constexpr Field<TrainOptions> kTrainOptionFields[] = {
    // name          member                        bound                max        help
    {"data",          &TrainOptions::data,          Bound::Any,          0,         "a text file, a folder of them (all, in path order) or a built-in corpus: kjv, code, arith (with --resume: where the run's own text now is)"},
    {"val_data",      &TrainOptions::val_data,      Bound::Any,          0,
     "a text file (or built-in corpus) to validate on instead of a held-out part of --data, all of which then trains"},
    {"run_dir",       &TrainOptions::run_dir,       Bound::Any,          0,         "folder for the log, config and checkpoints"},
    {"seq_len",       &TrainOptions::seq_len,       Bound::Positive,     1048576,   "training window length (at most 2^20)"},
    {"batch",         &TrainOptions::batch,         Bound::Positive,     kMaxSize,  "windows per step"},
    {"steps",         &TrainOptions::steps,         Bound::NonNegative,  kMaxCount, "optimizer steps in all (at most 10^12)"},
    {"lr",            &TrainOptions::lr,            Bound::Any,          1,         "peak learning rate (AdamW; in (0, 1])"},
    {"min_lr",        &TrainOptions::min_lr,        Bound::Any,          1,         "learning rate at the end of the cosine decay"},
    {"warmup",        &TrainOptions::warmup,        Bound::NonNegative,  kMaxCount, "steps of linear warm-up"},
    {"weight_decay",  &TrainOptions::weight_decay,  Bound::NonNegative,  10,        "AdamW's decoupled weight decay (at most 10)"},
    {"beta1",         &TrainOptions::beta1,         Bound::HalfOpenUnit, 1,         "AdamW beta1"},
    {"beta2",         &TrainOptions::beta2,         Bound::HalfOpenUnit, 1,         "AdamW beta2"},
    {"grad_clip",     &TrainOptions::grad_clip,     Bound::NonNegative,  1e6,       "clip the gradients' global 2-norm to this (0: no clipping; at most 1e6)"},
    {"seed",          &TrainOptions::seed,          Bound::Any,          kMaxUnsigned, "seed of the initialisation and the batches (0 to 2^64-1)"},
    {"val_fraction",  &TrainOptions::val_fraction,  Bound::HalfOpenUnit, 1,         "the last fraction of the text held out for validation (0 with --val-data, its default there)"},
    {"eval_every",    &TrainOptions::eval_every,    Bound::NonNegative,  kMaxCount, "validate every N steps (0: only at the end)"},
    {"eval_windows",  &TrainOptions::eval_windows,  Bound::NonNegative,  kMaxCount, "validation windows per evaluation (0: all)"},
    {"log_every",     &TrainOptions::log_every,     Bound::Positive,     kMaxCount, "write a log line every N steps"},
    {"ckpt_every",    &TrainOptions::ckpt_every,    Bound::NonNegative,  kMaxCount, "save a checkpoint every N steps (0: only at the end and on Ctrl-C)"},
    {"max_bad_steps", &TrainOptions::max_bad_steps, Bound::Positive,     kMaxCount, "stop after this many NaN/Inf steps in a row"},
    {"threads",       &TrainOptions::threads,       Bound::NonNegative,  1024,      "CPU threads (0: all cores; at most 1024, and no more than the cores available)"},
    {"device",        &TrainOptions::device,        Bound::Any,          0,         "cpu|cuda: where to train (cuda needs a GPU and a CUDA build)"},
    {"precision",     &TrainOptions::precision,     Bound::Any,          0,
     "float32|bf16|auto: bf16 runs the weight GEMMs in bfloat16 with float32 accumulation (mixed precision; may change on --resume); "
     "auto picks bf16 on a GPU or a CPU with bf16 arithmetic (AVX512-BF16 or AMX), float32 elsewhere (default float32)"},
    {"log_heads",     &TrainOptions::log_heads,     Bound::Any,          1,
     "record per-head delta / phase_bias / beta and |dL/dr|, |dL/dphi| at the Euler transform", Flag::Switch},
    {"cuda_graph",    &TrainOptions::cuda_graph,    Bound::Any,          1,
     "with --device cuda: run the first step eagerly, then capture one step as a CUDA Graph and replay it for every later step", Flag::Switch},
    {"angle_warmup",  &TrainOptions::angle_warmup,  Bound::NonNegative,  kMaxCount,
     "the seed's angle warm-up: multiply every position phase (rope, xpos, complexformer's beta term) by min(1, (step + 1) / N) while training (0: off); evaluation always uses the full phase"},
    {"init_from",     &TrainOptions::init_from,     Bound::Any,          0,
     "start from this model file's config and weights (fine-tuning, e.g. at a longer --seq-len with --rope-scaling); the model flags are then the file's"},
    {"rope_scaling",  &TrainOptions::rope_scaling,  Bound::Any,          0,
     "none|pi|ntk|yarn: train with the rotary frequencies stretched to --rope-factor times --original-length (fine-tuning a trained model)"},
    {"rope_factor",   &TrainOptions::rope_factor,   Bound::Positive,     1e6,       "S: the context extension's factor (1 to 1e6)"},
    {"original_length", &TrainOptions::original_length, Bound::NonNegative, 1048576,
     "L: the length the model was trained at (0: what --init-from's file records, else --seq-len)"},
    {"yarn_alpha",    &TrainOptions::yarn_alpha,    Bound::NonNegative,  1e6,       "YaRN's ramp: frequencies turning fewer than alpha times in L are interpolated"},
    {"yarn_beta",     &TrainOptions::yarn_beta,     Bound::Positive,     1e6,       "YaRN's ramp: frequencies turning more than beta times in L are kept"},
};

nlohmann::json to_json(const TrainOptions& o);
// Unknown keys and wrong types are errors; "model" holds a ModelConfig object.
TrainOptions train_options_from_json(const nlohmann::json& j);
void validate(const TrainOptions& o);
// The scaling a run of `o` trains with, over what its --init-from model
// records (`recorded`): the flags' method and factor, the original length
// from the flag, else the recorded one, else seq_len; no warm-up.
PositionScaling training_scaling(const TrainOptions& o, const PositionScaling& recorded = {});

struct TrainSummary {
  int64_t steps_done = 0;
  double final_loss = NAN;      // of the last step not skipped; NaN when every step was skipped
  double final_val_loss = NAN;  // of the last validation; meaningful only when `validated`
  bool validated = false;
  // What that validation scored: "first 32 windows" (--eval-windows of more),
  // or "all 12 windows", so that it is not mistaken for `phasor eval`'s number.
  std::string val_windows;
  double tokens_per_second = 0;
  int64_t skipped_steps = 0;
  bool interrupted = false;
};

// Trains from scratch into options.run_dir (which must not hold a checkpoint yet).
TrainSummary train(const TrainOptions& options);
// How a resumed run that is lengthened (--steps past its total) schedules the added steps:
enum class ScheduleOnExtend {
  Stretch,  // the cosine spans the new total, as if the run had been that long (the lr rises again)
  Hold,     // the cosine ends where it did; the added steps run at min_lr
  Restart,  // a new warm-up and cosine over the added steps, from lr to min_lr
};
ScheduleOnExtend parse_schedule_on_extend(std::string_view name);  // stretch, hold, restart; throws naming them

// What a resumed run may change; the rest is the checkpoint's.
struct ResumeChanges {
  ScheduleOnExtend extend = ScheduleOnExtend::Stretch;  // how added steps are scheduled
  std::string precision;  // non-empty (float32, bf16): replaces the run's; the weights are float32 either way
  std::string data;       // non-empty: where the run's text is now; it must be the same text (size and hash)
};

// Continues the run in run_dir exactly where its latest checkpoint left it;
// `total_steps` > 0 changes the total step count (a longer run schedules its
// added steps as `changes.extend` says, and says so on stderr).
TrainSummary resume(const std::string& run_dir, int64_t total_steps = 0, const ResumeChanges& changes = {});

// The latest complete checkpoint folder of a run ("" if none).
std::string latest_checkpoint(const std::string& run_dir);

}  // namespace phasor
