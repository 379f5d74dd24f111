#include "models/model_io.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "nn/checkpoint.h"

namespace phasor {

std::map<std::string, std::string> model_metadata(const ModelConfig& config, const PositionScaling& scaling) {
  std::map<std::string, std::string> m{{"format", "phasor-model"}, {"config", to_json(config).dump()}};
  PositionScaling saved = scaling;
  saved.warmup = 1.0;  // a saved model means its full phase
  if (!(saved == PositionScaling{})) m["position_scaling"] = to_json(saved).dump();
  return m;
}

PositionScaling scaling_from_metadata(const std::map<std::string, std::string>& metadata, const ModelConfig& config, const std::string& file) {
  const auto found = metadata.find("position_scaling");
  if (found == metadata.end()) return {};
  try {
    const PositionScaling s = position_scaling_from_json(nlohmann::json::parse(found->second));
    s.validate(config.variant());
    return s;
  } catch (const nlohmann::json::exception&) {
    fail(file, ": the \"position_scaling\" in __metadata__ is not valid JSON");
  } catch (const Error& e) {
    fail(file, ": ", e.what());
  }
}

ModelConfig config_from_metadata(const std::map<std::string, std::string>& metadata, const std::string& file) {
  auto format = metadata.find("format");
  PHASOR_CHECK(format != metadata.end() && format->second == "phasor-model", file,
               ": not a Phasor model (its __metadata__ lacks \"format\": \"phasor-model\")");
  auto config = metadata.find("config");
  PHASOR_CHECK(config != metadata.end(), file, ": __metadata__ has no \"config\"");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(config->second);
  } catch (const nlohmann::json::exception&) {
    fail(file, ": the \"config\" in __metadata__ is not valid JSON");
  }
  try {
    ModelConfig c = model_config_from_json(j);
    c.validate();
    return c;
  } catch (const Error& e) {
    fail(file, ": ", e.what());
  }
}

void save_model(const std::string& path, const CausalLM& model) {
  nn::save_tensors(path, model.state_dict(), model_metadata(model.config(), model.position_scaling()));
}

ModelConfig read_model_config(const std::string& path) {
  std::map<std::string, std::string> metadata;
  nn::load_tensors(path, &metadata);
  return config_from_metadata(metadata, path);
}

namespace {

// At most this many missing and this many unexpected names in one message: a
// hostile file can differ from its config in millions.
constexpr size_t kListedNames = 4;

struct NameProblems {
  std::ostringstream listed;
  size_t missing = 0, unexpected = 0;

  void add(size_t& count, const char* what, const std::string& name, const Dims& shape) {
    if (count < kListedNames) listed << (missing + unexpected > 0 ? "; " : " ") << what << ' ' << name << ' ' << shape;
    ++count;
  }
  std::string text() const {
    const size_t unlisted = missing - std::min(missing, kListedNames) + unexpected - std::min(unexpected, kListedNames);
    return listed.str() + (unlisted > 0 ? "; and " + std::to_string(unlisted) + " more" : "");
  }
};

}  // namespace

void check_model_tensors(const nn::StateDict& tensors, const ModelConfig& config, const std::string& file) {
  config.validate();  // bounds every size below
  // Every layer has several tensors: a config with more layers than the file has
  // tensors is refused before its table (a few entries per layer) is built.
  PHASOR_CHECK(config.n_layers <= static_cast<int64_t>(tensors.size()), file, ": its config describes ", config.n_layers,
               " layers, but the file holds only ", tensors.size(), " tensors");
  const std::map<std::string, Dims> expected = parameter_shapes(config);

  NameProblems names;
  for (const auto& [name, shape] : expected)
    if (!tensors.count(name)) names.add(names.missing, "missing", name, shape);
  for (const auto& [name, t] : tensors)
    if (!expected.count(name)) names.add(names.unexpected, "unexpected", name, t.shape());
  PHASOR_CHECK(names.missing + names.unexpected == 0, file, ": the tensors do not match the config:", names.text());

  // The first tensor of the wrong dtype or shape, if any.
  std::string mismatch;
  for (const auto& [name, t] : tensors) {
    std::ostringstream problem;
    if (t.dtype() != DType::Float32) problem << "tensor '" << name << "' is " << t.dtype() << "; a Phasor model stores F32";
    else if (t.shape() != expected.at(name))
      problem << "shape mismatch for tensor '" << name << "': the config asks for " << expected.at(name) << ", the file holds " << t.shape();
    mismatch = problem.str();
    if (!mismatch.empty()) break;
  }
  // A config larger than the file (a header of a few hundred bytes claiming a
  // billion parameters) is named as such, with the first tensor that shows it.
  int64_t parameters = 0, data_bytes = 0;
  for (const auto& [name, shape] : expected) parameters += shape.numel();
  for (const auto& [name, t] : tensors) data_bytes += static_cast<int64_t>(t.nbytes());
  const int64_t needed = parameters * static_cast<int64_t>(itemsize(DType::Float32));
  PHASOR_CHECK(data_bytes >= needed, file, ": its config describes a model of ", parameters, " parameters (", needed,
               " bytes of F32), but the file's data section holds only ", data_bytes, " bytes (", mismatch, ")");
  PHASOR_CHECK(mismatch.empty(), file, ": ", mismatch);

  for (const auto& [name, t] : tensors) {
    const float* values = t.data<float>();  // fresh from the file: contiguous, on the CPU
    PHASOR_CHECK(std::all_of(values, values + t.numel(), [](float v) { return std::isfinite(v); }), file, ": tensor '", name,
                 "' holds NaN or Inf values");
  }
}

ModelFile read_model_file(const std::string& path) {
  ModelFile out;
  std::map<std::string, std::string> metadata;
  out.tensors = nn::load_tensors(path, &metadata);
  out.config = config_from_metadata(metadata, path);
  out.scaling = scaling_from_metadata(metadata, out.config, path);
  check_model_tensors(out.tensors, out.config, path);
  return out;
}

std::unique_ptr<CausalLM> load_model(const std::string& path) {
  const ModelFile file = read_model_file(path);
  // Only now, with every tensor checked against the config, is a model of its size built.
  auto model = std::make_unique<CausalLM>(file.config);
  model->set_position_scaling(file.scaling);
  try {
    model->load_state_dict(file.tensors);
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
  return model;
}

}  // namespace phasor
