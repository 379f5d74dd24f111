#include "models/transformer.h"

#include <algorithm>
#include <cmath>

#include "autograd/functions.h"
#include "autograd/fused.h"
#include "autograd/grad_mode.h"
#include "nn/precision.h"

namespace phasor {

namespace {

// A scheme's model parameters under a child module, so that "pos_emb.weight"
// keeps its checkpoint name and its place in the parameter order.
class SchemeParameters : public nn::Module {
 public:
  Tensor add(const std::string& name, Tensor value) { return register_parameter(name, std::move(value)); }
};

}  // namespace

// ---------------------------------------------------------------- attention

Attention::Attention(const ModelConfig& config, Generator* gen, std::shared_ptr<const PositionScheme> scheme)
    : config_(config), scheme_(scheme ? std::move(scheme) : make_position_scheme(config)) {
  const int64_t d = config.d_model;
  wq = register_module("wq", std::make_shared<nn::Linear>(d, d, false, DType::Float32, gen));
  wk = register_module("wk", std::make_shared<nn::Linear>(d, d, false, DType::Float32, gen));
  wv = register_module("wv", std::make_shared<nn::Linear>(d, d, false, DType::Float32, gen));
  wo = register_module("wo", std::make_shared<nn::Linear>(d, d, false, DType::Float32, gen));
  const std::vector<PositionParameter> own = scheme_->layer_parameters();
  std::vector<Tensor> values = scheme_->initial_layer_parameters(gen);
  for (size_t i = 0; i < own.size(); ++i) position_parameters_.push_back(register_parameter(own[i].name, std::move(values[i])));
}

const Tensor& Attention::position_parameter(std::string_view name) const {
  const std::vector<PositionParameter> own = scheme_->layer_parameters();
  for (size_t i = 0; i < own.size(); ++i)
    if (own[i].name == name) return position_parameters_[i];
  fail("attention: a '", scheme_->name(), "' layer has no parameter '", name, "'");
}

std::pair<Tensor, Tensor> Attention::rotated_qk(const Tensor& x, int64_t offset, int64_t origin, Tensor* state) const {
  const int64_t b = x.size(0), n = x.size(1), h = config_.n_heads, d = config_.head_dim();
  Tensor q = reshape(wq->forward(x), {b, n, h, d});
  Tensor k = reshape(wk->forward(x), {b, n, h, d});
  const PositionVariant& v = config_.variant();
  if (!v.rotary && !v.complex_components) return {q, k};
  // The complex view: pairs (u_2j, u_2j+1) are z_j = u_2j + i u_2j+1, zero-copy
  // (pope instead turns the real components themselves into complex numbers).
  const Tensor qc = v.rotary ? view_as_complex(reshape(q, {b, n, h, d / 2, 2})) : q;
  const Tensor kc = v.rotary ? view_as_complex(reshape(k, {b, n, h, d / 2, 2})) : k;
  AttentionProbe* p = probe.get();
  RotationArgs args{offset, origin, &position_parameters_, rotation == RotationImpl::Composed, &x, state};
  if (p) args.q_r = &p->q_r, args.q_phi = &p->q_phi, args.k_r = &p->k_r, args.k_phi = &p->k_phi;
  const auto [qr, kr] = scheme_->rotate(qc, kc, args);
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
  const int64_t width = config_.query_key_width();
  return {reshape(view_as_real(qr), {b, n, h, width}), reshape(view_as_real(kr), {b, n, h, width})};
}

Tensor Attention::scores(const Tensor& x, int64_t offset) const {
  auto [q, k] = rotated_qk(x, offset, scheme_->origin(offset + x.size(1)), nullptr);
  return matmul(permute(q, {0, 2, 1, 3}), permute(k, {0, 2, 1, 3}), MatOp::None, MatOp::Transpose);
}

Tensor Attention::forward(const Tensor& x, int64_t offset, LayerCache* cache, int64_t origin) const {
  const int64_t b = x.size(0), n = x.size(1), h = config_.n_heads, d = config_.head_dim();
  std::pair<Tensor, Tensor> rotated = rotated_qk(x, offset, origin, cache ? &cache->position_state : nullptr);  // named, not bound: clang 14 refuses structured bindings in lambdas
  Tensor &q = rotated.first, &k = rotated.second;
  Tensor v = reshape(wv->forward(x), {b, n, h, d});
  if (cache) {  // generation: append this chunk, attend over everything stored
    PHASOR_CHECK(offset + n <= cache->keys.size(1), "attention: KV cache capacity ", cache->keys.size(1), " exceeded at position ",
                 offset + n);
    ops::copy_(ops::narrow(cache->keys, 1, offset, n), k);
    ops::copy_(ops::narrow(cache->values, 1, offset, n), v);
    k = ops::narrow(cache->keys, 1, 0, offset + n);
    v = ops::narrow(cache->values, 1, 0, offset + n);
  }
  const double scale = scheme_->logit_factor() / std::sqrt(static_cast<double>(d));  // YaRN's factor, else 1
  const int64_t query_offset = cache ? offset : 0;  // without a cache the keys are this chunk's own
  const Tensor slopes = scheme_->slopes(x.device());
  const Tensor distance_bias = scheme_->distance_bias(position_parameters_);
  // A probe must not change what it observes: the output (and so every
  // gradient) is the one the same run without a probe computes, and the
  // probabilities a study asks for are computed beside it, without gradients.
  // Under bf16 q, k and v are stored in bfloat16 (nn/precision.h); the
  // materialised path computes on the same rounded values, in float32. A KV
  // cache (generation) and a float64 model keep their own dtype.
  const bool mixed = !cache && q.dtype() == DType::Float32;
  const DType stored = mixed ? nn::compute_dtype(nn::current_precision(), nn::OpClass::AttentionInputs) : q.dtype();
  auto materialized = [&](Tensor* probs) {
    return materialized_attention(round_through(q, stored), round_through(k, stored), round_through(v, stored), scale, query_offset, slopes,
                                  probs, distance_bias);
  };
  if (probe && probe->keep_probs) {
    const NoGradGuard no_grad;
    materialized(&probe->probs);
  }
  const Tensor o = attention == AttentionImpl::Fused ? causal_attention_in(stored, q, k, v, scale, query_offset, slopes, distance_bias)
                                                     : materialized(nullptr);  // [B, N, H, d]
  return wo->forward(reshape(o, {b, n, h * d}));
}

// ---------------------------------------------------------------- blocks and model

Block::Block(const ModelConfig& config, Generator* gen, std::shared_ptr<const PositionScheme> scheme) {
  attn_norm = register_module("attn_norm", std::make_shared<nn::RMSNorm>(config.d_model, config.norm_eps));
  attn = register_module("attn", std::make_shared<Attention>(config, gen, std::move(scheme)));
  ffn_norm = register_module("ffn_norm", std::make_shared<nn::RMSNorm>(config.d_model, config.norm_eps));
  ffn = register_module("ffn", std::make_shared<nn::SwiGLU>(config.d_model, config.d_ff, gen));
}

Tensor Block::forward(const Tensor& x, int64_t offset, LayerCache* cache, int64_t origin) const {
  const Tensor h = x + attn->forward(attn_norm->forward(x), offset, cache, origin);
  return h + ffn->forward(ffn_norm->forward(h));
}

CausalLM::CausalLM(const ModelConfig& config, uint64_t seed) : config_(config) {
  config.validate();
  scheme_ = make_position_scheme(config);
  Generator gen(seed);
  tok_emb_ = register_module("tok_emb", std::make_shared<nn::Embedding>(config.vocab_size, config.d_model, &gen));
  const std::vector<PositionParameter> own = scheme_->model_parameters();
  std::vector<Tensor> values = scheme_->initial_model_parameters(&gen);
  for (size_t i = 0; i < own.size(); ++i) {  // "pos_emb.weight": parameter "weight" of a child "pos_emb"
    const size_t dot = own[i].name.rfind('.');
    auto holder = register_module(own[i].name.substr(0, dot), std::make_shared<SchemeParameters>());
    position_parameters_.push_back(holder->add(own[i].name.substr(dot + 1), std::move(values[i])));
    scheme_parameters_[own[i].name] = own[i];
  }
  for (int64_t l = 0; l < config.n_layers; ++l) {
    layers.push_back(register_module("layers." + std::to_string(l), std::make_shared<Block>(config, &gen, scheme_)));
    for (const PositionParameter& p : scheme_->layer_parameters()) scheme_parameters_["layers." + std::to_string(l) + ".attn." + p.name] = p;
  }
  norm_ = register_module("norm", std::make_shared<nn::RMSNorm>(config.d_model, config.norm_eps));
  if (!config.tie_embeddings)
    lm_head_ = register_module("lm_head", std::make_shared<nn::Linear>(config.d_model, config.vocab_size, false, DType::Float32, &gen));

  // GPT-2 style initialisation; residual projections scaled down with depth.
  // A scheme's own parameters keep their initial values unless it asks for this draw.
  constexpr double kStd = 0.02;
  for (const auto& [name, p] : named_parameters()) {
    const auto scheme_owned = scheme_parameters_.find(name);
    const bool drawn = scheme_owned == scheme_parameters_.end() ? p.dim() == 2 : scheme_owned->second.drawn_as_weight;
    const bool residual = name.ends_with("attn.wo.weight") || name.ends_with("ffn.w2.weight");
    if (residual) nn::init_residual_(p, kStd, config.n_layers, &gen);
    else if (drawn) nn::init_normal_(p, kStd, &gen);
  }
}

std::map<std::string, Dims> parameter_shapes(const ModelConfig& config) {
  const int64_t V = config.vocab_size, D = config.d_model, F = config.d_ff;
  std::map<std::string, Dims> shapes{{"tok_emb.weight", {V, D}}, {"norm.weight", {D}}};
  const std::shared_ptr<const PositionScheme> scheme = make_position_scheme(config);
  for (const PositionParameter& p : scheme->model_parameters()) shapes[p.name] = p.shape;
  if (!config.tie_embeddings) shapes["lm_head.weight"] = {V, D};
  for (int64_t l = 0; l < config.n_layers; ++l) {
    const std::string layer = "layers." + std::to_string(l) + ".";
    shapes[layer + "attn_norm.weight"] = {D};
    for (const char* w : {"wq", "wk", "wv", "wo"}) shapes[layer + "attn." + w + ".weight"] = {D, D};
    for (const PositionParameter& p : scheme->layer_parameters()) shapes[layer + "attn." + p.name] = p.shape;
    shapes[layer + "ffn_norm.weight"] = {D};
    shapes[layer + "ffn.w1.weight"] = {F, D};
    shapes[layer + "ffn.w3.weight"] = {F, D};
    shapes[layer + "ffn.w2.weight"] = {D, F};
  }
  return shapes;
}

int64_t parameter_count(const ModelConfig& config) {
  return static_cast<int64_t>(config.parameter_count());  // exact: validate() keeps it below 2^31
}

Tensor CausalLM::checked_upload(const Tensor& tokens) const {
  const Tensor host_ids = ops::contiguous(to_cpu(tokens));
  const int64_t* p = host_ids.data<int64_t>();
  for (int64_t i = 0; i < host_ids.numel(); ++i)
    PHASOR_CHECK(p[i] >= 0 && p[i] < config_.vocab_size, "model: token ", p[i], " is outside the vocabulary [0, ", config_.vocab_size, ")");
  return ops::to_device(host_ids, device());
}

Tensor CausalLM::forward(const Tensor& tokens, KVCache* cache) const {
  PHASOR_CHECK(tokens.dtype() == DType::Int64 && tokens.dim() == 2, "model: tokens must be int64 [batch, seq], got ", tokens.dtype(),
               " ", tokens.shape());
  const int64_t n = tokens.size(1), offset = cache ? cache->length : 0;
  scheme_->check_fit(offset + n, "model: offset + length");
  // Tokens are checked on the host, then uploaded; tokens already on the
  // model's GPU (the input buffer of a step captured in a CUDA Graph) are
  // checked by the embedding's kernel instead, whose index fault the host
  // raises at its next synchronisation: reading them back would wait for the device.
  const bool on_gpu = !tokens.device().is_cpu() && tokens.device() == device();
  const Tensor ids = on_gpu ? tokens : checked_upload(tokens);
  if (cache) cache->reserve(offset + n);

  Tensor x = scheme_->embed(tok_emb_->forward(ids), offset, position_parameters_);
  const int64_t origin = cache ? cache->origin : scheme_->origin(n);
  for (size_t l = 0; l < layers.size(); ++l) x = layers[l]->forward(x, offset, cache ? &cache->layers[l] : nullptr, origin);
  if (cache) cache->length += n;
  const Tensor& head = config_.tie_embeddings ? tok_emb_->weight : lm_head_->weight;
  return nn::weight_product(norm_->forward(x), head);
}

Tensor CausalLM::loss(const Tensor& tokens, const Tensor& targets) const {
  const Tensor logits = forward(tokens);
  return cross_entropy(reshape(logits, {-1, config_.vocab_size}), ops::to_device(ops::reshape(targets, {-1}), logits.device()));
}

KVCache CausalLM::make_cache(int64_t batch, int64_t max_length) const {
  scheme_->check_fit(max_length, "generate: prompt + tokens");
  PHASOR_CHECK(batch > 0 && max_length >= 0, "make_cache: batch must be positive and max_length non-negative, got ", batch, " and ",
               max_length);
  // The first allocation: a normal request fits in it; a long one grows from it (KVCache::reserve).
  constexpr int64_t kFirstCapacity = 256;
  KVCache cache;
  cache.max_length = max_length;
  cache.origin = scheme_->origin(max_length);
  cache.capacity = std::min(max_length, kFirstCapacity);
  for (size_t l = 0; l < layers.size(); ++l)
    cache.layers.push_back({zeros({batch, cache.capacity, config_.n_heads, config_.query_key_width()}, DType::Float32, device()),
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

void CausalLM::set_position_scaling(const PositionScaling& scaling) {
  scheme_ = make_position_scheme(config_, scaling);
  for (auto& layer : layers) layer->attn->set_positions(scheme_);
}

void CausalLM::to(Device device) { nn::Module::to(device); }

Device CausalLM::device() const { return tok_emb_->weight.device(); }

void CausalLM::set_rotation(RotationImpl impl) {
  for (auto& layer : layers) layer->attn->rotation = impl;
}

void CausalLM::set_attention(AttentionImpl impl) {
  for (auto& layer : layers) layer->attn->attention = impl;
}

bool CausalLM::decays(const std::string& name, const Tensor& p) const {
  const auto scheme_owned = scheme_parameters_.find(name);
  return scheme_owned == scheme_parameters_.end() ? p.dim() >= 2 : scheme_owned->second.decays;
}

std::vector<std::pair<std::string, Tensor>> CausalLM::decayed_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, p] : named_parameters())
    if (decays(name, p)) out.emplace_back(name, p);
  return out;
}

std::vector<std::pair<std::string, Tensor>> CausalLM::undecayed_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, p] : named_parameters())
    if (!decays(name, p)) out.emplace_back(name, p);
  return out;
}

}  // namespace phasor
