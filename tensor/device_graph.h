#pragma once
// A recording of the work a device's backend queues, replayed with no host
// work per kernel: CUDA Graphs, on the CUDA backend. A backend that can record
// registers a maker (cuda/runtime.cpp); code above the library asks for a
// graph by device (the training loop's --cuda-graph), so it links no CUDA
// library and works wherever the program links the CUDA backend.
#include <functional>
#include <memory>

#include "tensor/device.h"

namespace phasor {

class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  // Records what `body` queues on the device instead of running it; once per graph.
  virtual void capture(const std::function<void()>& body) = 0;
  // Queues the recording again: the same kernels on the same memory.
  virtual void replay() const = 0;
};

using DeviceGraphMaker = std::unique_ptr<DeviceGraph> (*)();
void register_device_graph(DeviceType type, DeviceGraphMaker maker);
// A new graph of `device`'s backend; throws phasor::Error where that backend records none.
std::unique_ptr<DeviceGraph> make_device_graph(Device device);

}  // namespace phasor
