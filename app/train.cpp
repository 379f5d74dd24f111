#include "app/train.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/distributed.h"
#include "app/evaluate.h"
#include "app/fault_injection.h"
#include "app/memory.h"
#include "app/output_path.h"
#include "app/plot.h"
#include "app/step_graph.h"
#include "app/step_records.h"
#include "app/gradient.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "models/data/corpus.h"
#include "models/data/dataset.h"
#include "models/data/tasks.h"
#include "models/data/tokenizer.h"
#include "models/model_io.h"
#include "models/probe.h"
#include "nn/atomic_file.h"
#include "nn/precision.h"
#include "nn/checkpoint.h"
#include "nn/optim.h"

namespace phasor {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- options

nlohmann::json to_json(const TrainOptions& o) {
  nlohmann::json j = fields_to_json(o, kTrainOptionFields);
  j["model"] = to_json(o.model);
  // A float32 run writes the config earlier versions wrote, byte for byte (test_checkpoint).
  if (o.precision == "float32") j.erase("precision");
  if (o.val_data.empty()) j.erase("val_data");
  if (!o.cuda_graph) j.erase("cuda_graph");  // nor one without a graph
  // Nor one without the angle warm-up, --init-from or a context extension.
  if (o.angle_warmup == 0) j.erase("angle_warmup");
  if (o.init_from.empty()) j.erase("init_from");
  if (o.rope_scaling == "none") j.erase("rope_scaling");
  if (o.rope_factor == 1.0) j.erase("rope_factor");
  if (o.original_length == 0) j.erase("original_length");
  if (o.yarn_alpha == 1.0) j.erase("yarn_alpha");
  if (o.yarn_beta == 32.0) j.erase("yarn_beta");
  if (o.schedule_start != 0) j["schedule_start"] = o.schedule_start;
  if (o.schedule_end != 0) j["schedule_end"] = o.schedule_end;
  if (!o.data_hash.empty()) j["data_bytes"] = o.data_bytes, j["data_hash"] = o.data_hash;
  return j;
}

double scheduled_lr(const TrainOptions& o, int64_t step) {
  const int64_t end = o.schedule_end > 0 ? o.schedule_end : o.steps;
  if (step >= end) return o.min_lr;
  return nn::warmup_cosine_lr(step - o.schedule_start, o.warmup, end - o.schedule_start, o.lr, o.min_lr);
}

ScheduleOnExtend parse_schedule_on_extend(std::string_view name) {
  if (name == "stretch") return ScheduleOnExtend::Stretch;
  if (name == "hold") return ScheduleOnExtend::Hold;
  if (name == "restart") return ScheduleOnExtend::Restart;
  fail("train: --extend must be stretch, hold or restart, got '", name, "'");
}

TrainOptions train_options_from_json(const nlohmann::json& j) {
  PHASOR_CHECK(j.is_object(), "config: expected a JSON object");
  TrainOptions o;
  for (const auto& [key, v] : j.items()) {
    if (key == "model") o.model = model_config_from_json(v);
    else if (key == "schedule_start" || key == "schedule_end") {
      PHASOR_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0, "config: ", key, " must be a non-negative integer, got ", v.dump());
      (key == "schedule_start" ? o.schedule_start : o.schedule_end) = v.get<int64_t>();
    } else if (key == "data_bytes") {
      PHASOR_CHECK(v.is_number_integer() && v.get<int64_t>() > 0, "config: data_bytes must be a positive integer, got ", v.dump());
      o.data_bytes = v.get<int64_t>();
    } else if (key == "data_hash") {
      PHASOR_CHECK(v.is_string(), "config: data_hash must be a string, got ", v.dump());
      o.data_hash = v.get<std::string>();
    } else if (!read_field(o, kTrainOptionFields, key, v)) {
      const std::string& name = key;  // clang 14 does not capture structured bindings
      const bool model_field = std::ranges::any_of(kModelConfigFields, [&](const auto& f) { return f.name == name; });
      if (model_field) fail("config: '", key, "' is a model field: it goes under \"model\", as in {\"model\": {\"", key, "\": ...}}");
      fail("config: unknown key '", key, "'");
    }
  }
  return o;
}

void validate(const TrainOptions& o) {
  o.model.validate();
  check_bounds(o, kTrainOptionFields, "train");
  PHASOR_CHECK(o.batch <= (int64_t{1} << 31) / o.seq_len, "train: batch ", o.batch, " x seq_len ", o.seq_len,
               " is more than 2^31 tokens per step");
  check_positions_fit(o.model, o.seq_len, "train: seq_len");
  PHASOR_CHECK(o.lr > 0 && o.min_lr >= 0 && o.min_lr <= o.lr, "train: need 0 <= min_lr <= lr and lr > 0 (lr ", o.lr, ", min_lr ", o.min_lr, ")");
  PHASOR_CHECK(o.val_data.empty() ? o.val_fraction > 0 : o.val_fraction == 0,
               o.val_data.empty() ? "train: --val-fraction 0 holds nothing out for validation; give --val-data with a validation text"
                                  : "train: --val-data replaces the held-out part of --data; --val-fraction must be 0 with it (its default there)");
  PHASOR_CHECK(!o.run_dir.empty(), "train: run_dir is empty");
  PHASOR_CHECK(o.device == "cpu" || o.device == "cuda" || o.device == "cuda:0", "train: device must be 'cpu' or 'cuda', got '", o.device, "'");
  PHASOR_CHECK(o.precision == "float32" || o.precision == "bf16", "train: precision must be 'float32' or 'bf16', got '", o.precision, "'");
  PHASOR_CHECK(!o.cuda_graph || o.device != "cpu", "train: --cuda-graph needs --device cuda (a CUDA Graph replays GPU work)");
  PHASOR_CHECK(!o.cuda_graph || !o.log_heads, "train: --cuda-graph cannot be combined with --log-heads (its probes read each step on the host)");
  PositionScaling warmed = training_scaling(o);
  if (o.angle_warmup > 0) warmed.warmup = 0.5;  // any value in (0, 1): is the warm-up accepted by this variant?
  if (o.init_from.empty()) warmed.validate(o.model.variant());  // with --init-from: checked against the file's model once it is read
  PHASOR_CHECK(o.angle_warmup == 0 || !o.cuda_graph, "train: --angle-warmup cannot be combined with --cuda-graph (the phases change every step)");
  PHASOR_CHECK(o.schedule_start >= 0 && o.schedule_end >= 0 && (o.schedule_end == 0 || o.schedule_end > o.schedule_start) &&
                   o.schedule_start < std::max<int64_t>(o.steps, 1),
               "train: the schedule's span [", o.schedule_start, ", ", o.schedule_end, ") does not fit a run of ", o.steps, " steps");
}

PositionScaling training_scaling(const TrainOptions& o, const PositionScaling& recorded) {
  PositionScaling s;
  s.method = parse_rope_scaling(o.rope_scaling);  // a one-line error for an unknown method
  s.factor = o.rope_factor;
  s.yarn_alpha = o.yarn_alpha;
  s.yarn_beta = o.yarn_beta;
  s.original_length = o.original_length > 0 ? o.original_length : recorded.original_length > 0 ? recorded.original_length : o.seq_len;
  return s;
}

// ---------------------------------------------------------------- the run

namespace {

// `--precision auto` becomes the precision it picks on the run's device, which
// the config and the checkpoints then record; returns how the run's opening
// line states it (why auto chose it, or that bf16 will be slower on this CPU).
std::string settle_precision(TrainOptions& o) {
  PHASOR_CHECK(o.precision == "float32" || o.precision == "bf16" || o.precision == "auto",
               "train: precision must be 'float32', 'bf16' or 'auto', got '", o.precision, "'");
  const DeviceType device = o.device == "cpu" ? DeviceType::CPU : DeviceType::CUDA;
  std::string text = nn::describe_precision(o.precision, device);
  o.precision = nn::precision_name(nn::resolve_precision(o.precision, device));
  return text;
}

std::atomic<bool> interrupted{false};
extern "C" void on_sigint(int) { interrupted.store(true); }

// Ctrl-C, and SIGTERM and SIGHUP (what `timeout`, `kill` and batch schedulers
// send, and a closed terminal), set a flag; the loop saves and stops at the next step.
class SigintScope {
 public:
  SigintScope() {
    for (size_t i = 0; i < kSignals.size(); ++i) previous_[i] = std::signal(kSignals[i], on_sigint);
  }
  ~SigintScope() {
    for (size_t i = 0; i < kSignals.size(); ++i) std::signal(kSignals[i], previous_[i]);
  }

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
  std::array<void (*)(int), 3> previous_{};
};

// More threads than the cores this process may use only slow it down, and
// tens of thousands make libgomp fail to start them (an abort): a count above
// the cores is lowered to them, with a message.
void set_threads(int threads) {
  const int cores = std::max(1, omp_get_num_procs());  // the CPUs of this process's affinity mask
  if (threads > cores && world().is_root())
    std::fprintf(stderr, "train: --threads %d is more than the %d cores available here; using %d\n", threads, cores, cores);
  const int n = threads > 0 ? std::min(threads, cores) : cores;
  omp_set_num_threads(n);  // GEMMs too: OpenBLAS runs single-threaded inside Phasor's pool (tensor/cpu/gemm.cpp)
}

Device device_of(const TrainOptions& o) { return o.device == "cpu" ? kCPU : cuda(0); }

// A model that cannot fit is refused before anything is read or built, rather
// than by the allocator after minutes of initialising, or by the kernel's
// out-of-memory killer. The estimate is a lower bound, so no run that could fit
// is refused: on the CPU, 16 bytes a parameter (the weights, AdamW's two
// moments and, from the first step on, the gradients; 12 for a run of no
// steps); for a GPU run, the 4 bytes a parameter of the host copy built first.
// A run just under it can still run out of memory later, for its activations.
void refuse_a_model_too_large_for_memory(const TrainOptions& o) {
  const double parameters = static_cast<double>(parameter_count(o.model));
  const double per_parameter = device_of(o) != kCPU ? 4.0 : o.steps > 0 ? 16.0 : 12.0;
  const double needed = parameters * per_parameter;
  const double available = static_cast<double>(available_memory_bytes());
  if (needed <= available) return;
  char message[256];
  std::snprintf(message, sizeof message,
                "train: a model of %.0f parameters needs at least %.2f GiB (%.0f bytes a parameter), more than the %.2f GiB of "
                "memory available to this process",
                parameters, needed / 1073741824.0, per_parameter, available / 1073741824.0);
  fail(message);
}

// Checkpoints hold CPU tensors, whatever device trained.
nn::StateDict on_cpu(const nn::StateDict& state) {
  nn::StateDict out;
  for (const auto& [name, t] : state) out.emplace(name, to_cpu(t));
  return out;
}

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", static_cast<long>(s / 3600), static_cast<long>(s / 60 % 60));
  else std::snprintf(buf, sizeof buf, "%ldm%02lds", static_cast<long>(s / 60), static_cast<long>(s % 60));
  return buf;
}

// The folder of the checkpoint taken after `step` steps.
std::string checkpoint_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "ckpt-%08ld", static_cast<long>(step));
  return name;
}

// Whether o is a run's own record (its start recorded its text), as a resumed run's options are.
bool resumed_run(const TrainOptions& o) { return !o.data_hash.empty(); }

// The run's text. A new run records where it is and what it is; a resumed one
// must find the same text.
std::string load_run_text(TrainOptions& o) {
  const bool recorded = resumed_run(o);
  o.data = data_location(o.data);
  std::string text;
  try {
    text = load_text(o.data, o.seq_len);  // a task's examples are as long as the window
  } catch (const Error& e) {
    if (!recorded) throw;
    fail("resume: the run's data cannot be read (", e.what(), "); give --data with the same text");
  }
  const int64_t bytes = static_cast<int64_t>(text.size());
  const std::string hash = text_hash(text);
  if (!recorded) {
    o.data_bytes = bytes, o.data_hash = hash;
  } else {
    PHASOR_CHECK(bytes == o.data_bytes && hash == o.data_hash, "resume: '", o.data, "' (", bytes, " bytes, ", hash,
                 ") is not the text the run trained on (", o.data_bytes, " bytes, ", o.data_hash, ")");
  }
  return text;
}

// A separate validation text (--val-data): a new run reads it; a resumed one
// reads the copy it saved in its folder (validation.txt), its own.
std::string load_validation_text(TrainOptions& o, bool resumed) {
  if (resumed) return read_text_file(o.run_dir + "/validation.txt");
  o.val_data = data_location(o.val_data);
  return load_text(o.val_data, o.seq_len);
}

// What the ranks of a distributed run must agree on (require_ranks_agree): the
// model, every option but the per-process ones and the paths, and the text itself.
std::vector<std::pair<std::string, std::string>> rank_agreement(const TrainOptions& o, const TextSplit& data) {
  nlohmann::json options = to_json(o);
  for (const char* own : {"model", "data", "val_data", "run_dir", "threads", "data_bytes", "data_hash"}) options.erase(own);
  const auto bytes = [](const std::vector<int64_t>& t) { return std::string(reinterpret_cast<const char*>(t.data()), t.size() * sizeof t[0]); };
  return {{"model config", to_json(o.model).dump()}, {"training options", options.dump()},
          {"data", bytes(data.train) + "|" + bytes(data.validation)}};
}

struct Run {
  TrainOptions options;
  TextSplit data;
  std::unique_ptr<CausalLM> model;
  std::unique_ptr<nn::AdamW> optimizer;
  std::unique_ptr<BatchSampler> sampler;
  int64_t step = 0;
  int64_t skipped = 0;
  AppendFile log;
  PositionScaling scaling;  // what the model means: its context extension, with the full phase (no warm-up)

  explicit Run(const TrainOptions& o) : options(o) {
    validate(o);
    // A run folder inside its own data would be read back as text by its next start.
    refuse_output_folder_in_inputs("train", "the run folder", o.run_dir, {{"--data", o.data}, {"--val-data", o.val_data}});
    refuse_a_model_too_large_for_memory(o);
    set_threads(o.threads);
    const ByteTokenizer tokenizer;
    PHASOR_CHECK(o.model.vocab_size >= tokenizer.vocab_size(), "train: vocab_size ", o.model.vocab_size,
                 " is smaller than the byte tokenizer's ", tokenizer.vocab_size());
    const bool resumed = resumed_run(options);  // read before load_run_text records a new run's text
    std::vector<int64_t> tokens = tokenizer.encode(load_run_text(options));
    // A task's windows start at its examples' boundaries, so each row is one whole example (docs/spec.md, "Training").
    const WindowStarts starts = is_task(options.data) ? WindowStarts::ExampleBoundaries : WindowStarts::Anywhere;
    data = o.val_data.empty() ? split_tokens(std::move(tokens), o.val_fraction, o.seq_len, starts)
                              : separate_texts(std::move(tokens), tokenizer.encode(load_validation_text(options, resumed)), o.seq_len);
    require_ranks_agree(rank_agreement(options, data));  // before gradients of different sizes meet
    PositionScaling recorded;
    if (!o.init_from.empty() && !resumed) {  // fine-tuning: the file's model, checked whole before anything of its size is built
      const ModelFile file = read_model_file(o.init_from);
      options.model = file.config;  // the run's config is the file's
      refuse_a_model_too_large_for_memory(options);
      check_positions_fit(options.model, o.seq_len, "train: seq_len");
      model = std::make_unique<CausalLM>(file.config, o.seed);
      model->load_state_dict(file.tensors);
      recorded = file.scaling;
    } else {
      model = std::make_unique<CausalLM>(options.model, o.seed);
    }
    scaling = training_scaling(options, recorded);
    // The length the --init-from model was trained at, recorded with the run so that a resume trains the same model.
    if (!o.init_from.empty() && !resumed) options.original_length = scaling.original_length;
    model->set_position_scaling(scaling);
    if (device_of(o) != kCPU) model->to(device_of(o));  // before the optimizer, whose state follows the parameters
    optimizer = std::make_unique<nn::AdamW>(
        std::vector<nn::ParamGroup>{{model->decayed_parameters(), o.weight_decay, 1.0}, {model->undecayed_parameters(), 0.0, 1.0}},
        nn::AdamWOptions{o.lr, o.beta1, o.beta2, 1e-8});
    // --batch rows per rank: K ranks read disjoint shards of one global batch of K * batch rows.
    sampler = std::make_unique<BatchSampler>(data.train, o.batch, o.seq_len, o.seed, world().rank(), world().world_size(), starts);
  }

  void open_log() {
    if (!world().is_root()) return;  // rank 0 alone writes files
    const std::string path = options.run_dir + "/log.jsonl";
    // A last line cut short (a full disk, a kill) would join the first line written now.
    if (const std::string note = repair_run_log(path); !note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
    log = AppendFile(path);
  }
  void write_log(const nlohmann::json& line) {
    if (log.is_open()) log.write(line.dump() + "\n");
  }

  void save_checkpoint() {
    if (!world().is_root()) return;  // every rank holds the same state; rank 0 saves it
    const std::string name = checkpoint_name(step);
    const std::string dir = options.run_dir + "/" + name;
    nn::TrainingCheckpoint ckpt;
    ckpt.model = on_cpu(model->state_dict());
    ckpt.model_metadata = model_metadata(options.model, scaling);
    ckpt.optimizer = on_cpu(optimizer->state());
    ckpt.state = {{"step", step},
                  {"optimizer_steps", optimizer->steps()},
                  {"sampler_seed", sampler->seed()},
                  {"sampler_offset", sampler->offset()},
                  {"skipped_steps", skipped},
                  {"world_size", world().world_size()},
                  {"options", to_json(options)}};
    // A folder of this name that `latest` never named is the remains of a save
    // that failed or was killed: it is replaced, and so is one that fails now.
    const auto remove_unfinished = [&] {
      std::error_code ignored;
      if (name != previous_checkpoint_ && latest_checkpoint(options.run_dir) != dir && fs::is_directory(dir, ignored))
        fs::remove_all(dir, ignored);
    };
    remove_unfinished();
    try {
      nn::save_training_checkpoint(dir, ckpt);
      // Only once the folder is complete does `latest` move to it.
      write_file_atomic(options.run_dir + "/latest", name + "\n");
      // A resumed run that changed its length or precision: its config.json follows, once the checkpoint that has them is saved.
      if (config_changed) {
        write_file_atomic(options.run_dir + "/config.json", to_json(options).dump(2) + "\n");
        config_changed = false;
      }
    } catch (...) {
      remove_unfinished();
      throw;
    }
    for (const auto& entry : fs::directory_iterator(options.run_dir)) {  // keep this one and the one before
      const std::string n = entry.path().filename().string();
      if (n.starts_with("ckpt-") && n < name && n != previous_checkpoint_) fs::remove_all(entry.path());
      if (n.find(".tmp.") != std::string::npos) fs::remove_all(entry.path());  // left by a killed process
    }
    previous_checkpoint_ = name;
  }

  EvalResult validation() {
    model->eval();
    const PositionScaling during = model->position_scaling();
    model->set_position_scaling(scaling);  // the full phase: a warm-up is training's alone
    const EvalResult r = evaluate(*model, data.validation, options.seq_len, options.eval_windows);
    model->set_position_scaling(during);
    model->train();
    return r;
  }

  // "first 32 windows" when --eval-windows cut the held-out text short, else "all 12 windows".
  std::string scored_windows(const EvalResult& r) const {
    const int64_t all = (static_cast<int64_t>(data.validation.size()) - 1) / options.seq_len;
    return (r.windows < all ? "first " : "all ") + std::to_string(r.windows) + (r.windows == 1 ? " window" : " windows");
  }

  // The angle warm-up's phase multiplier for the step about to run (--angle-warmup).
  void warm_up_angles() {
    if (options.angle_warmup == 0 || step > options.angle_warmup) return;  // off, or the full phase is already set
    PositionScaling s = scaling;
    s.warmup = std::min(1.0, static_cast<double>(step + 1) / static_cast<double>(options.angle_warmup));
    model->set_position_scaling(s);
  }

  // --log-heads: probes on every layer during the steps that are logged, so
  // their backward leaves the gradients reaching the Euler transform
  // (app/gradient.h). Other steps, and runs without the flag, carry none.
  void probe_heads(bool on) {
    head_probes.reset();
    if (on && model->positions().has_euler_transform()) head_probes = std::make_unique<ProbeScope>(*model);
  }

  // The 2-norms (over the batch on this rank, positions and pairs) of dL/dr
  // and dL/dphi of queries and keys, per layer and head, from the probes of
  // this step's backward. Taken before the optimizer step: dL/dphi =
  // Im(G conj(w)) delta needs the delta of the forward pass that made G.
  void measure_head_gradients() {
    head_gradients.clear();
    if (!head_probes) return;
    NoGradGuard no_grad;
    for (size_t l = 0; l < model->layers.size(); ++l)
      head_gradients.push_back(euler_gradient_norms(euler_gradients(head_probes->layer(l), *model->layers[l]->attn)));
  }

  // Per layer, one value per head: the scheme's statistics of its own
  // parameters after the step (complexformer: the means over pairs of delta
  // and phase_bias, beta), and the gradient norms measured by
  // measure_head_gradients(). null where the scheme has none.
  nlohmann::json head_statistics() const {
    NoGradGuard no_grad;
    nlohmann::json layers = nlohmann::json::array();
    for (size_t l = 0; l < model->layers.size(); ++l) {
      const Attention& a = *model->layers[l]->attn;
      const std::vector<HeadStatistic> own = model->positions().head_statistics(a.position_parameters());
      if (own.empty()) return nullptr;
      nlohmann::json stats = nlohmann::json::object();
      for (const HeadStatistic& s : own) stats[s.key] = s.per_head;
      if (l < head_gradients.size()) {
        const EulerGradientNorms& g = head_gradients[l];
        stats["q_grad_r_norm"] = g.q_r, stats["q_grad_phi_norm"] = g.q_phi;
        stats["k_grad_r_norm"] = g.k_r, stats["k_grad_phi_norm"] = g.k_phi;
      }
      layers.push_back(std::move(stats));
    }
    return layers;
  }
  std::unique_ptr<ProbeScope> head_probes;
  std::vector<EulerGradientNorms> head_gradients;  // of the step being logged

  std::string previous_checkpoint_;
  bool config_changed = false;  // config.json no longer describes the run (resumed with other steps or precision)
  std::string opening_note;     // said with the run's opening line (a resumed run's schedule)
  std::string precision_text;   // the precision as the opening line states it (settle_precision)
};

TrainSummary run_loop(Run& run) {
  const TrainOptions& o = run.options;
  TrainSummary summary;
  SigintScope sigint;
  interrupted.store(false);
  Communicator& comm = world();
  const bool root = comm.is_root(), distributed = comm.world_size() > 1;
  bool stop_agreed = false;  // distributed: every rank stops at the same step
  const bool tty = root && isatty(STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  auto window_start = start;
  int64_t window_tokens = 0, bad_in_a_row = 0, first_step = run.step;
  double last_loss = NAN, tokens_per_s = 0;
  bool save_due = false;  // a --ckpt-every save that fell on a skipped step
  const fault::NanSteps nan_steps = fault::nan_steps_from_environment();

  // The run's model, size, steps and folder, once, just before its first
  // progress line: a run that fails before it (bad input, out of memory)
  // still prints only its one-line error.
  bool announced = false;
  const auto announce = [&] {
    if (!root || announced) return;
    announced = true;
    std::fputs(run.opening_note.c_str(), stderr);
    const ModelConfig& m = o.model;
    std::fprintf(stderr, "%s model (d_model %ld, n_layers %ld, n_heads %ld, d_ff %ld), %ld parameters; steps %ld to %ld, %ld x %ld tokens each, %s, %s; run folder %s\n",
                 std::string(position_name(m.position)).c_str(), static_cast<long>(m.d_model), static_cast<long>(m.n_layers),
                 static_cast<long>(m.n_heads), static_cast<long>(m.d_ff), static_cast<long>(parameter_count(m)),
                 static_cast<long>(first_step + 1), static_cast<long>(o.steps), static_cast<long>(o.batch * comm.world_size()),
                 static_cast<long>(o.seq_len), o.device.c_str(), run.precision_text.empty() ? o.precision.c_str() : run.precision_text.c_str(),
                 o.run_dir.c_str());
  };
  const nn::PrecisionScope precision(nn::parse_precision(o.precision));  // the forward passes; backward follows what they recorded
  // Each step's loss and norm stay on the device until the host needs them
  // (StepRecords). Distributed runs agree on them every step (the mean loss,
  // an interruption); --log-heads measures only the steps taken: both read at once.
  const bool read_every_step = distributed || o.log_heads;
  StepRecords records;
  StepReport last{};  // the latest step read
  // Accounts for the steps recorded since the last read: skipped steps, the
  // tokens of the steps taken, a run of bad steps that stops the run.
  std::string diverged;  // set when --max-bad-steps bad steps ran in a row: the stop's message
  // The skipped steps left the parameters and the optimizer as the last good
  // step did: a run without periodic checkpoints saves that state before it
  // stops, so nothing is lost (with --ckpt-every, the checkpoint before the
  // divergence stays the latest).
  const auto stop_if_diverged = [&] {
    if (diverged.empty()) return;
    if (o.ckpt_every == 0) run.save_checkpoint();
    fail(diverged);
  };
  const auto read_records = [&] {
    for (StepReport r : records.read()) {
      if (distributed) {  // the global batch's mean loss, and whether any rank was interrupted
        std::vector<double> agreed{r.loss, interrupted.load() ? 1.0 : 0.0};
        comm.all_reduce_sum(agreed);
        r.loss = agreed[0] / comm.world_size();
        stop_agreed = agreed[1] > 0;
      }
      last = r;
      if (r.skipped()) {  // the optimizer left the parameters and its state as they were
        ++run.skipped;
        ++bad_in_a_row;
        run.probe_heads(false);
        run.write_log({{"step", r.step}, {"skipped", true}, {"loss", r.loss}});
        if (bad_in_a_row >= o.max_bad_steps && diverged.empty()) {  // the loop stops at the end of this step (stop_if_diverged)
          std::ostringstream m;
          m << "train: " << bad_in_a_row << " steps in a row had a NaN or Inf loss or gradient (step " << r.step
            << "); stopping. The latest checkpoint holds the last good state";
          diverged = m.str();
        }
      } else {
        bad_in_a_row = 0;
        last_loss = r.loss;
        window_tokens += r.tokens;
      }
    }
  };
  // --cuda-graph: the first step of this process runs eagerly (it makes the
  // optimizer's device state and fills the caches), then one step is captured
  // and replayed for every later one.
  PHASOR_CHECK(!o.cuda_graph || !distributed, "train: --cuda-graph trains on one GPU (distributed runs average gradients outside the graph)");
  PHASOR_CHECK(!o.cuda_graph || nan_steps.first < 0,
               "train: --cuda-graph cannot inject NaN steps (PHASOR_FAULT_NAN_AT_STEP): a replayed step is the same every time");
  StepGraph step_graph(device_of(o));
  // The step's device work: loss, backward, clipping, the decision whether to take it, the update.
  // A captured step records nothing itself: each replay's values are added after it.
  const auto device_step = [&](const Tensor& inputs, const Tensor& targets, double lr, int64_t tokens, bool captured) {
    const Tensor loss = run.model->loss(inputs, targets);
    run.optimizer->zero_grad();
    // Backward runs whatever the loss: a non-finite one makes a non-finite norm, and the step is skipped below.
    loss.backward();
    if (nan_steps.grad_at(run.step)) run.model->parameters().front().grad().data<float>()[0] = NAN;
    comm.average_gradients(run.model->parameters());  // identical on every rank from here on
    const Tensor grad_norm = nn::clip_grad_norm_(run.model->parameters(), o.grad_clip > 0 ? o.grad_clip : INFINITY);
    const Tensor observed_loss = nan_steps.loss_at(run.step)
                                     ? scalar_tensor(nan_steps.kind == fault::NanSteps::Kind::Inf ? INFINITY : NAN, DType::Float64, loss.device())
                                     : loss;
    const Tensor values = StepRecords::values_of(observed_loss, grad_norm);
    Tensor take = StepRecords::finite(values);
    if (!captured) records.add(run.step, values, lr, tokens);
    if (read_every_step) {
      read_records();
      take = scalar_tensor(last.skipped() ? 0.0 : 1.0, DType::Float64, loss.device());  // every rank decides alike
      if (o.log_heads && !last.skipped()) run.measure_head_gradients();
    }
    run.optimizer->step(take);
    return values;
  };
  while (run.step < o.steps) {
    if (distributed ? stop_agreed : interrupted.load()) {
      read_records();
      stop_if_diverged();
      if (root) std::fprintf(stderr, "\ninterrupted: saving a checkpoint at step %ld\n", static_cast<long>(run.step));
      run.save_checkpoint();
      summary.interrupted = true;
      break;
    }
    fault::rank_fault(comm.rank(), run.step);
    comm.set_step(run.step);
    run.warm_up_angles();
    const double lr = scheduled_lr(o, run.step);
    run.optimizer->set_lr(lr);
    const Batch b = run.sampler->next();
    if (o.log_heads) run.probe_heads((run.step + 1) % o.log_every == 0 || run.step + 1 == o.steps);  // the steps logged below
    const int64_t tokens = b.batch * b.seq_len * comm.world_size();
    if (o.cuda_graph && run.step > first_step) {
      const Tensor values = step_graph.run(b.inputs, b.targets, b.batch, b.seq_len, [&](const Tensor& inputs, const Tensor& targets) {
        return device_step(inputs, targets, lr, tokens, /*captured=*/true);
      });
      records.add(run.step, ops::clone(values), lr, tokens);  // the next replay overwrites the graph's
    } else {
      device_step(from_vector(b.inputs, {b.batch, b.seq_len}), from_vector(b.targets, {b.batch, b.seq_len}), lr, tokens, /*captured=*/false);
    }
    ++run.step;

    // The host reads the steps' records (one copy) where it needs them: to log, validate or save.
    const bool log_due = run.step % o.log_every == 0 || run.step == o.steps;
    const bool validation_due = (o.eval_every > 0 && run.step % o.eval_every == 0) || run.step == o.steps;
    if (o.ckpt_every > 0 && run.step % o.ckpt_every == 0) save_due = true;
    if (log_due || validation_due || save_due) read_records();
    stop_if_diverged();
    const bool skipped = last.skipped();  // this step's, where read above

    if (log_due && !skipped) {
      const auto now = std::chrono::steady_clock::now();
      tokens_per_s = static_cast<double>(window_tokens) / std::chrono::duration<double>(now - window_start).count();
      window_start = now;
      window_tokens = 0;
      nlohmann::json line = {{"step", run.step}, {"loss", last.loss}, {"lr", lr}, {"grad_norm", last.grad_norm}, {"tokens_per_s", tokens_per_s}};
      if (o.log_heads) {
        line["heads"] = run.head_statistics();
        run.probe_heads(false);  // free them before validation's forward passes
        run.head_gradients.clear();
      }
      run.write_log(line);
      const double elapsed = std::chrono::duration<double>(now - start).count();
      const double eta = elapsed / static_cast<double>(run.step - first_step) * static_cast<double>(o.steps - run.step);
      announce();
      if (root)
        std::fprintf(stderr, "%sstep %ld/%ld | loss %.4f | lr %.2e | %.0f tok/s | ETA %s%s", tty ? "\r" : "", static_cast<long>(run.step),
                     static_cast<long>(o.steps), last.loss, lr, tokens_per_s, format_duration(eta).c_str(), tty ? "   " : "\n");
    }
    if (validation_due) {
      const EvalResult val = run.validation();
      summary.final_val_loss = val.loss;
      summary.val_windows = run.scored_windows(val);
      summary.validated = true;
      run.write_log({{"step", run.step}, {"val_loss", summary.final_val_loss}});
      announce();
      if (root)
        std::fprintf(stderr, "%sstep %ld: validation loss %.4f (%s)\n", tty ? "\n" : "", static_cast<long>(run.step), summary.final_val_loss,
                     summary.val_windows.c_str());
    }
    // A --ckpt-every save that falls on a skipped step waits for the next good
    // one, so `latest` never moves into a run of bad steps (the checkpoint
    // before a divergence stays the latest); the last step saves whatever it was.
    if ((save_due && !skipped) || run.step == o.steps) {
      run.save_checkpoint();
      save_due = false;
    }
  }
  read_records();
  stop_if_diverged();
  // A run of no steps (--steps 0) still ends with its checkpoint: the initial model.
  if (!summary.interrupted && run.previous_checkpoint_ != checkpoint_name(run.step)) run.save_checkpoint();
  if (tty) std::fprintf(stderr, "\n");
  summary.steps_done = run.step;
  summary.final_loss = last_loss;
  summary.skipped_steps = run.skipped;
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  summary.tokens_per_second = static_cast<double>((run.step - first_step) * o.batch * o.seq_len * comm.world_size()) / std::max(total, 1e-9);
  return summary;
}

}  // namespace

std::string latest_checkpoint(const std::string& run_dir) {
  const std::string path = run_dir + "/latest";
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return "";
  // One short line; a FIFO or a device there is refused rather than waited on.
  std::istringstream in(read_file_bytes(path, 4096, "4096 bytes for a run's 'latest' file"));
  std::string name;
  if (!(in >> name)) return "";
  return run_dir + "/" + name;
}

TrainSummary train(const TrainOptions& requested) {
  TrainOptions options = requested;
  const std::string precision_text = settle_precision(options);
  validate(options);
  PHASOR_CHECK(latest_checkpoint(options.run_dir).empty(), "train: '", options.run_dir,
               "' already holds a run; use --resume to continue it or choose another --run-dir");
  // Data and model first: a bad input must not leave a run folder behind.
  Run run(options);
  run.precision_text = precision_text;
  if (world().is_root()) {  // rank 0 alone writes files
    std::error_code ec;
    fs::create_directories(options.run_dir, ec);
    PHASOR_CHECK(!ec && fs::is_directory(options.run_dir), "train: cannot create run folder '", options.run_dir, "'",
                 ec ? ": " + ec.message() : "");
    nlohmann::json config = to_json(run.options);
    if (requested.precision == "auto") config["precision"] = run.options.precision;  // what auto chose, float32 included
    write_file_atomic(options.run_dir + "/config.json", config.dump(2) + "\n");
    // The held-out text, so `phasor eval` can score exactly what validation saw.
    write_file_atomic(options.run_dir + "/validation.txt", ByteTokenizer().decode(run.data.validation));
  }
  run.open_log();
  return run_loop(run);
}

namespace {
// A lengthened run's schedule for its added steps, and the line that says
// which applies and what the learning rate does at the first added step.
std::string extend_schedule(TrainOptions& o, int64_t done, int64_t total, ScheduleOnExtend extend) {
  const int64_t before = o.steps;
  const double lr_before = scheduled_lr(o, done);
  switch (extend) {
    case ScheduleOnExtend::Stretch: o.schedule_end = 0; break;  // the cosine to the new total
    case ScheduleOnExtend::Hold: if (o.schedule_end == 0) o.schedule_end = before; break;
    case ScheduleOnExtend::Restart: o.schedule_start = before, o.schedule_end = 0; break;
  }
  o.steps = total;
  const char* what = extend == ScheduleOnExtend::Stretch ? "stretch: the cosine now ends at the new total"
                     : extend == ScheduleOnExtend::Hold  ? "hold: the cosine ends where it did, the added steps at min_lr"
                                                         : "restart: a new warm-up and cosine over the added steps";
  char line[400];
  std::snprintf(line, sizeof line, "resume: %ld -> %ld steps; --extend %s, so step %ld's lr is %.2e (%.2e as the run was scheduled); --extend stretch|hold|restart chooses\n",
                static_cast<long>(before), static_cast<long>(total), what, static_cast<long>(done + 1), scheduled_lr(o, done), lr_before);
  return line;
}
}  // namespace

TrainSummary resume(const std::string& run_dir, int64_t total_steps, const ResumeChanges& changes) {
  const std::string dir = latest_checkpoint(run_dir);
  PHASOR_CHECK(!dir.empty(), "resume: '", run_dir, "' has no checkpoint (no 'latest' file)");
  nn::TrainingCheckpoint ckpt = nn::load_training_checkpoint(dir);
  TrainOptions options;
  try {
    options = train_options_from_json(ckpt.state.at("options"));
  } catch (const nlohmann::json::exception& e) {
    fail(dir, "/state.json: missing or malformed options (", e.what(), ")");
  }
  const int64_t saved_world = ckpt.state.value("world_size", int64_t{1});
  PHASOR_CHECK(saved_world == world().world_size(), "resume: '", run_dir, "' was trained by ", saved_world,
               " process(es) and this run has ", world().world_size(),
               "; resume with the same number of ranks (the global batch and each rank's data shard depend on it)");
  options.run_dir = run_dir;
  int64_t done_steps = 0, skipped_steps = 0, optimizer_steps = 0;
  uint64_t sampler_seed = 0, sampler_offset = 0;
  try {
    done_steps = ckpt.state.at("step").get<int64_t>();
    skipped_steps = ckpt.state.value("skipped_steps", int64_t{0});
    optimizer_steps = ckpt.state.at("optimizer_steps").get<int64_t>();
    sampler_seed = ckpt.state.at("sampler_seed").get<uint64_t>();
    sampler_offset = ckpt.state.at("sampler_offset").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    fail(dir, "/state.json: missing or malformed training state (", e.what(), ")");
  }
  std::string extended;  // said with the opening line: a resume refused before prints its one error line alone
  if (total_steps > options.steps) extended = extend_schedule(options, done_steps, total_steps, changes.extend);
  else if (total_steps > 0) options.steps = total_steps;
  if (!changes.precision.empty()) options.precision = changes.precision;  // float32 weights either way: a run may change precision
  if (!changes.data.empty()) options.data = changes.data;  // found again by Run, which checks that it is the same text
  const std::string precision_text = settle_precision(options);
  validate(options);
  // The file must be a Phasor model (as info, eval and generate require), its
  // tensors must match the config before a model of the config's size is built,
  // and it must be the model of this run: any safetensors file whose names and
  // shapes match (a `phasor grad` output) is not.
  const std::string model_file = dir + "/model.safetensors";
  const ModelConfig file_config = config_from_metadata(ckpt.model_metadata, model_file);
  check_model_tensors(ckpt.model, options.model, model_file);
  PHASOR_CHECK(to_json(file_config) == to_json(options.model), model_file, ": its config ", to_json(file_config).dump(),
               " is not the run's (", dir, "/state.json holds ", to_json(options.model).dump(), ")");
  Run run(options);
  run.config_changed = to_json(run.options) != ckpt.state.at("options");  // config.json follows at the next save
  run.model->load_state_dict(ckpt.model);
  run.step = done_steps;
  run.skipped = skipped_steps;
  PHASOR_CHECK(run.step < options.steps, "resume: the run in '", run_dir, "' has done ", run.step, " of its ", options.steps,
               " steps; give --steps N with N > ", run.step, " to train further");
  for (auto& [name, t] : ckpt.optimizer) t = ops::to_device(t, run.model->device());
  run.optimizer->load_state(ckpt.optimizer, optimizer_steps);
  run.sampler->restore(sampler_seed, sampler_offset);
  run.previous_checkpoint_ = fs::path(dir).filename().string();
  run.open_log();
  run.opening_note = extended;
  run.precision_text = precision_text;
  return run_loop(run);
}

}  // namespace phasor
