// compare_torch: the LibTorch side of bench/compare_libtorch (see
// compare_common.h for the workloads), on the reference model of
// bench/libtorch. Prints one JSON line.
//
// The reference model has no KV cache, so `generate` runs a simple one written
// here from the reference's own modules and position helpers: per layer,
// rotated keys and values are kept in preallocated [B, H, capacity, d]
// tensors, and each new token only computes its own query, key and value. At
// the end the last cached logits are checked against a full forward pass of the
// whole sequence ("cache_check_max_abs_diff" in the JSON line).
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <cblas.h>

#include <cmath>
#include <limits>

#include "bench/compare_common.h"
#include "bench/libtorch/positions.h"
#include "bench/libtorch/reference_model.h"
#include "tensor/startup.h"

namespace C = phasor::compare;
namespace T = phasor::torch_ref;
using phasor::ModelConfig;
using phasor::Position;
using phasor::PositionEmbedding;

namespace {

ModelConfig config_of(const C::Options& o) {
  ModelConfig c;
  c.position = phasor::parse_position(o.position);
  c.cmha_init = phasor::parse_cmha_init(o.cmha_init);
  c.d_model = o.d_model;
  c.n_layers = o.n_layers;
  c.n_heads = o.n_heads;
  c.d_ff = o.d_ff;
  c.max_seq_len = std::max(o.seq_len, o.prompt + o.new_tokens);
  return c;
}

// AdamW groups by Phasor's rule (CausalLM::decayed_parameters): 2-d weights
// decay; norms, delta, phase_bias and beta do not.
torch::optim::AdamW make_optimizer(T::Model& model, const C::Options& o) {
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& item : model.named_parameters()) {
    const bool no = item.value().dim() < 2 || T::is_no_decay(item.key());
    (no ? no_decay : decay).push_back(item.value());
  }
  const auto options = torch::optim::AdamWOptions(o.lr).betas({0.9, 0.95}).eps(1e-8);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(options).weight_decay(o.weight_decay)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(options).weight_decay(0.0)));
  return torch::optim::AdamW(std::move(groups), options);
}

// ------------------------------------------------------------ rotations

// The reference's rotations (layers.cpp, AttentionImpl::rotated_qk) on a
// [B, N, H, d] tensor at positions offset.., giving [B, N, H, d] again.
torch::Tensor rotate_rope(const torch::Tensor& u, int64_t offset, double base) {
  const int64_t B = u.size(0), N = u.size(1), H = u.size(2), d = u.size(3);
  auto angles = T::rotary_angles(N, offset, d, base, u.device());
  auto rot = torch::polar(torch::ones_like(angles), angles).to(torch::kComplexFloat).unsqueeze(1);  // [N, 1, P]
  auto z = torch::view_as_complex(u.view({B, N, H, d / 2, 2}));
  return torch::view_as_real(z * rot).reshape({B, N, H, d});
}

torch::Tensor rotate_cmha(const torch::Tensor& u, const torch::Tensor& delta, const torch::Tensor* phase_bias,
                          const torch::Tensor& beta, int64_t offset, double base) {
  const int64_t B = u.size(0), N = u.size(1), H = u.size(2), d = u.size(3);
  auto position_angle = beta.view({H, 1}) * T::rotary_angles(N, offset, d, base, u.device()).to(u.scalar_type()).unsqueeze(1);
  auto z = torch::view_as_complex(u.view({B, N, H, d / 2, 2}));
  auto re = torch::real(z), im = torch::imag(z);
  auto r = torch::sqrt(re * re + im * im + T::kEulerEps);
  auto theta = delta * T::euler_phase(re, im) + position_angle;
  if (phase_bias) theta = theta + *phase_bias;
  return torch::view_as_real(torch::polar(r, theta)).reshape({B, N, H, d});
}

// ------------------------------------------------------------ KV-cached forward

struct Cache {
  std::vector<torch::Tensor> keys, values;  // [B, H, capacity, d]
  int64_t length = 0;
};

Cache make_cache(const T::Model& m, int64_t batch, int64_t capacity) {
  const auto& c = m.config();
  Cache cache;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    cache.keys.push_back(torch::zeros({batch, c.n_heads, capacity, c.head_dim()}));
    cache.values.push_back(torch::zeros({batch, c.n_heads, capacity, c.head_dim()}));
  }
  return cache;
}

torch::Tensor cached_attention(T::AttentionImpl& a, const torch::Tensor& x, Cache& cache, int64_t l) {
  const auto& c = a.config;
  const int64_t B = x.size(0), N = x.size(1), H = c.n_heads, d = c.head_dim(), offset = cache.length;
  TORCH_CHECK(offset + N <= cache.keys[l].size(2), "KV cache capacity exceeded");
  auto q = a.wq(x).view({B, N, H, d}), k = a.wk(x).view({B, N, H, d});
  if (c.position == Position::Rope) {
    q = rotate_rope(q, offset, c.rope_base);
    k = rotate_rope(k, offset, c.rope_base);
  } else if (c.position == Position::ComplexFormer) {
    // The scheme's parameters in models/positions.h's order: delta, phase_bias, beta.
    const auto &delta = a.position_parameters.at(0), &phase_bias = a.position_parameters.at(1), &beta = a.position_parameters.at(2);
    q = rotate_cmha(q, delta, &phase_bias, beta, offset, c.rope_base);
    k = rotate_cmha(k, delta, nullptr, beta, offset, c.rope_base);
  } else {
    TORCH_CHECK(!c.is_rotary(), "compare_torch generate: no cached path for position ", c.position);
  }
  auto v = a.wv(x).view({B, N, H, d});
  cache.keys[l].narrow(2, offset, N).copy_(k.transpose(1, 2));
  cache.values[l].narrow(2, offset, N).copy_(v.transpose(1, 2));
  auto K = cache.keys[l].narrow(2, 0, offset + N), V = cache.values[l].narrow(2, 0, offset + N);
  auto s = torch::matmul(q.transpose(1, 2), K.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));  // [B, H, N, offset+N]
  auto m = T::positions(N, offset, x.device()), n = T::positions(offset + N, 0, x.device());
  if (c.variant().alibi_bias) s = s - (a.alibi_slopes.view({-1, 1, 1}) * (m.unsqueeze(1) - n.unsqueeze(0))).to(s.scalar_type());
  if (N > 1) s = s.masked_fill(n.unsqueeze(0) > m.unsqueeze(1), -std::numeric_limits<float>::infinity());
  auto o = torch::matmul(torch::softmax(s, -1), V);  // [B, H, N, d]
  return a.wo(o.transpose(1, 2).reshape({B, N, c.d_model}));
}

torch::Tensor cached_forward(T::Model& m, const torch::Tensor& tokens, Cache& cache) {
  const auto& c = m.config();
  const int64_t N = tokens.size(1), offset = cache.length;
  auto x = m.tok_emb(tokens);
  const PositionEmbedding embedding = c.variant().embedding;
  if (embedding == PositionEmbedding::Sinusoidal) x = x + T::sinusoidal_table(N, offset, c.d_model, x.device()).to(x.scalar_type());
  if (embedding == PositionEmbedding::Learned) x = x + m.pos_emb(torch::arange(offset, offset + N, tokens.options()));
  for (size_t l = 0; l < m.blocks.size(); ++l) {
    auto& block = m.blocks[l];
    x = x + cached_attention(*block->attn, block->attn_norm(x), cache, static_cast<int64_t>(l));
    x = x + block->ffn(block->ffn_norm(x));
  }
  cache.length += N;
  x = m.norm(x);
  return c.tie_embeddings ? torch::nn::functional::linear(x, m.tok_emb->weight) : m.lm_head(x);
}

// LibTorch's CPU autocast to bfloat16 around a forward pass, as torch.autocast("cpu")
// does: its cache of cast weights is dropped when the outermost scope ends, so
// the next step casts the updated weights. Backward runs outside, as PyTorch advises.
class Autocast {
 public:
  explicit Autocast(bool on) : on_(on) {
    if (!on_) return;
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~Autocast() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_cpu_enabled(false);
  }
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  bool on_;
};

int64_t greedy(const torch::Tensor& logits) { return logits.select(0, 0).select(0, -1).argmax().item<int64_t>(); }

}  // namespace

int main(int argc, char** argv) {
  phasor::use_best_openblas_core(argv);  // both sides on the same GEMM kernels
  C::Options o;
  int code = 0;
  if (!C::parse(argc, argv, "compare_torch", o, &code)) return code;
  try {
    torch::set_num_threads(o.threads);
    openblas_set_num_threads(o.blas_threads);
    const double base_rss = C::proc_status_mib("VmRSS");
    torch::manual_seed(o.seed + 1);
    C::Timings ms;
    nlohmann::json extra = nlohmann::json::object();

    if (o.workload == "fma-peak") {
      std::fprintf(stderr, "compare_torch: fma-peak is the CPU's, not a library's: compare_phasor measures it\n");
      return 2;
    }
    if (o.workload == "sgemm") {
      const auto a = torch::randn({C::kSgemmSize, C::kSgemmSize}), b = torch::randn({C::kSgemmSize, C::kSgemmSize});
      ms = C::time_runs(o, [&] { torch::mm(a, b); });
    } else if (o.workload == "rotation") {
      const int64_t b = o.batch, n = o.seq_len, h = o.n_heads, d = o.d_model / o.n_heads, p = d / 2;
      auto x = torch::randn({b, n, h, d}).requires_grad_();
      const auto g = torch::randn({b, n, h, d});
      auto delta = (1.0 + 0.1 * torch::randn({h, p})).requires_grad_();
      auto phase_bias = (0.1 * torch::randn({h, p})).requires_grad_();
      auto beta = torch::ones({h}).requires_grad_();
      ms = C::time_runs(o, [&] {
        for (auto* t : {&x, &delta, &phase_bias, &beta})
          if (t->grad().defined()) t->mutable_grad().zero_();
        auto r = phasor::parse_position(o.position) == Position::ComplexFormer ? rotate_cmha(x, delta, &phase_bias, beta, 0, 10000.0)
                                                                               : rotate_rope(x, 0, 10000.0);
        (r * g).sum().backward();
      });
    } else if (o.workload == "qk") {
      T::Attention attn(config_of(o));
      const auto x = torch::randn({o.batch, o.seq_len, o.d_model}).requires_grad_();
      const auto& c = attn->config;
      const auto g = torch::randn({o.batch, c.n_heads, o.seq_len, c.query_key_width()});
      ms = C::time_runs(o, [&] {
        attn->zero_grad();
        if (x.grad().defined()) x.mutable_grad().zero_();
        const auto qk = attn->rotated_qk(x, 0);
        ((qk.first * g).sum() + (qk.second * g).sum()).backward();
      });
    } else {
      T::Model model(config_of(o), o.seed);
      const bool bf16 = o.precision == "bf16";
      if (o.workload == "train") {
        auto opt = make_optimizer(model, o);
        auto windows = torch::randint(0, 256, {o.batch, o.seq_len + 1}, torch::kLong);
        auto inputs = windows.narrow(1, 0, o.seq_len).contiguous(), targets = windows.narrow(1, 1, o.seq_len).contiguous();
        double loss = 0;
        ms = C::time_runs(o, [&] {
          opt.zero_grad();
          torch::Tensor l;
          {
            const Autocast autocast(bf16);
            l = model.loss(inputs, targets);
          }
          l.backward();
          opt.step();
          loss = l.item<double>();
        });
        extra["last_loss"] = loss;
      } else if (o.workload == "eval") {
        auto windows = torch::randint(0, 256, {o.batch, o.seq_len + 1}, torch::kLong);
        auto inputs = windows.narrow(1, 0, o.seq_len).contiguous(), targets = windows.narrow(1, 1, o.seq_len).contiguous();
        double loss = 0;
        ms = C::time_runs(o, [&] {
          torch::NoGradGuard no_grad;
          const Autocast autocast(bf16);
          loss = model.loss(inputs, targets).item<double>();
        });
        extra["last_loss"] = loss;
      } else {  // generate
        torch::NoGradGuard no_grad;
        const auto prompt = torch::randint(0, 256, {1, o.prompt}, torch::kLong);
        std::vector<int64_t> out;
        torch::Tensor last_logits;
        ms = C::time_self_timed_runs(o, [&] {
          const Autocast autocast(bf16);
          Cache cache = make_cache(model, 1, o.prompt + o.new_tokens);
          auto logits = cached_forward(model, prompt, cache);
          out.clear();
          const C::Stamp t0;
          for (int64_t i = 0; i < o.new_tokens; ++i) {
            const int64_t next = greedy(logits);
            out.push_back(next);
            logits = cached_forward(model, torch::tensor({next}, torch::kLong).view({1, 1}), cache);
          }
          const C::Span t = C::since(t0);
          last_logits = logits;
          return t;
        });
        // The cache must reproduce a full forward pass over prompt + generated tokens.
        auto full = torch::cat({prompt, torch::tensor(out, torch::kLong).view({1, -1})}, 1);
        auto reference = model.forward(full).select(1, -1);
        extra["kv_cache"] = true;
        extra["cache_check_max_abs_diff"] = (reference - last_logits.select(1, -1)).abs().max().item<double>();
        extra["first_tokens"] = std::vector<int64_t>(out.begin(), out.begin() + std::min<size_t>(8, out.size()));
      }
    }
    C::emit("libtorch", o, ms, base_rss, extra);
    return 0;
  } catch (const c10::Error& e) {
    const std::string m = e.what_without_backtrace();
    std::fprintf(stderr, "compare_torch: %s\n", m.substr(0, m.find('\n')).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare_torch: %s\n", e.what());
    return 1;
  }
}
