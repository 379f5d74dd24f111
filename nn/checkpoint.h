#pragma once
// Tensors <-> safetensors files, and training checkpoints (a folder of
// model.safetensors, optimizer.safetensors and state.json, each written
// atomically so a crash mid-save leaves the previous checkpoint intact).
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "nn/module.h"
#include "nn/safetensors.h"

namespace phasor::nn {

// Named tensors as safetensors contents (row-major little-endian bytes).
safetensors::Contents to_contents(const StateDict& tensors, const std::map<std::string, std::string>& metadata);
// Every record as a tensor (F32, F64, I64, BOOL, C64); `file` names the source in errors.
StateDict from_contents(const safetensors::Contents& contents, const std::string& file);

void save_tensors(const std::string& path, const StateDict& tensors, const std::map<std::string, std::string>& metadata = {});
StateDict load_tensors(const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

// A training checkpoint folder. `state` is free-form JSON (step, data position, RNG state, config).
struct TrainingCheckpoint {
  StateDict model;
  std::map<std::string, std::string> model_metadata;
  StateDict optimizer;
  nlohmann::json state;
};
void save_training_checkpoint(const std::string& dir, const TrainingCheckpoint& ckpt);
TrainingCheckpoint load_training_checkpoint(const std::string& dir);

}  // namespace phasor::nn
