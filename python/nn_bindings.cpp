// phasor.nn (Module, the library's layers, losses) and phasor.optim (AdamW,
// SGD: the library's optimizers, bound, with PyTorch's signatures).
//
// A Python subclass of phasor.nn.Module holds its layers and tensors as
// attributes, as in PyTorch: its parameters are the parameters of the layers
// it holds (also inside lists and tuples) and the tensor attributes that
// require grad, named by attribute path ("fc1.weight").
#include <algorithm>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "autograd/functions.h"
#include "autograd/fused.h"
#include "autograd/grad_mode.h"
#include "nn/layers.h"
#include "nn/optim.h"
#include "python/bindings.h"
#include "python/gil.h"

namespace py = pybind11;
using namespace py::literals;

namespace phasor::python {

namespace {

// Parameters (or buffers) of a module: those it registered in C++ (a library
// layer), then those of its attributes, in the order they were set.
void collect(const py::handle& module, const std::string& prefix, bool buffers, nn::NamedTensors& out) {
  const nn::Module& m = module.cast<const nn::Module&>();
  for (const auto& [name, t] : buffers ? m.named_buffers() : m.named_parameters()) out.emplace_back(prefix + name, t);
  if (!py::hasattr(module, "__dict__")) return;
  const auto visit = [&](const std::string& name, const py::handle& value, const auto& self) -> void {
    if (py::isinstance<nn::Module>(value)) {
      collect(value, prefix + name + ".", buffers, out);
    } else if (!buffers && py::isinstance<Tensor>(value) && value.cast<const Tensor&>().requires_grad()) {
      out.emplace_back(prefix + name, value.cast<Tensor>());
    } else if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
      size_t i = 0;
      for (const py::handle item : value) self(name + "." + std::to_string(i++), item, self);
    }
  };
  for (const auto& [key, value] : module.attr("__dict__").cast<py::dict>()) visit(key.cast<std::string>(), value, visit);
}

nn::NamedTensors named(const py::handle& module, bool buffers) {
  nn::NamedTensors out;
  collect(module, "", buffers, out);
  return out;
}

std::map<std::string, Tensor> state_dict(const py::handle& module) {
  std::map<std::string, Tensor> out;
  for (const bool buffers : {false, true})
    for (const auto& [name, t] : named(module, buffers)) out.emplace(name, t.detach());
  return out;
}

// Copies values in, after checking every name and shape (one message naming all that differ).
void load_state_dict(const py::handle& module, const std::map<std::string, Tensor>& state) {
  const std::map<std::string, Tensor> own = state_dict(module);
  std::string problems;
  const auto add = [&](const std::string& p) { problems += (problems.empty() ? "" : "; ") + p; };
  for (const auto& [name, t] : own) {
    const auto it = state.find(name);
    if (it == state.end()) add("missing " + name);
    else if (it->second.shape() != t.shape())
      add(name + " has shape " + py::str(py::cast(it->second).attr("shape")).cast<std::string>() + ", the module's " +
          py::str(py::cast(t).attr("shape")).cast<std::string>());
  }
  for (const auto& [name, t] : state)
    if (!own.count(name)) add("unexpected " + name);
  PHASOR_CHECK(problems.empty(), "load_state_dict: ", problems);
  NoGradGuard no_grad;
  for (const auto& [name, t] : own) ops::copy_(t, state.at(name).detach());
}

void set_training(const py::handle& module, bool on) {
  module.cast<nn::Module&>().train(on);
  if (!py::hasattr(module, "__dict__")) return;
  for (const auto& [key, value] : module.attr("__dict__").cast<py::dict>()) {
    if (py::isinstance<nn::Module>(value)) set_training(value, on);
    if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value))
      for (const py::handle item : value)
        if (py::isinstance<nn::Module>(item)) set_training(item, on);
  }
}

std::vector<Tensor> tensors_of(const nn::NamedTensors& named) {
  std::vector<Tensor> out;
  for (const auto& [name, t] : named) out.push_back(t);
  return out;
}

// The parameters an optimizer is given, as PyTorch takes them: tensors, or
// groups {"params": [...], "weight_decay": w}; named "<group>.<index>" for its state.
std::vector<nn::ParamGroup> param_groups(const py::iterable& params, double weight_decay) {
  std::vector<nn::ParamGroup> groups;
  nn::ParamGroup loose{{}, weight_decay};
  for (const py::handle item : params) {
    if (py::isinstance<py::dict>(item)) {
      const py::dict g = py::reinterpret_borrow<py::dict>(item);
      nn::ParamGroup group{{}, g.contains("weight_decay") ? g["weight_decay"].cast<double>() : weight_decay};
      for (const py::handle p : g["params"]) group.params.emplace_back(std::to_string(groups.size()) + "." + std::to_string(group.params.size()), p.cast<Tensor>());
      groups.push_back(std::move(group));
    } else {
      loose.params.emplace_back("p." + std::to_string(loose.params.size()), item.cast<Tensor>());
    }
  }
  if (!loose.params.empty()) groups.push_back(std::move(loose));
  for (const nn::ParamGroup& g : groups)
    for (const auto& [name, p] : g.params) PHASOR_CHECK(p.is_leaf(), "optimizer: parameter ", name, " is not a leaf tensor");
  PHASOR_CHECK(!groups.empty(), "optimizer got an empty parameter list");
  return groups;
}

// An optimizer's refusal (a bad hyper-parameter, a parameter listed twice, a
// state that is not its own) raises what PyTorch's optimizers raise: ValueError.
template <class F>
auto as_value_error(F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
}

// An optimizer's state_dict(): the keys it may hold, checked before anything is loaded.
void check_state_keys(const char* who, const py::dict& state, std::initializer_list<const char*> allowed) {
  for (const auto& [key, value] : state) {
    const std::string name = py::str(key);
    PHASOR_CHECK(std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return name == a; }), who,
                 ".load_state_dict: unexpected key '", name, "' (a state_dict() holds ", allowed.size() == 3 ? "'state', 'steps' and 'lr'" : "'state' and 'lr'", ")");
  }
}

// The lr a state_dict() gives, checked as the setter checks it, or nullopt.
std::optional<double> state_lr(const py::dict& state) {
  if (!state.contains("lr")) return std::nullopt;
  return state["lr"].cast<double>();
}

template <class Layer>
py::class_<Layer, nn::Module, std::shared_ptr<Layer>> layer(py::module_& nn, const char* name, const char* doc) {
  return py::class_<Layer, nn::Module, std::shared_ptr<Layer>>(nn, name, doc);
}

}  // namespace

void bind_nn(py::module_& m) {
  py::module_ nn = m.def_submodule("nn", "Modules (PyTorch's habits) over the library's layers, and losses");
  py::class_<nn::Module, std::shared_ptr<nn::Module>>(nn, "Module", py::dynamic_attr(),
                                                     "the base of a model: subclass it, set layers and tensors as attributes, "
                                                     "write forward(); calling the module calls forward")
      .def(py::init<>())
      .def("__call__", [](py::object self, py::args args, py::kwargs kwargs) { return self.attr("forward")(*args, **kwargs); })
      .def("named_parameters", [](py::object self) { return named(self, false); })
      .def("parameters", [](py::object self) { return tensors_of(named(self, false)); })
      .def("named_buffers", [](py::object self) { return named(self, true); })
      .def("state_dict", &state_dict, "parameters and buffers by name (detached, sharing the module's memory)")
      .def("load_state_dict", &load_state_dict, "state"_a, "copies values in; refuses (naming each) missing, unexpected or mis-shaped entries")
      .def("zero_grad", [](py::object self) {
        for (const auto& [name, t] : named(self, false)) t.zero_grad();
      })
      .def("train", [](py::object self, bool on) { set_training(self, on); return self; }, "mode"_a = true)
      .def("eval", [](py::object self) { set_training(self, false); return self; })
      .def_property_readonly("training", [](const nn::Module& m) { return m.is_training(); });

  layer<nn::Linear>(nn, "Linear", "y = x W^T (+ b), W [out, in]; a complex dtype gives a complex layer")
      .def(py::init([](int64_t in, int64_t out, bool bias, DType dtype, std::optional<uint64_t> seed) {
             std::optional<Generator> gen = seed ? std::optional<Generator>(Generator(*seed)) : std::nullopt;
             return std::make_shared<nn::Linear>(in, out, bias, dtype, gen ? &*gen : nullptr);
           }), "in_features"_a, "out_features"_a, "bias"_a = true, "dtype"_a = DType::Float32, "seed"_a = py::none())
      .def("forward", &nn::Linear::forward, "x"_a, ReleaseGil())
      .def_readonly("weight", &nn::Linear::weight)
      .def_property_readonly("bias", [](const nn::Linear& l) { return l.bias.defined() ? std::optional<Tensor>(l.bias) : std::nullopt; });
  layer<nn::Embedding>(nn, "Embedding", "rows of a [count, dim] table picked by int64 ids")
      .def(py::init([](int64_t count, int64_t dim, std::optional<uint64_t> seed) {
             std::optional<Generator> gen = seed ? std::optional<Generator>(Generator(*seed)) : std::nullopt;
             return std::make_shared<nn::Embedding>(count, dim, gen ? &*gen : nullptr);
           }), "num_embeddings"_a, "embedding_dim"_a, "seed"_a = py::none())
      .def("forward", &nn::Embedding::forward, "ids"_a, ReleaseGil())
      .def_readonly("weight", &nn::Embedding::weight);
  layer<nn::RMSNorm>(nn, "RMSNorm", "x / rms(x) * weight over the last dimension")
      .def(py::init<int64_t, double>(), "dim"_a, "eps"_a = 1e-5)
      .def("forward", &nn::RMSNorm::forward, "x"_a, ReleaseGil())
      .def_readonly("weight", &nn::RMSNorm::weight);
  layer<nn::LayerNorm>(nn, "LayerNorm", "layer normalisation over the last dimension")
      .def(py::init<int64_t, double>(), "dim"_a, "eps"_a = 1e-5)
      .def("forward", &nn::LayerNorm::forward, "x"_a, ReleaseGil());
  layer<nn::Dropout>(nn, "Dropout", "zeroes each element with probability p in training (seeded), the identity in eval()")
      .def(py::init<double, uint64_t>(), "p"_a = 0.5, "seed"_a = 0)
      .def("forward", &nn::Dropout::forward, "x"_a, ReleaseGil());
  nn.def("mse_loss", &nn::mse_loss, "input"_a, "target"_a, ReleaseGil(), "mean of |input - target|^2");
  nn.def("cross_entropy", [](const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
           return cross_entropy(logits, targets, ignore_index, true);
         }, "logits"_a, "targets"_a, "ignore_index"_a = -100, ReleaseGil(), "mean cross-entropy of [N, C] logits against [N] int64 targets");

  py::module_ optim = m.def_submodule("optim", "the library's optimizers (nn/optim.h) with PyTorch's signatures");
  py::class_<nn::AdamW>(optim, "AdamW", "AdamW as PyTorch computes it (complex parameters as pairs of reals)")
      .def(py::init([](const py::iterable& params, double lr, std::pair<double, double> betas, double eps, double weight_decay) {
             return as_value_error([&] {
               return nn::AdamW(param_groups(params, weight_decay), nn::AdamWOptions{lr, betas.first, betas.second, eps});
             });
           }), "params"_a, "lr"_a = 1e-3, "betas"_a = std::pair<double, double>(0.9, 0.999), "eps"_a = 1e-8, "weight_decay"_a = 1e-2)
      .def("step", [](nn::AdamW& o) { o.step(); }, ReleaseGil())
      .def("zero_grad", &nn::AdamW::zero_grad)
      .def_property("lr", &nn::AdamW::lr, [](nn::AdamW& o, double lr) { as_value_error([&] { o.set_lr(lr); }); })
      .def_property_readonly("steps", &nn::AdamW::steps)
      .def("state_dict", [](const nn::AdamW& o) {
             return py::dict("state"_a = o.state(), "steps"_a = o.steps(), "lr"_a = o.lr());
           }, "the moments by parameter (live tensors, as PyTorch's), the step count and lr: a checkpoint's optimizer part")
      .def("load_state_dict", [](nn::AdamW& o, const py::dict& state) {
             as_value_error([&] {
               PHASOR_CHECK(state.contains("state") && state.contains("steps"), "AdamW.load_state_dict: expected a dict with 'state' and 'steps', "
                                                                               "as state_dict() gives");
               check_state_keys("AdamW", state, {"state", "steps", "lr"});
               const std::optional<double> lr = state_lr(state);
               if (lr) nn::check_learning_rate("AdamW", *lr);  // as the setter checks it
               o.load_state(state["state"].cast<nn::StateDict>(), state["steps"].cast<int64_t>());  // checks all, then copies
               if (lr) o.set_lr(*lr);
             });
           }, "state"_a, "copies the moments in (the same parameters, in the same order) and resumes the step count; "
                         "refuses (ValueError, changing nothing) a bad step count or lr, a missing, mis-shaped or unexpected entry");
  py::class_<nn::SGD>(optim, "SGD", "SGD as PyTorch computes it: momentum, dampening, Nesterov, weight decay, maximize")
      .def(py::init([](const py::iterable& params, double lr, double momentum, double dampening, double weight_decay, bool nesterov,
                       bool maximize) {
             return as_value_error([&] {
               const std::vector<nn::ParamGroup> groups = param_groups(params, weight_decay);
               PHASOR_CHECK(groups.size() == 1 && groups[0].weight_decay == weight_decay,
                            "SGD takes one list of tensors (parameter groups are AdamW's)");
               return nn::SGD(groups[0].params, nn::SGDOptions{lr, momentum, dampening, weight_decay, nesterov, maximize});
             });
           }), "params"_a, "lr"_a, "momentum"_a = 0.0, "dampening"_a = 0.0, "weight_decay"_a = 0.0, "nesterov"_a = false, py::kw_only(),
           "maximize"_a = false)
      .def("step", &nn::SGD::step, ReleaseGil())
      .def("zero_grad", &nn::SGD::zero_grad)
      .def_property("lr", &nn::SGD::lr, [](nn::SGD& o, double lr) { as_value_error([&] { o.set_lr(lr); }); })
      .def("state_dict", [](const nn::SGD& o) { return py::dict("state"_a = o.state(), "lr"_a = o.lr()); },
           "the momentum buffers by parameter (live tensors, as PyTorch's) and lr")
      .def("load_state_dict", [](nn::SGD& o, const py::dict& state) {
             as_value_error([&] {
               PHASOR_CHECK(state.contains("state"), "SGD.load_state_dict: expected a dict with 'state', as state_dict() gives");
               check_state_keys("SGD", state, {"state", "lr"});
               const std::optional<double> lr = state_lr(state);
               const double before = o.lr();
               if (lr) o.set_lr(*lr);  // checked first; put back if the buffers are refused
               try {
                 o.load_state(state["state"].cast<nn::StateDict>());
               } catch (...) {
                 o.set_lr(before);
                 throw;
               }
             });
           }, "state"_a, "copies the momentum buffers in (the same parameters, in the same order); refuses (ValueError, changing nothing) "
                         "a bad lr, a mis-shaped or unexpected entry");
}

}  // namespace phasor::python
