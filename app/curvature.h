#pragma once
// The curvature study: eigenvalues and eigenvectors of the Hessian of the loss
// of one evaluation window (or the mean over several consecutive ones), restricted to chosen parameters (all others held
// fixed), from Hessian-vector products (autograd/functional.h).
//
// The model runs in float64 (the checkpoint's weights widened), so that the
// products resolve small eigenvalues. K eigenvalues at either end of the
// spectrum (or both) come from Lanczos with full reorthogonalisation; K = all
// forms the exact Hessian, one product per coordinate, and diagonalises it.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/transformer.h"

namespace phasor {

// Which end of the spectrum K counts from: the largest algebraic eigenvalues
// (sharp directions), the smallest (the negative end, where saddles show), or
// K of each.
enum class SpectrumEnd { Largest, Smallest, Both };

struct CurvatureOptions {
  int64_t seq_len = 0;
  int64_t window = 0;
  int64_t window_count = 1;  // the loss: the mean over windows [window, window + window_count)
  // Parameter selectors: "all", or names matched whole or as a dotted suffix
  // ("delta" selects every layers.{l}.attn.delta; "attn.wq.weight" every wq).
  std::vector<std::string> params = {"delta", "phase_bias", "beta"};
  int64_t top = 5;  // K; 0 means all (the exact Hessian)
  SpectrumEnd which = SpectrumEnd::Largest;  // with K > 0
  int64_t max_products = 300;  // Lanczos steps at most
  double tolerance = 1e-6;  // relative residual ||H y - lambda y|| / max|lambda| every Ritz pair must reach
  uint64_t seed = 0;  // of the Lanczos start vector
};

struct CurvatureResult {
  double loss = 0;
  int64_t window = 0, windows = 0, seq_len = 0;  // the first window studied; the windows the tokens hold
  int64_t window_count = 1;                       // the windows whose mean loss is studied
  std::vector<std::pair<std::string, Dims>> parameters;  // selected, in model order
  int64_t dimension = 0;  // n: their scalar count
  std::string method;  // "lanczos" or "exact"
  std::vector<double> eigenvalues;  // largest first; smallest first for `which` Smallest; Both: the largest K then the smallest K
  std::vector<std::vector<double>> eigenvectors;  // unit, n entries each (parameters concatenated)
  std::vector<double> residuals;  // ||H y - lambda y|| / max|lambda| per pair, from one more product each
  int64_t products = 0;  // Hessian-vector products used, residual checks included
  bool converged = false;  // every residual within the tolerance
  double asymmetry = 0;  // exact only: ||H - H^T|| / ||H|| of the formed matrix
};

// phasor::Error (one line) for a selector that matches nothing, a window past
// the end, a seq_len the model cannot take, or K larger than the dimension
// (2 K with SpectrumEnd::Both).
CurvatureResult curvature(const CausalLM& model, const std::vector<int64_t>& tokens, const CurvatureOptions& options);

// The exact Hessian of the window's loss over the selected parameters (n x n,
// row-major), one product per coordinate; for tests and K = all.
std::vector<double> exact_hessian(const CausalLM& model, const std::vector<int64_t>& tokens, const CurvatureOptions& options);

// Eigenvalues (descending) and unit eigenvectors (rows) of a symmetric n x n matrix (Jacobi).
std::pair<std::vector<double>, std::vector<std::vector<double>>> symmetric_eigen(std::vector<double> a, int64_t n);

// Eigenvectors as F32 safetensors: each selected parameter's name holds a
// [K, *shape] tensor (row i: eigenvector i's part), "eigenvalues" a [K] one.
// __metadata__: format "phasor-curvature", config, window, seq_len, loss.
void save_eigenvectors(const std::string& path, const CurvatureResult& r, const ModelConfig& config);

nlohmann::json curvature_json(const CurvatureResult& r);

}  // namespace phasor
