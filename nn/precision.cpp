#include "nn/precision.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "autograd/functions.h"
#include "tensor/error.h"
#include "tensor/storage.h"

namespace phasor::nn {

namespace {
thread_local Precision current = Precision::Float32;
}

const char* precision_name(Precision p) { return p == Precision::BFloat16 ? "bf16" : "float32"; }

Precision parse_precision(std::string_view name) {
  if (name == "float32") return Precision::Float32;
  if (name == "bf16") return Precision::BFloat16;
  fail("unknown precision '", std::string(name), "': expected float32 or bf16");
}

bool cpu_has_bf16_arithmetic() {
  if (const char* forced = std::getenv("PHASOR_CPU_BF16"); forced != nullptr && *forced != '\0') {
    const std::string_view v(forced);
    PHASOR_CHECK(v == "0" || v == "1", "PHASOR_CPU_BF16 must be 0 or 1 (or unset), got '", v, "'");
    return v == "1";
  }
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool have = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool amx_bf16 = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (1u << 22)) != 0;  // CPUID.7.0:EDX[22]
    return __builtin_cpu_supports("avx512bf16") || amx_bf16;
  }();
  return have;
#else
  return false;
#endif
}

Precision resolve_precision(std::string_view name, DeviceType device) {
  if (name == "auto") return device != DeviceType::CPU || cpu_has_bf16_arithmetic() ? Precision::BFloat16 : Precision::Float32;
  PHASOR_CHECK(name == "float32" || name == "bf16", "unknown precision '", std::string(name), "': expected float32, bf16 or auto");
  return parse_precision(name);
}

std::string describe_precision(std::string_view name, DeviceType device) {
  const Precision p = resolve_precision(name, device);
  const bool cpu = device == DeviceType::CPU;
  std::string text = precision_name(p);
  if (name == "auto")
    text += !cpu                          ? " (auto: a GPU)"
            : p == Precision::BFloat16 ? " (auto: this CPU has bf16 arithmetic, AVX512-BF16 or AMX)"
                                       : " (auto: this CPU has no bf16 arithmetic, AVX512-BF16 or AMX)";
  else if (p == Precision::BFloat16 && cpu && !cpu_has_bf16_arithmetic())
    text += " (slower than float32 here: this CPU has no bf16 arithmetic, AVX512-BF16 or AMX, so bf16 only adds conversions)";
  return text;
}

DType compute_dtype(Precision precision, OpClass op) {
  const bool narrow = op == OpClass::WeightGemm || op == OpClass::AttentionInputs;
  return precision == Precision::BFloat16 && narrow ? DType::BFloat16 : DType::Float32;
}

Precision current_precision() { return current; }

PrecisionScope::PrecisionScope(Precision precision) : saved_(current) { current = precision; }
PrecisionScope::~PrecisionScope() { current = saved_; }

namespace {

constexpr int64_t kMinMixedWork = int64_t{1} << 16;

// The rounded copy of a tensor, kept while its storage lives and is not
// written to (its version counter): decoding then rounds each weight once, not
// once per token, and a layer's input shared by the Q, K and V projections (or
// SwiGLU's two) is rounded, and saved for backward, once.
class RoundedCopies {
 public:
  Tensor get(const Tensor& w, DType compute) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const Key key{w.raw_data(), compute};
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second.storage.lock() == w.storage() && it->second.version == w.storage()->version() &&
        it->second.rounded.shape() == w.shape() && it->second.strides == w.strides())
      return it->second.rounded;
    std::erase_if(entries_, [](const auto& e) { return e.second.storage.expired(); });
    Entry e{w.storage(), w.storage()->version(), w.strides(), ops::to(w, compute)};
    return entries_.insert_or_assign(key, std::move(e)).first->second.rounded;
  }

 private:
  struct Key {
    const void* data;
    DType compute;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<const void*>()(k.data) ^ static_cast<size_t>(k.compute); }
  };
  struct Entry {
    std::weak_ptr<Storage> storage;
    uint64_t version;
    Dims strides;
    Tensor rounded;
  };
  std::mutex mutex_;
  std::unordered_map<Key, Entry, KeyHash> entries_;
};

}  // namespace

Tensor weight_product(const Tensor& x, const Tensor& weight) {
  const DType compute = compute_dtype(current_precision(), OpClass::WeightGemm);
  // A product below 2^16 multiply-adds (decoding one token) gains nothing from
  // bfloat16: its call costs more than its arithmetic. It stays float32.
  const int64_t work = x.dim() == 0 ? 0 : x.numel() * weight.size(0);
  if (compute == DType::Float32 || x.dtype() != DType::Float32 || work < kMinMixedWork)
    return matmul(x, weight, MatOp::None, MatOp::Transpose);
  static RoundedCopies rounded;
  return matmul_in(compute, x, weight, MatOp::Transpose, rounded.get(x, compute), rounded.get(weight, compute));
}

}  // namespace phasor::nn
