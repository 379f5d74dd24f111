#include "models/transformer.h"

#include <algorithm>
#include <cmath>

#include "autograd/functions.h"
#include "autograd/fused.h"
#include "autograd/grad_mode.h"

namespace phasor {

std::vector<double> alibi_slopes(int64_t n_heads) {
  auto series = [](int64_t n) {  // 2^(-8 (h+1) / n), h = 0..n-1
    std::vector<double> s;
    for (int64_t h = 0; h < n; ++h) s.push_back(std::pow(2.0, -8.0 * static_cast<double>(h + 1) / static_cast<double>(n)));
    return s;
  };
  int64_t p2 = 1;
  while (p2 * 2 <= n_heads) p2 *= 2;
  std::vector<double> slopes = series(p2);
  if (p2 == n_heads) return slopes;
  const std::vector<double> extra = series(2 * p2);  // every other slope of the 2*P2 series
  for (size_t i = 0; slopes.size() < static_cast<size_t>(n_heads); i += 2) slopes.push_back(extra[i]);
  return slopes;
}

Tensor sinusoidal_positions(int64_t n, int64_t d_model, int64_t offset) {
  std::vector<float> pe(static_cast<size_t>(n * d_model));
  for (int64_t pos = 0; pos < n; ++pos)
    for (int64_t i = 0; 2 * i < d_model; ++i) {
      const double angle = static_cast<double>(pos + offset) / std::pow(10000.0, 2.0 * static_cast<double>(i) / static_cast<double>(d_model));
      pe[pos * d_model + 2 * i] = static_cast<float>(std::sin(angle));
      if (2 * i + 1 < d_model) pe[pos * d_model + 2 * i + 1] = static_cast<float>(std::cos(angle));
    }
  return from_vector(pe, {n, d_model});
}

// ---------------------------------------------------------------- attention

Attention::Attention(const ModelConfig& config, Generator* gen) : config_(config) {
  const int64_t d = config.d_model;
  wq = register_module("wq", std::make_shared<nn::Linear>(d, d, false, DType::Float32, gen));
  wk = register_module("wk", std::make_shared<nn::Linear>(d, d, false, DType::Float32, gen));
  wv = register_module("wv", std::make_shared<nn::Linear>(d, d, false, DType::Float32, gen));
  wo = register_module("wo", std::make_shared<nn::Linear>(d, d, false, DType::Float32, gen));
  if (config.position == Position::ComplexFormer) {
    const int64_t h = config.n_heads, p = config.pairs();
    delta = register_parameter("delta", config.cmha_init == CmhaInit::Paper
                                            ? normal({h, p}, 0.0, 1.0 / std::sqrt(static_cast<double>(p)), DType::Float32, gen)
                                            : ones({h, p}));
    phase_bias = register_parameter("phase_bias", zeros({h, p}));
    beta = register_parameter("beta", ones({h}));
  }
  if (config.variant().alibi_bias) {
    const std::vector<double> s = alibi_slopes(config.n_heads);
    slopes_ = from_vector(std::vector<float>(s.begin(), s.end()));
  }
}

// The readable reference: the spec's formulas, one autograd op at a time.
Tensor Attention::rotate_composed(const Tensor& z, const Tensor& bias, int64_t offset, Tensor* r_out, Tensor* phi_out) const {
  return cmha_rotate_reference(z, delta, bias, beta, offset, config_.rope_base, r_out, phi_out);
}

std::pair<Tensor, Tensor> Attention::rotated_qk(const Tensor& x, int64_t offset, int64_t xpos_origin) const {
  const int64_t b = x.size(0), n = x.size(1), h = config_.n_heads, d = config_.head_dim();
  Tensor q = reshape(wq->forward(x), {b, n, h, d});
  Tensor k = reshape(wk->forward(x), {b, n, h, d});
  if (!config_.is_rotary()) return {q, k};
  // The complex view: pairs (u_2j, u_2j+1) are z_j = u_2j + i u_2j+1, zero-copy.
  const Tensor qc = view_as_complex(reshape(q, {b, n, h, d / 2, 2}));
  const Tensor kc = view_as_complex(reshape(k, {b, n, h, d / 2, 2}));
  Tensor qr, kr;
  if (config_.position == Position::ComplexFormer) {
    if (rotation == RotationImpl::Fused) {
      qr = cmha_rotate(qc, delta, phase_bias, beta, offset, config_.rope_base);
      kr = cmha_rotate(kc, delta, Tensor(), beta, offset, config_.rope_base);
    } else {
      AttentionProbe* p = probe.get();
      qr = rotate_composed(qc, phase_bias, offset, p ? &p->q_r : nullptr, p ? &p->q_phi : nullptr);
      kr = rotate_composed(kc, Tensor(), offset, p ? &p->k_r : nullptr, p ? &p->k_phi : nullptr);
    }
  } else {
    const bool xpos = config_.position == Position::XPos;
    const double scale_base = xpos ? config_.xpos_scale_base : 0.0;
    auto table = [&](int sign) {
      return ops::to_device(ops::rotary_table(n, d / 2, offset, config_.rope_base, scale_base, sign, DType::Complex64, xpos_origin), x.device());
    };
    qr = rotate(qc, table(+1));
    kr = rotate(kc, table(-1));
  }
  if (probe) {  // gradient studies read these tensors' .grad after backward
    probe->q = qc;
    probe->k = kc;
    probe->q_rotated = qr;
    probe->k_rotated = kr;
    const Tensor* kept[] = {&qc, &kc, &qr, &kr, &probe->q_r, &probe->q_phi, &probe->k_r, &probe->k_phi};
    for (const Tensor* t : kept)
      if (t->defined() && t->requires_grad()) t->retain_grad();
  }
  // Back to interleaved real pairs: Re(q' conj(k')) summed over pairs is then a real dot product.
  return {reshape(view_as_real(qr), {b, n, h, d}), reshape(view_as_real(kr), {b, n, h, d})};
}

Tensor Attention::scores(const Tensor& x, int64_t offset) const {
  auto [q, k] = rotated_qk(x, offset, xpos_origin(config_.xpos_scale_base, offset + x.size(1)));
  return matmul(permute(q, {0, 2, 1, 3}), permute(k, {0, 2, 1, 3}), MatOp::None, MatOp::Transpose);
}

Tensor Attention::forward(const Tensor& x, int64_t offset, LayerCache* cache, int64_t xpos_origin) const {
  const int64_t b = x.size(0), n = x.size(1), h = config_.n_heads, d = config_.head_dim();
  auto [q, k] = rotated_qk(x, offset, xpos_origin);
  Tensor v = reshape(wv->forward(x), {b, n, h, d});
  if (cache) {  // generation: append this chunk, attend over everything stored
    PHASOR_CHECK(offset + n <= cache->keys.size(1), "attention: KV cache capacity ", cache->keys.size(1), " exceeded at position ",
                 offset + n);
    ops::copy_(ops::narrow(cache->keys, 1, offset, n), k);
    ops::copy_(ops::narrow(cache->values, 1, offset, n), v);
    k = ops::narrow(cache->keys, 1, 0, offset + n);
    v = ops::narrow(cache->values, 1, 0, offset + n);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const int64_t query_offset = cache ? offset : 0;  // without a cache the keys are this chunk's own
  const Tensor slopes = slopes_.defined() ? ops::to_device(slopes_, x.device()) : Tensor();
  // A probe keeps the probabilities, so it takes the materialised path.
  const bool fused = attention == AttentionImpl::Fused && !probe;
  const Tensor o = fused ? causal_attention(q, k, v, scale, query_offset, slopes)
                         : materialized_attention(q, k, v, scale, query_offset, slopes, probe ? &probe->probs : nullptr);  // [B, N, H, d]
  return wo->forward(reshape(o, {b, n, h * d}));
}

// ---------------------------------------------------------------- blocks and model

Block::Block(const ModelConfig& config, Generator* gen) {
  attn_norm = register_module("attn_norm", std::make_shared<nn::RMSNorm>(config.d_model, config.norm_eps));
  attn = register_module("attn", std::make_shared<Attention>(config, gen));
  ffn_norm = register_module("ffn_norm", std::make_shared<nn::RMSNorm>(config.d_model, config.norm_eps));
  ffn = register_module("ffn", std::make_shared<nn::SwiGLU>(config.d_model, config.d_ff, gen));
}

Tensor Block::forward(const Tensor& x, int64_t offset, LayerCache* cache, int64_t xpos_origin) const {
  const Tensor h = x + attn->forward(attn_norm->forward(x), offset, cache, xpos_origin);
  return h + ffn->forward(ffn_norm->forward(h));
}

CausalLM::CausalLM(const ModelConfig& config, uint64_t seed) : config_(config) {
  config.validate();
  Generator gen(seed);
  tok_emb_ = register_module("tok_emb", std::make_shared<nn::Embedding>(config.vocab_size, config.d_model, &gen));
  if (config.variant().embedding == PositionEmbedding::Learned)
    pos_emb_ = register_module("pos_emb", std::make_shared<nn::Embedding>(config.max_seq_len, config.d_model, &gen));
  for (int64_t l = 0; l < config.n_layers; ++l)
    layers.push_back(register_module("layers." + std::to_string(l), std::make_shared<Block>(config, &gen)));
  norm_ = register_module("norm", std::make_shared<nn::RMSNorm>(config.d_model, config.norm_eps));
  if (!config.tie_embeddings)
    lm_head_ = register_module("lm_head", std::make_shared<nn::Linear>(config.d_model, config.vocab_size, false, DType::Float32, &gen));

  // GPT-2 style initialisation; residual projections scaled down with depth.
  constexpr double kStd = 0.02;
  for (const auto& [name, p] : named_parameters()) {
    const bool residual = name.ends_with("attn.wo.weight") || name.ends_with("ffn.w2.weight");
    if (residual) nn::init_residual_(p, kStd, config.n_layers, &gen);
    else if (p.dim() == 2 && !name.ends_with(".delta") && !name.ends_with(".phase_bias")) nn::init_normal_(p, kStd, &gen);
  }
}

std::map<std::string, Dims> parameter_shapes(const ModelConfig& config) {
  const int64_t V = config.vocab_size, D = config.d_model, F = config.d_ff;
  std::map<std::string, Dims> shapes{{"tok_emb.weight", {V, D}}, {"norm.weight", {D}}};
  if (config.variant().embedding == PositionEmbedding::Learned) shapes["pos_emb.weight"] = {config.max_seq_len, D};
  if (!config.tie_embeddings) shapes["lm_head.weight"] = {V, D};
  for (int64_t l = 0; l < config.n_layers; ++l) {
    const std::string layer = "layers." + std::to_string(l) + ".";
    shapes[layer + "attn_norm.weight"] = {D};
    for (const char* w : {"wq", "wk", "wv", "wo"}) shapes[layer + "attn." + w + ".weight"] = {D, D};
    if (config.position == Position::ComplexFormer) {
      shapes[layer + "attn.delta"] = {config.n_heads, config.pairs()};
      shapes[layer + "attn.phase_bias"] = {config.n_heads, config.pairs()};
      shapes[layer + "attn.beta"] = {config.n_heads};
    }
    shapes[layer + "ffn_norm.weight"] = {D};
    shapes[layer + "ffn.w1.weight"] = {F, D};
    shapes[layer + "ffn.w3.weight"] = {F, D};
    shapes[layer + "ffn.w2.weight"] = {D, F};
  }
  return shapes;
}

int64_t parameter_count(const ModelConfig& config) {
  const int64_t V = config.vocab_size, D = config.d_model, F = config.d_ff, H = config.n_heads;
  int64_t per_layer = 4 * D * D + 3 * D * F + 2 * D;
  if (config.position == Position::ComplexFormer) per_layer += 2 * H * config.pairs() + H;
  return V * D * (config.tie_embeddings ? 1 : 2) + (config.variant().embedding == PositionEmbedding::Learned ? config.max_seq_len * D : 0) +
         config.n_layers * per_layer + D;
}

Tensor CausalLM::forward(const Tensor& tokens, KVCache* cache) const {
  PHASOR_CHECK(tokens.dtype() == DType::Int64 && tokens.dim() == 2, "model: tokens must be int64 [batch, seq], got ", tokens.dtype(),
               " ", tokens.shape());
  const int64_t n = tokens.size(1), offset = cache ? cache->length : 0;
  check_positions_fit(config_, offset + n, "model: offset + length");
  const Tensor host_ids = ops::contiguous(to_cpu(tokens));  // checked on the host, then on the model's device
  const int64_t* p = host_ids.data<int64_t>();
  for (int64_t i = 0; i < host_ids.numel(); ++i)
    PHASOR_CHECK(p[i] >= 0 && p[i] < config_.vocab_size, "model: token ", p[i], " is outside the vocabulary [0, ", config_.vocab_size, ")");
  const Tensor ids = ops::to_device(host_ids, device());
  if (cache) cache->reserve(offset + n);

  Tensor x = tok_emb_->forward(ids);
  const PositionEmbedding embedding = config_.variant().embedding;
  if (embedding == PositionEmbedding::Learned) x = x + narrow(pos_emb_->weight, 0, offset, n);
  if (embedding == PositionEmbedding::Sinusoidal) x = x + ops::to_device(sinusoidal_positions(n, config_.d_model, offset), x.device());
  const int64_t origin = cache ? cache->xpos_origin : xpos_origin(config_.xpos_scale_base, n);
  for (size_t l = 0; l < layers.size(); ++l) x = layers[l]->forward(x, offset, cache ? &cache->layers[l] : nullptr, origin);
  if (cache) cache->length += n;
  const Tensor& head = config_.tie_embeddings ? tok_emb_->weight : lm_head_->weight;
  return matmul(norm_->forward(x), head, MatOp::None, MatOp::Transpose);
}

Tensor CausalLM::loss(const Tensor& tokens, const Tensor& targets) const {
  const Tensor logits = forward(tokens);
  return cross_entropy(reshape(logits, {-1, config_.vocab_size}), ops::to_device(ops::reshape(targets, {-1}), logits.device()));
}

KVCache CausalLM::make_cache(int64_t batch, int64_t max_length) const {
  check_positions_fit(config_, max_length, "generate: prompt + tokens");
  PHASOR_CHECK(batch > 0 && max_length >= 0, "make_cache: batch must be positive and max_length non-negative, got ", batch, " and ",
               max_length);
  // The first allocation: a normal request fits in it; a long one grows from it (KVCache::reserve).
  constexpr int64_t kFirstCapacity = 256;
  KVCache cache;
  cache.max_length = max_length;
  cache.xpos_origin = xpos_origin(config_.xpos_scale_base, max_length);
  cache.capacity = std::min(max_length, kFirstCapacity);
  for (size_t l = 0; l < layers.size(); ++l)
    cache.layers.push_back({zeros({batch, cache.capacity, config_.n_heads, config_.head_dim()}, DType::Float32, device()),
                            zeros({batch, cache.capacity, config_.n_heads, config_.head_dim()}, DType::Float32, device())});
  return cache;
}

void KVCache::reserve(int64_t positions) {
  PHASOR_CHECK(positions <= max_length, "KV cache: made for at most ", max_length, " positions, asked for ", positions);
  if (positions <= capacity) return;
  // Doubling keeps the copies to O(final length) in all; never past what the request can use.
  const int64_t grown = std::min(max_length, std::max(positions, capacity > max_length / 2 ? max_length : 2 * capacity));
  for (LayerCache& layer : layers)
    for (Tensor* stored : {&layer.keys, &layer.values}) {
      Tensor bigger = zeros({stored->size(0), grown, stored->size(2), stored->size(3)}, DType::Float32, stored->device());
      ops::copy_(ops::narrow(bigger, 1, 0, length), ops::narrow(*stored, 1, 0, length));
      *stored = bigger;
    }
  capacity = grown;
}

void CausalLM::to(Device device) { nn::Module::to(device); }

Device CausalLM::device() const { return tok_emb_->weight.device(); }

void CausalLM::set_rotation(RotationImpl impl) {
  for (auto& layer : layers) layer->attn->rotation = impl;
}

void CausalLM::set_attention(AttentionImpl impl) {
  for (auto& layer : layers) layer->attn->attention = impl;
}

namespace {
bool takes_no_decay(const std::string& name, const Tensor& p) {
  return p.dim() < 2 || name.ends_with(".delta") || name.ends_with(".phase_bias") || name.ends_with(".beta");
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> CausalLM::decayed_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, p] : named_parameters())
    if (!takes_no_decay(name, p)) out.emplace_back(name, p);
  return out;
}

std::vector<std::pair<std::string, Tensor>> CausalLM::undecayed_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, p] : named_parameters())
    if (takes_no_decay(name, p)) out.emplace_back(name, p);
  return out;
}

}  // namespace phasor
