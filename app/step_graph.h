#pragma once
// A training step captured once as a CUDA Graph and replayed for every later
// step (phasor train --cuda-graph): the host then launches one graph per step
// instead of its hundreds of kernels. Each batch is copied into the input
// tensors the graph was captured with, and the graph replays the step on
// them; what else changes between steps lives on the device (nn::AdamW's
// learning rate and step count).
#include <functional>
#include <memory>
#include <vector>

#include "tensor/tensor.h"

namespace phasor {

class StepGraph {
 public:
  // The step's device work on token and target tensors [batch, seq] on the
  // GPU, returning what the step reports (StepRecords::values_of).
  using Step = std::function<Tensor(const Tensor& inputs, const Tensor& targets)>;

  explicit StepGraph(Device device);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // One step on this batch (host tokens and targets, [batch, seq]): the first
  // call captures `step` and replays it; later calls replay. Returns the step's
  // values, which the next call overwrites. Throws where the batch's shape is
  // not the captured one.
  Tensor run(const std::vector<int64_t>& inputs, const std::vector<int64_t>& targets, int64_t batch, int64_t seq_len, const Step& step);

 private:
  struct Captured;
  Device device_;
  std::unique_ptr<Captured> captured_;
};

}  // namespace phasor
