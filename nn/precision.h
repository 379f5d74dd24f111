#pragma once
// Mixed precision: the policy that says which of a model's ops compute in
// bfloat16, written once for every backend (the CUDA path reads the same
// table), and the scope that turns it on for a forward pass.
//
// Under Precision::BFloat16 the weight GEMMs (the Q/K/V/O projections, the
// SwiGLU and the output head) round their operands to bfloat16 and accumulate
// in float32, forward and backward; attention's inputs (q and k after their
// rotation, and v) are stored in bfloat16, and the fused attention reads them
// so and saves them so for backward, accumulating the scores, the softmax and
// the weighted sum in float32 (autograd causal_attention_in). Everything whose
// accuracy the model rests on stays float32: the CMHA and rotary phases
// (atan2, the angle sums, sin/cos of phases in the thousands of radians),
// attention's arithmetic, RMSNorm, the loss, the gradients (each op's come
// back float32), the optimizer's state and the master weights. Generation
// through a KV cache keeps the cache, and so attention's inputs, float32. A
// checkpoint is float32 either way, so a run may change precision when it resumes.
#include <string>
#include <string_view>

#include "tensor/tensor.h"

namespace phasor::nn {

enum class Precision { Float32, BFloat16 };
const char* precision_name(Precision p);  // "float32", "bf16"
Precision parse_precision(std::string_view name);  // the inverse; throws phasor::Error naming both

// Whether this CPU computes in bfloat16 (AVX512-BF16 or AMX-BF16). Without
// either, bf16 only adds conversions: a step is slower than float32's
// (docs/benchmarks.md). PHASOR_CPU_BF16=1 or 0 overrides the detection, so
// that both answers can be tested on any machine.
bool cpu_has_bf16_arithmetic();

// `--precision auto|float32|bf16` on `device`: auto is bf16 on a GPU or on a
// CPU with bf16 arithmetic, float32 elsewhere. Throws phasor::Error naming the
// three for any other name.
Precision resolve_precision(std::string_view name, DeviceType device);

// How a run states the precision it resolved `name` to: "float32", or with
// why auto chose it ("bf16 (auto: this CPU has bf16 arithmetic)"), or with a
// warning where bf16 was asked of a CPU without bf16 arithmetic ("bf16 (slower
// than float32 here: ...)").
std::string describe_precision(std::string_view name, DeviceType device);

// The kinds of op a model is made of, as the policy sees them.
enum class OpClass {
  WeightGemm,  // x W^T of a linear layer or of the output head
  Rotation,    // the CMHA and rotary phases
  AttentionInputs,  // q, k and v as attention reads and saves them (their storage)
  Attention,   // scores, softmax, the weighted sum of values (their accumulation)
  Norm,        // RMSNorm, LayerNorm
  Loss,        // cross-entropy
  Optimizer,   // the gradients' reduction, AdamW and its state
};

// The dtype an op of `op` computes in under `precision` (the policy).
DType compute_dtype(Precision precision, OpClass op);

// The precision of this thread's forward passes: float32 unless a scope says otherwise.
Precision current_precision();
class PrecisionScope {
 public:
  explicit PrecisionScope(Precision precision);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision saved_;
};

// x W^T for a weight W [out, in], in the dtype the policy gives weight GEMMs
// now; a product of fewer than 2^16 multiply-adds (decoding a token) stays
// float32, where bfloat16 saves nothing.
Tensor weight_product(const Tensor& x, const Tensor& weight);

}  // namespace phasor::nn
