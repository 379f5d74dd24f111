// compare_phasor: Phasor's side of bench/compare_libtorch (see compare_common.h
// for the workloads). Prints one JSON line.
#include <omp.h>

#include "bench/compare_common.h"
#include "bench/fma_peak.h"
#include "tensor/startup.h"
#include "models/transformer.h"
#include "nn/optim.h"
#include "nn/precision.h"
#include "phasor.h"

using namespace phasor;
namespace C = phasor::compare;

namespace {

ModelConfig config_of(const C::Options& o) {
  ModelConfig c;
  c.position = parse_position(o.position);
  c.cmha_init = parse_cmha_init(o.cmha_init);
  c.d_model = o.d_model;
  c.n_layers = o.n_layers;
  c.n_heads = o.n_heads;
  c.d_ff = o.d_ff;
  c.max_seq_len = std::max(o.seq_len, o.prompt + o.new_tokens);
  return c;
}

Tensor random_tokens(int64_t b, int64_t n, Generator& gen) {
  const auto r = uniform({b * n}, 0.0, 256.0, DType::Float64, &gen).to_vector<double>();
  std::vector<int64_t> ids;
  for (double x : r) ids.push_back(std::min<int64_t>(255, static_cast<int64_t>(x)));
  return from_vector(ids, {b, n});
}

int64_t greedy(const Tensor& logits) {  // logits [1, n, V]: argmax of the last position
  return ops::argmax(logits.select(0, 0).select(0, -1), 0).item<int64_t>();
}

}  // namespace

int main(int argc, char** argv) {
  phasor::use_best_openblas_core(argv);  // both sides on the same GEMM kernels
  C::Options o;
  int code = 0;
  if (!C::parse(argc, argv, "compare_phasor", o, &code)) return code;
  try {
    omp_set_num_threads(o.threads);  // Phasor's GEMMs split over these threads, OpenBLAS single-threaded inside them
    const double base_rss = C::proc_status_mib("VmRSS");
    Generator gen(o.seed + 1);
    C::Timings ms;
    nlohmann::json extra = nlohmann::json::object();

    if (o.workload == "fma-peak") {
      bench::FmaPeakRun run;
      ms = C::time_runs(o, [&] { run = bench::fma_peak(o.threads, C::kFmaPeakIters); });
      extra["flops_per_rep"] = run.flops;
      extra["isa"] = run.isa;
      extra["nominal_gflops_per_s"] = bench::nominal_peak_gflops(o.threads);
      extra["checksum"] = run.checksum;
    } else if (o.workload == "sgemm") {
      const Tensor a = normal({C::kSgemmSize, C::kSgemmSize}, 0.0, 1.0, DType::Float32, &gen);
      const Tensor b = normal({C::kSgemmSize, C::kSgemmSize}, 0.0, 1.0, DType::Float32, &gen);
      ms = C::time_runs(o, [&] { ops::matmul(a, b); });
    } else if (o.workload == "rotation") {
      const int64_t b = o.batch, n = o.seq_len, h = o.n_heads, d = o.d_model / o.n_heads, p = d / 2;
      Tensor x = normal({b, n, h, d}, 0.0, 1.0, DType::Float32, &gen);
      x.requires_grad_();
      const Tensor g = normal({b, n, h, d}, 0.0, 1.0, DType::Float32, &gen);  // dL/d(output)
      Tensor delta = normal({h, p}, 1.0, 0.1, DType::Float32, &gen), phase_bias = normal({h, p}, 0.0, 0.1, DType::Float32, &gen),
             beta = ones({h});
      for (Tensor* t : {&delta, &phase_bias, &beta}) t->requires_grad_();
      ms = C::time_runs(o, [&] {
        for (Tensor* t : {&x, &delta, &phase_bias, &beta}) t->zero_grad();
        const Tensor z = view_as_complex(reshape(x, {b, n, h, p, 2}));
        // As in the model: the rope table is built per call, the CMHA angles inside the fused op.
        const Tensor r = parse_position(o.position) == Position::ComplexFormer
                             ? cmha_rotate(z, delta, phase_bias, beta, 0, 10000.0)
                             : rotate(z, ops::rotary_table(n, p, 0, 10000.0, 0.0, +1, DType::Complex64));
        sum(reshape(view_as_real(r), {b, n, h, d}) * g).backward();
      });
    } else if (o.workload == "qk") {
      const ModelConfig config = config_of(o);
      const Attention attn(config, &gen);
      Tensor x = normal({o.batch, o.seq_len, config.d_model}, 0.0, 1.0, DType::Float32, &gen);
      x.requires_grad_();
      const Tensor g = normal({o.batch, o.seq_len, config.n_heads, config.query_key_width()}, 0.0, 1.0, DType::Float32, &gen);
      ms = C::time_runs(o, [&] {
        x.zero_grad();
        attn.zero_grad();
        const auto qk = attn.rotated_qk(x, 0, 0, nullptr);
        (sum(qk.first * g) + sum(qk.second * g)).backward();
      });
    } else {
      const CausalLM model(config_of(o), o.seed);
      const nn::PrecisionScope precision(nn::parse_precision(o.precision));
      if (o.workload == "train") {
        nn::AdamW opt({{model.decayed_parameters(), o.weight_decay, 1.0}, {model.undecayed_parameters(), 0.0, 1.0}},
                      nn::AdamWOptions{o.lr, 0.9, 0.95, 1e-8});
        const Tensor windows = random_tokens(o.batch, o.seq_len + 1, gen);
        const Tensor inputs = ops::contiguous(ops::narrow(windows, 1, 0, o.seq_len));
        const Tensor targets = ops::contiguous(ops::narrow(windows, 1, 1, o.seq_len));
        double loss = 0;
        ms = C::time_runs(o, [&] {
          opt.zero_grad();
          const Tensor l = model.loss(inputs, targets);
          l.backward();
          opt.step();
          loss = l.item<double>();
        });
        extra["last_loss"] = loss;
      } else if (o.workload == "eval") {
        const Tensor windows = random_tokens(o.batch, o.seq_len + 1, gen);
        const Tensor inputs = ops::contiguous(ops::narrow(windows, 1, 0, o.seq_len));
        const Tensor targets = ops::contiguous(ops::narrow(windows, 1, 1, o.seq_len));
        double loss = 0;
        ms = C::time_runs(o, [&] {
          NoGradGuard no_grad;
          loss = model.loss(inputs, targets).item<double>();
        });
        extra["last_loss"] = loss;
      } else {  // generate: greedy decoding with the KV cache, prefill untimed
        const Tensor prompt = random_tokens(1, o.prompt, gen);
        std::vector<int64_t> out;
        ms = C::time_self_timed_runs(o, [&] {
          NoGradGuard no_grad;
          KVCache cache = model.make_cache(1, o.prompt + o.new_tokens);
          Tensor logits = model.forward(prompt, &cache);
          out.clear();
          const C::Stamp t0;
          for (int64_t i = 0; i < o.new_tokens; ++i) {
            const int64_t next = greedy(logits);
            out.push_back(next);
            logits = model.forward(from_vector(std::vector<int64_t>{next}, {1, 1}), &cache);
          }
          return C::since(t0);
        });
        extra["kv_cache"] = true;
        extra["first_tokens"] = std::vector<int64_t>(out.begin(), out.begin() + std::min<size_t>(8, out.size()));
      }
    }
    // The most bytes live tensors held at once: the workload's need, which the
    // process's peak RSS exceeds by what the heap keeps of freed blocks.
    extra["peak_tensor_mib"] = static_cast<double>(memory_stats(DeviceType::CPU).peak) / (1 << 20);
    C::emit("phasor", o, ms, base_rss, extra);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare_phasor: %s\n", e.what());
    return 1;
  }
}
