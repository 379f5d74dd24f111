#pragma once
// Module: a tree of named parameters, buffers and child modules, with names
// that match the checkpoint layout (e.g. "layers.3.attn.wq.weight").
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace phasor::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using StateDict = std::map<std::string, Tensor>;

class Module {
 public:
  virtual ~Module() = default;

  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  NamedTensors named_buffers() const;
  int64_t parameter_count() const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad() const;
  // Moves every parameter, gradient and buffer to `device` in place (Tensor::set_data):
  // handles held elsewhere (layer fields, optimizers built afterwards) stay valid.
  void to(Device device);

  // Parameters and buffers by name (tensors share storage with the module).
  StateDict state_dict() const;
  // Copies values in; throws phasor::Error naming every missing, unexpected or
  // mis-shaped entry (all of them, in one message) before changing anything.
  void load_state_dict(const StateDict& state);

 protected:
  Tensor register_parameter(const std::string& name, Tensor value);
  Tensor register_buffer(const std::string& name, Tensor value);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    children_.emplace_back(name, module);
    return module;
  }

 private:
  void collect(const std::string& prefix, NamedTensors& out, bool buffers) const;
  NamedTensors params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace phasor::nn
