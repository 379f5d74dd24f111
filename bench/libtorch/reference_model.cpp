#include "bench/libtorch/reference_model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <string_view>

#include "bench/libtorch/positions.h"
#include "tensor/error.h"

namespace phasor::torch_ref {

namespace {
bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

Model::Model(const ModelConfig& config, uint64_t seed) : config_(config) {
  config_.validate();
  const int64_t D = config_.d_model;
  tok_emb = register_module("tok_emb", torch::nn::Embedding(config_.vocab_size, D));
  if (config_.variant().embedding == PositionEmbedding::Learned)
    pos_emb = register_module("pos_emb", torch::nn::Embedding(config_.max_seq_len, D));
  auto layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    blocks.push_back(Block(config_));
    layers->push_back(blocks.back());
  }
  norm = register_module("norm", RMSNorm(D, config_.norm_eps));
  if (!config_.tie_embeddings)
    lm_head = register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(D, config_.vocab_size).bias(false)));
  initialize(seed);
}

torch::Device Model::device() const { return tok_emb->weight.device(); }

bool is_no_decay(const std::string& name) {
  return ends_with(name, ".delta") || ends_with(name, ".phase_bias") || ends_with(name, ".beta") || ends_with(name, ".pope_bias") ||
         ends_with(name, ".alpha") || ends_with(name, ".rel_bias") || ends_with(name, "norm.weight");
}

void Model::initialize(uint64_t seed) {
  torch::NoGradGuard no_grad;
  // A private CPU generator: independent of the global seed and of the device.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto normal = [&](torch::Tensor& p, double std) {
    p.copy_(torch::empty(p.sizes(), torch::kFloat32).normal_(0.0, std, gen));
  };
  const bool paper = config_.cmha_init == CmhaInit::Paper;
  const double delta_std = 1.0 / std::sqrt(static_cast<double>(config_.pairs()));
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    auto& p = item.value();
    if (ends_with(name, "norm.weight") || ends_with(name, ".beta") || ends_with(name, ".alpha")) {
      p.fill_(1.0);
    } else if (ends_with(name, ".phase_bias") || ends_with(name, ".pope_bias") || ends_with(name, ".rel_bias")) {
      p.fill_(0.0);
    } else if (ends_with(name, ".delta")) {
      if (paper) normal(p, delta_std);
      else p.fill_(1.0);
    } else {
      normal(p, 0.02);
    }
  }
}

torch::Tensor Model::forward(const torch::Tensor& tokens, int64_t pos_offset) {
  PHASOR_CHECK(tokens.dim() == 2 && tokens.scalar_type() == torch::kLong,
               "torch_ref::Model::forward: tokens must be [B, N] int64, got ", tokens.sizes(), " ", tokens.scalar_type());
  const int64_t N = tokens.size(1);
  PHASOR_CHECK(tokens.size(0) > 0 && N > 0, "torch_ref::Model::forward: empty batch ", tokens.sizes());
  const int64_t lo = tokens.min().item<int64_t>(), hi = tokens.max().item<int64_t>();
  PHASOR_CHECK(lo >= 0 && hi < config_.vocab_size, "torch_ref::Model::forward: token ", lo < 0 ? lo : hi,
               " outside the vocabulary [0, ", config_.vocab_size, ")");
  PHASOR_CHECK(pos_offset >= 0, "torch_ref::Model::forward: negative position offset ", pos_offset);

  auto x = tok_emb(tokens);
  const PositionEmbedding embedding = config_.variant().embedding;
  if (embedding == PositionEmbedding::Sinusoidal) {
    x = x + sinusoidal_table(N, pos_offset, config_.d_model, x.device()).to(x.scalar_type());
  } else if (embedding == PositionEmbedding::Learned) {
    PHASOR_CHECK(pos_offset + N <= config_.max_seq_len, "torch_ref::Model::forward: positions up to ", pos_offset + N,
                 " exceed max_seq_len ", config_.max_seq_len, " of the learned position table");
    x = x + pos_emb(torch::arange(pos_offset, pos_offset + N, tokens.options()));
  }
  for (auto& block : blocks) x = block(x, pos_offset);
  x = norm(x);
  return config_.tie_embeddings ? torch::nn::functional::linear(x, tok_emb->weight) : lm_head(x);
}

torch::Tensor Model::loss(const torch::Tensor& tokens, const torch::Tensor& targets) {
  PHASOR_CHECK(targets.sizes() == tokens.sizes(), "torch_ref::Model::loss: targets ", targets.sizes(),
               " do not match tokens ", tokens.sizes());
  const int64_t lo = targets.min().item<int64_t>(), hi = targets.max().item<int64_t>();
  PHASOR_CHECK(lo >= 0 && hi < config_.vocab_size, "torch_ref::Model::loss: target ", lo < 0 ? lo : hi,
               " outside the vocabulary [0, ", config_.vocab_size, ")");
  auto logits = forward(tokens);
  return torch::nn::functional::cross_entropy(logits.reshape({-1, config_.vocab_size}), targets.reshape({-1}));
}

}  // namespace phasor::torch_ref
