// Mixed precision (nn/precision.h): bfloat16 GEMMs with float32 accumulation,
// their gradients, the policy, and a model trained under it against float32.
#include <nlohmann/json.hpp>

#include "helpers.h"
#include "nn/optim.h"
#include "nn/precision.h"
#include "tensor/cpu/onednn_gemm.h"

using namespace phasor;
using namespace phasor::test;

namespace {

// x rounded to bfloat16 and back: the operand a bfloat16 GEMM multiplies.
Tensor rounded(const Tensor& x) { return ops::to(ops::to(x, DType::BFloat16), DType::Float32); }

// max |got - want| / (max|a| max|b| k): a product's error against the scale of its terms.
double product_error(const Tensor& got, const Tensor& want, const Tensor& a, const Tensor& b, int64_t k) {
  return max_abs_diff(got, want) / (max_abs(a) * max_abs(b) * static_cast<double>(k));
}

// Runs f once with each GEMM library forced (the oneDNN kernels, and the
// float32 fallback a CPU without them takes), then lets the policy decide again.
template <class F>
void for_each_library(F&& f) {
  for (auto lib : {cpu::GemmLibrary::OpenBLAS, cpu::GemmLibrary::OneDNN}) {
    if (lib == cpu::GemmLibrary::OneDNN && !cpu::onednn_available()) continue;
    cpu::set_gemm_library(lib);
    CAPTURE(static_cast<int>(lib));
    f();
  }
  cpu::set_gemm_library(std::nullopt);
}

}  // namespace

TEST_CASE("bfloat16 products accumulate in float32 in every layout") {
  Generator gen(3);
  const int64_t m = 37, k = 70, n = 29;
  const Tensor a = randn({2, m, k}, DType::Float32, &gen), b = randn({k, n}, DType::Float32, &gen);
  const Tensor bt = randn({n, k}, DType::Float32, &gen);
  const Tensor a16 = ops::to(a, DType::BFloat16), b16 = ops::to(b, DType::BFloat16), bt16 = ops::to(bt, DType::BFloat16);
  // The reference: the same rounded operands, multiplied in float64.
  auto reference = [](const Tensor& x, const Tensor& y, MatOp op) {
    return ops::to(ops::matmul(ops::to(rounded(x), DType::Float64), ops::to(rounded(y), DType::Float64), MatOp::None, op), DType::Float32);
  };
  for_each_library([&] {
    const Tensor c = ops::matmul(a16, b16, MatOp::None, MatOp::None, DType::Float32);
    CHECK(c.dtype() == DType::Float32);
    CHECK(c.shape() == Dims{2, m, n});
    // Products of bfloat16 values are exact in float32: only the float32 sums round.
    CHECK(product_error(c, reference(a, b, MatOp::None), a, b, k) < 1e-6);
    const Tensor ct = ops::matmul(a16, bt16, MatOp::None, MatOp::Transpose, DType::Float32);
    CHECK(product_error(ct, reference(a, bt, MatOp::Transpose), a, bt, k) < 1e-6);
    // Strided operands: the first k - 6 columns of a (rows k apart) and rows of b.
    const Tensor cs = ops::matmul(ops::narrow(a16, 2, 0, k - 6), ops::narrow(b16, 0, 0, k - 6), MatOp::None, MatOp::None, DType::Float32);
    CHECK(product_error(cs, reference(ops::narrow(a, 2, 0, k - 6), ops::narrow(b, 0, 0, k - 6), MatOp::None), a, b, k) < 1e-6);
    // A bfloat16 result is the float32 one rounded.
    const Tensor c16 = ops::matmul(a16, b16);
    CHECK(c16.dtype() == DType::BFloat16);
    CHECK(max_abs_diff(ops::to(c16, DType::Float32), rounded(c)) <= 0.0);
  });
}

TEST_CASE("a bfloat16 product's float32 result is the only widening allowed") {
  Generator gen(4);
  const Tensor a = randn({3, 4}, DType::Float32, &gen), b = randn({4, 5}, DType::Float32, &gen);
  CHECK(contains(expect_error([&] { ops::matmul(a, b, MatOp::None, MatOp::None, DType::Float64); }), "not float64"));
  CHECK(contains(expect_error([&] { ops::matmul(ops::to(a, DType::BFloat16), ops::to(b, DType::BFloat16), MatOp::None, MatOp::None, DType::Float64); }),
                 "bfloat16 or float32"));
}

TEST_CASE("matmul_in: bfloat16 operands forward and backward, float32 results and gradients") {
  Generator gen(5);
  const int64_t m = 24, k = 40, n = 33;
  Tensor x = randn({2, m, k}, DType::Float32, &gen), w = randn({n, k}, DType::Float32, &gen);
  const Tensor g = randn({2, m, n}, DType::Float32, &gen);
  x.requires_grad_();
  w.requires_grad_();
  for_each_library([&] {
    x.zero_grad();
    w.zero_grad();
    const Tensor y = matmul_in(DType::BFloat16, x, w, MatOp::Transpose);
    CHECK(y.dtype() == DType::Float32);
    // Forward: the rounded operands' product, and within bfloat16's rounding of the float32 one.
    const Tensor want = ops::matmul(rounded(x), rounded(w), MatOp::None, MatOp::Transpose);
    CHECK(product_error(y, want, x, w, k) < 1e-6);
    const Tensor exact = ops::matmul(x, w, MatOp::None, MatOp::Transpose);
    CHECK(max_abs_diff(y, exact) / max_abs(exact) < 2e-2);
    // Backward: the rounded gradient times the rounded operands.
    sum(y * g).backward();
    REQUIRE(x.grad().defined());
    REQUIRE(w.grad().defined());
    CHECK(x.grad().dtype() == DType::Float32);
    CHECK(w.grad().dtype() == DType::Float32);
    const Tensor dx = ops::matmul(rounded(g), rounded(w));
    const Tensor dw = ops::matmul(ops::reshape(rounded(g), {2 * m, n}), ops::reshape(rounded(x), {2 * m, k}), MatOp::Transpose, MatOp::None);
    CHECK(product_error(x.grad(), dx, g, w, n) < 1e-6);
    CHECK(product_error(w.grad(), dw, g, x, 2 * m) < 1e-6);
  });
  // A weight stored [K, N] (op None) takes the other gradient formula.
  Tensor w2 = randn({k, n}, DType::Float32, &gen);
  w2.requires_grad_();
  sum(matmul_in(DType::BFloat16, x, w2) * g).backward();
  const Tensor dw2 = ops::matmul(ops::reshape(rounded(x), {2 * m, k}), ops::reshape(rounded(g), {2 * m, n}), MatOp::Transpose, MatOp::None);
  CHECK(product_error(w2.grad(), dw2, g, x, 2 * m) < 1e-6);
}

TEST_CASE("matmul_in refuses second order") {
  Generator gen(6);
  Tensor x = randn({4, 8}, DType::Float32, &gen), w = randn({3, 8}, DType::Float32, &gen);
  x.requires_grad_();
  const Tensor y = sum(matmul_in(DType::BFloat16, x, w, MatOp::Transpose));
  CHECK(contains(expect_error([&] { grad({y}, {x}, {}, /*create_graph=*/true); }), "second order"));
}

TEST_CASE("the policy: weight GEMMs and attention's inputs in bfloat16, everything else float32, scoped per thread") {
  using nn::OpClass;
  using nn::Precision;
  CHECK(nn::compute_dtype(Precision::BFloat16, OpClass::WeightGemm) == DType::BFloat16);
  CHECK(nn::compute_dtype(Precision::BFloat16, OpClass::AttentionInputs) == DType::BFloat16);
  CHECK(nn::compute_dtype(Precision::Float32, OpClass::AttentionInputs) == DType::Float32);
  for (OpClass op : {OpClass::Rotation, OpClass::Attention, OpClass::Norm, OpClass::Loss, OpClass::Optimizer})
    CHECK(nn::compute_dtype(Precision::BFloat16, op) == DType::Float32);
  CHECK(nn::compute_dtype(Precision::Float32, OpClass::WeightGemm) == DType::Float32);
  CHECK(nn::current_precision() == Precision::Float32);
  {
    const nn::PrecisionScope outer(Precision::BFloat16);
    CHECK(nn::current_precision() == Precision::BFloat16);
    {
      const nn::PrecisionScope inner(Precision::Float32);
      CHECK(nn::current_precision() == Precision::Float32);
    }
    CHECK(nn::current_precision() == Precision::BFloat16);
  }
  CHECK(nn::current_precision() == Precision::Float32);
  CHECK(nn::parse_precision("bf16") == Precision::BFloat16);
  CHECK(contains(expect_error([] { nn::parse_precision("fp16"); }), "float32 or bf16"));
}

TEST_CASE("a model under bf16: the loss and gradients of float32 within bfloat16's rounding, float32 weights and gradients") {
  for (Position position : {Position::ComplexFormer, Position::Rope, Position::Alibi}) {
    CAPTURE(position_name(position));
    const ModelConfig c = model_config(position, {.d_model = 64, .n_layers = 2, .n_heads = 4, .d_ff = 128, .max_seq_len = 64});
    CausalLM model(c, 11);
    std::vector<int64_t> ids_v, targets_v;
    const std::string text = sample_text(4 * 65);
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t i = 0; i < 64; ++i) {
        ids_v.push_back(static_cast<unsigned char>(text[b * 65 + i]));
        targets_v.push_back(static_cast<unsigned char>(text[b * 65 + i + 1]));
      }
    const Tensor ids = from_vector(ids_v, {4, 64}), targets = from_vector(targets_v, {4, 64});
    auto loss_and_grads = [&](nn::Precision p) {
      const nn::PrecisionScope scope(p);
      for (auto& param : model.parameters()) param.zero_grad();
      const Tensor loss = model.loss(ids, targets);
      loss.backward();
      std::vector<Tensor> grads;
      for (const auto& param : model.parameters()) grads.push_back(ops::clone(param.grad()));
      return std::make_pair(loss.item<double>(), grads);
    };
    const auto [loss32, grads32] = loss_and_grads(nn::Precision::Float32);
    const auto [loss16, grads16] = loss_and_grads(nn::Precision::BFloat16);
    CHECK(loss16 != loss32);  // the bfloat16 path ran
    CHECK(std::abs(loss16 - loss32) / loss32 < 5e-3);
    const auto params = model.named_parameters();
    for (size_t i = 0; i < grads32.size(); ++i) {
      CAPTURE(params[i].first);
      CHECK(grads16[i].dtype() == DType::Float32);
      CHECK(params[i].second.dtype() == DType::Float32);
      // Norm-wise, per tensor: bfloat16 keeps 8 bits, and the errors of many products average out.
      const double rel = norm(grads16[i] - grads32[i]).item<double>() / norm(grads32[i]).item<double>();
      CHECK(rel < 5e-2);
    }
  }
}

TEST_CASE("under bf16 the fused and the materialised attention read the same bfloat16 inputs: the same loss and gradients") {
  // The materialised path (probes, AttentionImpl::Materialized) rounds q, k, v as the fused one
  // stores them; without that rounding the two would differ by bfloat16's error, not float32's.
  for (Position position : {Position::ComplexFormer, Position::Alibi}) {
    CAPTURE(position_name(position));
    const ModelConfig c = model_config(position, {.d_model = 64, .n_layers = 2, .n_heads = 4, .d_ff = 128, .max_seq_len = 80});
    CausalLM fused(c, 5), materialised(c, 5);
    materialised.set_attention(AttentionImpl::Materialized);
    const std::string text = sample_text(2 * 71);
    std::vector<int64_t> ids_v(text.begin(), text.begin() + 140), targets_v(text.begin() + 1, text.begin() + 141);
    for (auto* v : {&ids_v, &targets_v})
      for (auto& t : *v) t = static_cast<unsigned char>(t);
    const Tensor ids = from_vector(ids_v, {2, 70}), targets = from_vector(targets_v, {2, 70});
    const nn::PrecisionScope bf16(nn::Precision::BFloat16);
    const Tensor lf = fused.loss(ids, targets), lm = materialised.loss(ids, targets);
    CHECK(std::abs(lf.item<double>() - lm.item<double>()) / lm.item<double>() < 1e-5);
    lf.backward();
    lm.backward();
    const auto pf = fused.named_parameters(), pm = materialised.named_parameters();
    for (size_t i = 0; i < pf.size(); ++i) {
      CAPTURE(pf[i].first);
      const Tensor gf = pf[i].second.grad(), gm = pm[i].second.grad();
      // The output projection rounds each path's attention output to bfloat16: their float32-level
      // difference flips single roundings there (up to 8e-4 measured), far below bfloat16's own 3e-2.
      CHECK(norm(gf - gm).item<double>() / norm(gm).item<double>() < 2e-3);
    }
  }
}

TEST_CASE("weight_product rounds a weight once while it is unchanged, and again after any write to it") {
  Generator gen(8);
  const Tensor x = randn({64, 64}, DType::Float32, &gen);
  Tensor w = randn({32, 64}, DType::Float32, &gen);  // 2^17 multiply-adds: a bfloat16 product
  const nn::PrecisionScope bf16(nn::Precision::BFloat16);
  const Tensor y1 = nn::weight_product(x, w);
  CHECK(max_abs_diff(nn::weight_product(x, w), y1) == 0.0);
  // Doubling is exact in bfloat16: the product after the write is exactly twice the first.
  {
    NoGradGuard no_grad;
    ops::copy_(w, w * 2.0);
    CHECK(max_abs_diff(nn::weight_product(x, w), y1 * 2.0) == 0.0);
  }
  // AdamW writes the weight in place too (lr 1: every element moves by about 1).
  w.requires_grad_();
  nn::AdamW opt({{{{"w", w}}, 0.0, 1.0}}, nn::AdamWOptions{1.0, 0.9, 0.95, 1e-8});
  sum(nn::weight_product(x, w)).backward();
  const Tensor before = nn::weight_product(x, w);
  opt.step();
  const Tensor after = nn::weight_product(x, w);
  const Tensor want = ops::matmul(rounded(x), rounded(w), MatOp::None, MatOp::Transpose);
  CHECK(max_abs_diff(after, before) > 0.1);
  CHECK(product_error(after, want, x, w, 64) < 1e-6);
  // Decoding a token (here 1 x 64 x 32 = 2^11 multiply-adds) stays float32.
  const Tensor row = ops::narrow(x, 0, 0, 1);
  CHECK(max_abs_diff(nn::weight_product(row, w), ops::matmul(row, w, MatOp::None, MatOp::Transpose)) == 0.0);
}

// ------------------------------------------------------- --precision auto

namespace {

// Sets PHASOR_CPU_BF16 (nn::cpu_has_bf16_arithmetic's override) for a scope; nullptr unsets it.
class CpuBf16Override {
 public:
  explicit CpuBf16Override(const char* value) {
    if (const char* old = std::getenv("PHASOR_CPU_BF16")) saved_ = old, had_ = true;
    value ? setenv("PHASOR_CPU_BF16", value, 1) : unsetenv("PHASOR_CPU_BF16");
  }
  ~CpuBf16Override() { had_ ? setenv("PHASOR_CPU_BF16", saved_.c_str(), 1) : unsetenv("PHASOR_CPU_BF16"); }

 private:
  std::string saved_;
  bool had_ = false;
};

}  // namespace

TEST_CASE("--precision auto: bf16 on a GPU or a CPU with bf16 arithmetic, float32 elsewhere; bf16 where it is slower says so") {
  {
    const CpuBf16Override none("0");
    CHECK(!nn::cpu_has_bf16_arithmetic());
    CHECK(nn::resolve_precision("auto", DeviceType::CPU) == nn::Precision::Float32);
    CHECK(nn::resolve_precision("auto", DeviceType::CUDA) == nn::Precision::BFloat16);
    CHECK(nn::resolve_precision("bf16", DeviceType::CPU) == nn::Precision::BFloat16);  // as asked
    CHECK(nn::describe_precision("auto", DeviceType::CPU) == "float32 (auto: this CPU has no bf16 arithmetic, AVX512-BF16 or AMX)");
    CHECK(contains(nn::describe_precision("bf16", DeviceType::CPU), "bf16 (slower than float32 here"));
    CHECK(nn::describe_precision("bf16", DeviceType::CUDA) == "bf16");
    CHECK(nn::describe_precision("float32", DeviceType::CPU) == "float32");
  }
  {
    const CpuBf16Override some("1");
    CHECK(nn::cpu_has_bf16_arithmetic());
    CHECK(nn::resolve_precision("auto", DeviceType::CPU) == nn::Precision::BFloat16);
    CHECK(nn::describe_precision("auto", DeviceType::CPU) == "bf16 (auto: this CPU has bf16 arithmetic, AVX512-BF16 or AMX)");
    CHECK(nn::describe_precision("bf16", DeviceType::CPU) == "bf16");
  }
  {
    const CpuBf16Override bad("yes");
    CHECK(contains(error_of([] { nn::cpu_has_bf16_arithmetic(); }), "PHASOR_CPU_BF16 must be 0 or 1"));
  }
  CHECK(contains(error_of([] { nn::resolve_precision("fp16", DeviceType::CPU); }), "expected float32, bf16 or auto"));
}

TEST_CASE("train --precision auto and bf16: the opening line says which and why, the config records it") {
  const fs::path root = fresh_folder(scratch_root("precision_auto", /*remove_at_exit=*/true));
  const fs::path data = write_bytes(root / "data.txt", sample_text(4096));
  const auto train = [&](const std::string& cpu_bf16, const std::string& precision, const std::string& name) {
    const std::string args = " train --d-model 32 --n-layers 1 --n-heads 2 --d-ff 64 --seq-len 32 --batch 4 --threads 1 --steps 2 --data " +
                             quote(data) + " --run-dir " + quote(root / name) + " --precision " + precision;
    const Cli r = run_shell("PHASOR_CPU_BF16=" + cpu_bf16 + " " + phasor_command() + args, root);
    REQUIRE_MESSAGE(r.status == 0, r.err);
    const nlohmann::json config = nlohmann::json::parse(read_bytes(root / name / "config.json"));
    return std::make_pair(r.err.substr(0, r.err.find('\n')), config.value("precision", std::string("float32 (absent)")));
  };
  const auto picked_bf16 = train("1", "auto", "auto_bf16");
  CHECK_MESSAGE(contains(picked_bf16.first, ", bf16 (auto: this CPU has bf16 arithmetic"), picked_bf16.first);
  CHECK(picked_bf16.second == "bf16");
  const auto picked_f32 = train("0", "auto", "auto_f32");
  CHECK_MESSAGE(contains(picked_f32.first, ", float32 (auto: this CPU has no bf16 arithmetic"), picked_f32.first);
  CHECK(picked_f32.second == "float32");
  const auto slower = train("0", "bf16", "bf16_slow");
  CHECK_MESSAGE(contains(slower.first, ", bf16 (slower than float32 here"), slower.first);
  CHECK(slower.second == "bf16");
  const auto pays = train("1", "bf16", "bf16_pays");
  CHECK_MESSAGE(contains(pays.first, ", bf16; run folder"), pays.first);
  CHECK(!contains(pays.first, "slower"));
}
