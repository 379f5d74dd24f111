#include "app/checkpoint_path.h"

#include <filesystem>
#include <system_error>

#include "app/train.h"
#include "tensor/error.h"

namespace phasor {

namespace fs = std::filesystem;

std::string model_file_of(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;
  const fs::path folder(path);
  const fs::path model = folder / "model.safetensors";
  if (fs::is_regular_file(model, ec)) return model.string();
  const fs::path latest = folder / "latest";
  PHASOR_CHECK(fs::is_regular_file(latest, ec), "'", path,
               "' is a folder with neither a model.safetensors (a checkpoint's) nor a 'latest' file (a training run's)");
  // Read as resume reads it: bounded, and a FIFO is refused rather than waited on.
  const std::string checkpoint = latest_checkpoint(path);
  const std::string name = checkpoint.empty() ? "" : checkpoint.substr(path.size() + 1);
  PHASOR_CHECK(!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..", "'", latest.string(),
               "' does not name a checkpoint folder of the run");
  const fs::path named = folder / name / "model.safetensors";
  PHASOR_CHECK(fs::is_regular_file(named, ec), "'", latest.string(), "' names ", name, ", but '", named.string(), "' is not there");
  return named.string();
}

std::string run_folder_of(const std::string& model_file) {
  std::error_code ec;
  const fs::path run = fs::absolute(model_file, ec).parent_path().parent_path();
  if (ec || !fs::is_regular_file(run / "config.json", ec) || !fs::is_regular_file(run / "validation.txt", ec)) return "";
  return run.string();
}

}  // namespace phasor
