#include "app/step_graph.h"

#include "tensor/device_graph.h"
#include "tensor/ops.h"

namespace phasor {

struct StepGraph::Captured {
  std::unique_ptr<DeviceGraph> graph;
  Tensor inputs, targets;  // the graph's input buffers: each batch is copied in before the replay
  Tensor values;           // the graph's output
};

StepGraph::StepGraph(Device device) : device_(device) {}
StepGraph::~StepGraph() = default;

Tensor StepGraph::run(const std::vector<int64_t>& inputs, const std::vector<int64_t>& targets, int64_t batch, int64_t seq_len,
                      const Step& step) {
  const Tensor host_inputs = from_vector(inputs, {batch, seq_len}), host_targets = from_vector(targets, {batch, seq_len});
  if (!captured_) {
    auto c = std::make_unique<Captured>();
    c->graph = make_device_graph(device_);
    c->inputs = ops::to_device(host_inputs, device_);
    c->targets = ops::to_device(host_targets, device_);
    c->graph->capture([&] { c->values = step(c->inputs, c->targets); });
    captured_ = std::move(c);
  } else {
    PHASOR_CHECK(captured_->inputs.shape() == host_inputs.shape(), "train: --cuda-graph replays a step of batch ", captured_->inputs.shape(),
                 ", got a batch of ", host_inputs.shape(), " (a captured step has static shapes)");
    // Asynchronous uploads in stream order: the previous replay has read the buffers before these land.
    ops::copy_(captured_->inputs, ops::to_device(host_inputs, device_));
    ops::copy_(captured_->targets, ops::to_device(host_targets, device_));
  }
  captured_->graph->replay();
  return captured_->values;
}

}  // namespace phasor
