#pragma once
// What a command's --checkpoint may name: the model file itself, a checkpoint
// folder (ckpt-00000200/, holding model.safetensors) or a training run's folder
// (its latest checkpoint, the one its `latest` file names).
#include <string>

namespace phasor {

// The model file `path` stands for. Throws one line naming `path` when it is
// a folder with neither a model.safetensors nor a run's `latest` pointer, or
// when `latest` names a checkpoint that is not there; a path that is not a
// folder is returned as given (the reader reports a missing or wrong file).
std::string model_file_of(const std::string& path);

// The training run a model file belongs to: the folder above its checkpoint
// folder, when that holds a run's config.json and validation.txt; else "".
std::string run_folder_of(const std::string& model_file);

}  // namespace phasor
