#include "nn/checkpoint.h"

#include <algorithm>
#include <filesystem>

#include "nn/atomic_file.h"
#include "tensor/ops.h"

namespace phasor::nn {

namespace {
constexpr const char* kOptimizerFormat = "phasor-optimizer";  // optimizer.safetensors's __metadata__ "format"

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int64: return "I64";
    case DType::Bool: return "BOOL";
    case DType::Complex64: return "C64";
    case DType::BFloat16: return "BF16";  // the bits, little-endian, as PyTorch's safetensors writes them
    case DType::Complex128: break;
  }
  fail("safetensors: dtype ", t, " has no safetensors equivalent");
}

DType phasor_dtype(const std::string& s, const std::string& file, const std::string& name) {
  if (s == "F32") return DType::Float32;
  if (s == "F64") return DType::Float64;
  if (s == "I64") return DType::Int64;
  if (s == "BOOL") return DType::Bool;
  if (s == "C64") return DType::Complex64;
  if (s == "BF16") return DType::BFloat16;
  fail(file, ": tensor '", name, "' has dtype ", s, ", which Phasor does not load (F32, F64, I64, BOOL, C64, BF16)");
}
}  // namespace

safetensors::Contents to_contents(const StateDict& tensors, const std::map<std::string, std::string>& metadata) {
  safetensors::Contents c;
  c.metadata = metadata;
  for (const auto& [name, t] : tensors) {
    const Tensor host = ops::contiguous(ops::to_device(t, kCPU));
    safetensors::Record r{safetensors_dtype(t.dtype()), t.shape().vec(),
                          std::string(static_cast<const char*>(host.raw_data()), host.nbytes())};
    c.tensors.emplace_back(name, std::move(r));
  }
  return c;
}

StateDict from_contents(const safetensors::Contents& contents, const std::string& file) {
  StateDict out;
  for (const auto& [name, r] : contents.tensors) {
    const DType dt = phasor_dtype(r.dtype, file, name);
    // A zero dimension empties a tensor whatever the others say, but its strides
    // still multiply them: they must fit in 64 bits.
    int64_t extent = 1;
    for (int64_t d : r.shape)
      PHASOR_CHECK(!__builtin_mul_overflow(extent, std::max<int64_t>(d, 1), &extent), file, ": tensor '", name,
                   "' has a shape too large to index");
    const Dims shape(r.shape);
    PHASOR_CHECK(r.bytes.size() == static_cast<size_t>(shape.numel()) * itemsize(dt), file, ": tensor '", name,
                 "' byte length does not match its shape");
    out.emplace(name, from_blob(r.bytes.data(), shape, dt));
  }
  return out;
}

void save_tensors(const std::string& path, const StateDict& tensors, const std::map<std::string, std::string>& metadata) {
  safetensors::save(path, to_contents(tensors, metadata));
}

StateDict load_tensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  const safetensors::Contents c = safetensors::load(path);
  if (metadata) *metadata = c.metadata;
  return from_contents(c, path);
}

void save_training_checkpoint(const std::string& dir, const TrainingCheckpoint& ckpt) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  PHASOR_CHECK(!ec, "cannot create checkpoint folder '", dir, "': ", ec.message());
  // state.json goes last: a checkpoint whose state.json is older than its
  // other files is still consistent with its own step.
  save_tensors(dir + "/model.safetensors", ckpt.model, ckpt.model_metadata);
  save_tensors(dir + "/optimizer.safetensors", ckpt.optimizer, {{"format", kOptimizerFormat}});
  write_file_atomic(dir + "/state.json", ckpt.state.dump(2) + "\n");
}

TrainingCheckpoint load_training_checkpoint(const std::string& dir) {
  PHASOR_CHECK(std::filesystem::is_directory(dir), "checkpoint folder '", dir, "' does not exist");
  TrainingCheckpoint ckpt;
  ckpt.model = load_tensors(dir + "/model.safetensors", &ckpt.model_metadata);
  // The optimizer's own tag, as a model file's "format" is checked: another
  // safetensors file with matching names (a gradient file copied over it) is no optimizer state.
  std::map<std::string, std::string> optimizer_metadata;
  ckpt.optimizer = load_tensors(dir + "/optimizer.safetensors", &optimizer_metadata);
  const auto format = optimizer_metadata.find("format");
  PHASOR_CHECK(format != optimizer_metadata.end() && format->second == kOptimizerFormat, dir,
               "/optimizer.safetensors: not a Phasor optimizer state (its __metadata__ lacks \"format\": \"", kOptimizerFormat, "\")");
  const std::string text = read_file_bytes(dir + "/state.json", 100u << 20, "100 MiB for a state.json");
  try {
    ckpt.state = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(dir, "/state.json: invalid JSON (", e.what(), ")");
  }
  return ckpt;
}

}  // namespace phasor::nn
