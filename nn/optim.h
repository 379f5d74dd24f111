#pragma once
// Optimizers (AdamW, SGD with momentum), the learning-rate schedule and
// gradient clipping. Complex parameters are handled as PyTorch does: the
// update runs on the real view (real and imaginary parts as separate scalars).
#include <string>
#include <vector>

#include "nn/module.h"

namespace phasor::nn {

// A learning rate PyTorch takes (0 <= lr) that is also finite (an infinite
// one makes every parameter NaN): else phasor::Error "<who>: invalid learning rate ...".
void check_learning_rate(const char* who, double lr);

struct ParamGroup {
  NamedTensors params;
  double weight_decay = 0.0;
  double lr_scale = 1.0;  // this group's lr = optimizer lr * lr_scale
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

class AdamW {
 public:
  // Throws phasor::Error for what PyTorch refuses (lr or eps below 0, a beta
  // outside [0, 1), a negative weight decay), a non-finite lr, eps or weight
  // decay, and a parameter listed twice (it would be updated twice a step).
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options);
  // One step over every parameter with a gradient (PyTorch's formula, in its
  // order of operations), taken only where `take` (a bool or 0/1 scalar on the
  // parameters' device; undefined: always) holds. As in PyTorch's capturable
  // Adam, the decision, the step count and the bias corrections stay on the
  // device: a GPU training loop that skips non-finite steps never waits to
  // learn whether this one was (app/train.cpp).
  void step(const Tensor& take = Tensor());
  void zero_grad() const;
  // The learning rate of the next steps; also kept on the parameters' device,
  // where the update reads it, so that a step captured in a CUDA Graph
  // (app/train.cpp, --cuda-graph) takes the rate set before each replay.
  void set_lr(double lr);  // refuses a negative or non-finite lr, changing nothing
  double lr() const { return options_.lr; }
  int64_t steps() const;  // steps taken (on a GPU, reading it waits for the device)

  // Moments by parameter name ("exp_avg.<name>", "exp_avg_sq.<name>") and the step count, for checkpoints.
  StateDict state() const;
  // Refuses, changing nothing, a step count outside [0, 2^53], a missing,
  // mis-shaped or unexpected entry; then copies the moments in.
  void load_state(const StateDict& state, int64_t step);

 private:
  struct Slot {
    std::string name;
    Tensor param, exp_avg, exp_avg_sq;
    double weight_decay, lr_scale;
  };
  std::vector<Slot> slots_;
  AdamWOptions options_;
  int64_t loaded_steps_ = 0;  // the count until the first step puts it on the device
  Tensor count_;              // float64 scalar on the parameters' device: steps taken
  Tensor lr_;                 // float64 scalar on the parameters' device: options_.lr, from the first step on
};

// torch.optim.SGD's options, with its meaning of each.
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;  // the buffer takes (1 - dampening) of each later gradient
  double weight_decay = 0.0;
  bool nesterov = false;   // step along g + momentum buf (needs momentum > 0 and no dampening)
  bool maximize = false;   // ascend: the gradient's sign flipped
};

class SGD {
 public:
  // Throws phasor::Error for a negative or non-finite lr, momentum or weight
  // decay, Nesterov without momentum or with dampening, and a parameter listed twice.
  SGD(NamedTensors params, SGDOptions options);
  void step();
  void zero_grad() const;
  double lr() const { return options_.lr; }
  void set_lr(double lr);  // refuses a negative or non-finite lr, as the constructor does
  // The momentum buffers by parameter name ("momentum_buffer.<name>"), live
  // tensors as PyTorch's; a parameter without one (no step yet) is absent.
  StateDict state() const;
  // Copies buffers in (the same parameters); those absent start afresh. A
  // mis-shaped or unexpected entry is refused before anything changes.
  void load_state(const StateDict& state);

 private:
  NamedTensors params_;
  std::vector<Tensor> momentum_buffers_;
  SGDOptions options_;
};

// Linear warm-up over `warmup` steps to `max_lr`, then cosine decay to `min_lr` at `total` steps.
double warmup_cosine_lr(int64_t step, int64_t warmup, int64_t total, double max_lr, double min_lr);

// Scales all gradients so their global 2-norm is at most max_norm; returns the
// norm before clipping as a float64 scalar tensor on the gradients' device.
// Nothing is read back to the host: the norm, the factor
// min(1, max_norm / (norm + 1e-6)) and the scaling all stay on the device, so
// a GPU step does not wait here. A non-finite norm leaves the gradients as they are.
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);
// The same, with the norm read on the host (one synchronisation on a GPU).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace phasor::nn
