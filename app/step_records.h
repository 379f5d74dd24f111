#pragma once
// What a training step reports to the host, its loss and gradient norm,
// gathered where the step ran and read in one copy when the host needs them:
// at a logging interval, a validation, a checkpoint. A GPU step then never
// waits for the device. A step whose loss or norm is not finite is skipped by
// the optimizer on the device (nn::AdamW::step(take)); the host accounts for
// it when it reads.
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace phasor {

struct StepReport {
  int64_t step;  // the step's index (0 for the first)
  double loss, grad_norm, lr;
  int64_t tokens;
  bool skipped() const;  // a non-finite loss or norm: the optimizer did not take it
};

class StepRecords {
 public:
  // Records step `step`: its loss and gradient norm (one-element float64
  // tensors on the step's device). Returns whether the optimizer is to take
  // the step, computed there: a bool scalar, true where both are finite.
  Tensor record(int64_t step, const Tensor& loss, const Tensor& grad_norm, double lr, int64_t tokens);
  // record() in its parts, for a step replayed from a CUDA Graph: the step's
  // {loss, grad_norm} (float64 [2] on its device) and whether to take it are
  // computed inside the graph; the host adds each replay's values afterwards.
  static Tensor values_of(const Tensor& loss, const Tensor& grad_norm);
  static Tensor finite(const Tensor& values);
  void add(int64_t step, const Tensor& values, double lr, int64_t tokens);
  // Every step recorded since the last read, in order, in one device-to-host copy.
  std::vector<StepReport> read();
  bool empty() const { return pending_.empty(); }

 private:
  struct Pending {
    int64_t step;
    Tensor values;  // {loss, grad_norm}, float64 on the step's device
    double lr;
    int64_t tokens;
  };
  std::vector<Pending> pending_;
};

}  // namespace phasor
