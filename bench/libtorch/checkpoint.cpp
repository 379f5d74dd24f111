// Moving weights in and out of the reference model: in memory by name, or
// through a safetensors checkpoint of the spec's layout.
#include <nlohmann/json.hpp>

#include <cstring>

#include "bench/libtorch/reference_model.h"
#include "nn/safetensors.h"
#include "tensor/error.h"

namespace phasor::torch_ref {

namespace {

std::string shape_string(torch::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Checks names, shapes and dtypes of every tensor before copying any of them,
// so a refused load leaves the model untouched.
void copy_into(Model& model, const std::map<std::string, torch::Tensor>& tensors, const std::string& where) {
  auto params = model.named_parameters();
  for (const auto& [name, t] : tensors)
    PHASOR_CHECK(params.contains(name), where, ": unexpected tensor '", name, "' for a '", model.config().position,
                 "' model", name == "lm_head.weight" ? " with tie_embeddings" : "");
  for (const auto& item : params) {
    const auto it = tensors.find(item.key());
    PHASOR_CHECK(it != tensors.end(), where, ": missing tensor '", item.key(), "'");
    PHASOR_CHECK(it->second.sizes() == item.value().sizes(), where, ": tensor '", item.key(), "' has shape ",
                 shape_string(it->second.sizes()), ", the model expects ", shape_string(item.value().sizes()));
    const auto dtype = it->second.scalar_type();
    PHASOR_CHECK(dtype == torch::kFloat32 || dtype == item.value().scalar_type(), where, ": tensor '", item.key(),
                 "' has dtype ", dtype, ", expected float32");
  }
  torch::NoGradGuard no_grad;
  for (auto& item : params) item.value().copy_(tensors.at(item.key()));
}

ModelConfig config_of(const safetensors::Contents& contents, const std::string& path) {
  const auto format = contents.metadata.find("format");
  PHASOR_CHECK(format != contents.metadata.end() && format->second == "phasor-model", path,
               ": metadata has no \"format\": \"phasor-model\"; not a Phasor model checkpoint");
  const auto config = contents.metadata.find("config");
  PHASOR_CHECK(config != contents.metadata.end(), path, ": metadata has no \"config\"");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(config->second);
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": metadata \"config\" is not valid JSON: ", e.what());
  }
  ModelConfig c = model_config_from_json(j);
  c.validate();
  // The twin runs the trained frequencies only: a model saved with a context
  // extension would be evaluated as another model, silently.
  const auto scaling = contents.metadata.find("position_scaling");
  if (scaling != contents.metadata.end()) {
    std::string method;
    try {
      method = nlohmann::json::parse(scaling->second).at("method").get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      fail(path, ": metadata \"position_scaling\" is not valid: ", e.what());
    }
    PHASOR_CHECK(method == "none", path, ": the LibTorch version runs no context extension; this model was saved with --rope-scaling ", method);
  }
  return c;
}

std::map<std::string, torch::Tensor> tensors_of(const safetensors::Contents& contents, const std::string& path) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, record] : contents.tensors) {
    PHASOR_CHECK(record.dtype == "F32", path, ": tensor '", name, "' has dtype ", record.dtype, ", expected F32");
    auto t = torch::empty(record.shape, torch::kFloat32);
    PHASOR_CHECK(record.bytes.size() == static_cast<size_t>(t.nbytes()), path, ": tensor '", name, "' holds ",
                 record.bytes.size(), " bytes, its shape ", shape_string(record.shape), " needs ", t.nbytes());
    std::memcpy(t.data_ptr(), record.bytes.data(), record.bytes.size());  // little-endian host, like the file
    out.emplace(name, t);
  }
  return out;
}

// Everything in the config that changes the numbers must agree.
void check_same_config(const ModelConfig& file, const ModelConfig& model, const std::string& path) {
  auto a = to_json(file), b = to_json(model);
  a.erase("cmha_init");
  b.erase("cmha_init");
  for (const auto& [key, value] : b.items())
    PHASOR_CHECK(a[key] == value, path, ": checkpoint has ", key, " = ", a[key].dump(), ", the model has ", value.dump());
}

}  // namespace

std::map<std::string, torch::Tensor> state(const Model& model) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : model.named_parameters())
    out.emplace(item.key(), item.value().detach().to(torch::kCPU).contiguous().clone());
  return out;
}

void load_state(Model& model, const std::map<std::string, torch::Tensor>& tensors) {
  copy_into(model, tensors, "torch_ref::load_state");
}

ModelConfig read_config(const std::string& path) { return config_of(safetensors::load(path), path); }

void load_safetensors(Model& model, const std::string& path) {
  const auto contents = safetensors::load(path);
  check_same_config(config_of(contents, path), model.config(), path);
  copy_into(model, tensors_of(contents, path), path);
}

std::shared_ptr<Model> load_model(const std::string& path) {
  const auto contents = safetensors::load(path);
  auto model = std::make_shared<Model>(config_of(contents, path));
  copy_into(*model, tensors_of(contents, path), path);
  return model;
}

void save_safetensors(const Model& model, const std::string& path) {
  safetensors::Contents contents;
  contents.metadata["format"] = "phasor-model";
  contents.metadata["config"] = to_json(model.config()).dump();
  for (auto [name, t] : state(model)) {
    t = t.to(torch::kFloat32);
    safetensors::Record record{"F32", t.sizes().vec(), std::string(static_cast<const char*>(t.data_ptr()), t.nbytes())};
    contents.tensors.emplace_back(name, std::move(record));
  }
  safetensors::save(path, contents);
}

}  // namespace phasor::torch_ref
