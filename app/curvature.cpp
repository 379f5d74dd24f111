#include "app/curvature.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "app/gradient.h"
#include "app/memory.h"
#include "autograd/functional.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "nn/checkpoint.h"

namespace phasor {

namespace {

bool selected(const std::string& name, const std::string& selector) {
  return selector == "all" || name == selector || (name.size() > selector.size() && name.ends_with("." + selector));
}

// Under create_graph the fused attention's backward differentiates its
// materialised path (autograd/fused.cpp), and the gradient's graph keeps each
// layer's scores and probabilities, [heads, L, L] in float64: a lower bound on
// what one window needs (measured: about a quarter of it at L = 1024). A
// window that cannot fit is refused before anything is allocated.
void refuse_a_window_too_large_for_memory(const ModelConfig& c, int64_t seq_len, int64_t windows) {
  const double squares = static_cast<double>(windows) * static_cast<double>(c.n_layers) * static_cast<double>(c.n_heads) *
                         static_cast<double>(seq_len) * static_cast<double>(seq_len);
  const double needed = 2.0 * 8.0 * squares, available = static_cast<double>(available_memory_bytes());
  if (needed <= available) return;
  char message[320];
  std::snprintf(message, sizeof message,
                "curvature: --seq-len %ld over %ld window(s) needs at least %.2f GiB for the second-order graph (each layer's [heads, L, L] "
                "attention scores and probabilities in float64, per window), more than the %.2f GiB of memory available to this process",
                static_cast<long>(seq_len), static_cast<long>(windows), needed / 1073741824.0, available / 1073741824.0);
  fail(message);
}

// The window's loss and its Hessian-vector products over the selected
// parameters, with the model in float64 while it lives (its weights are put back after).
class WindowHessian {
 public:
  WindowHessian(const CausalLM& model, const std::vector<int64_t>& tokens, const CurvatureOptions& o) {
    const ModelConfig& c = model.config();
    PHASOR_CHECK(o.window_count >= 1, "curvature: --windows must be at least 1, got ", o.window_count);
    // Consecutive windows as the rows of one batch: the loss is the mean over all their predictions.
    std::vector<int64_t> inputs, targets;
    int64_t count = 0;
    for (int64_t i = 0; i < o.window_count; ++i) {
      const StudyWindow w = study_window(c, tokens, o.seq_len, o.window + i, {.command = "curvature"});
      inputs.insert(inputs.end(), w.batch.inputs.begin(), w.batch.inputs.end());
      targets.insert(targets.end(), w.batch.targets.begin(), w.batch.targets.end());
      count = w.count;
    }
    PHASOR_CHECK(!o.params.empty(), "curvature: --params is empty");
    refuse_a_window_too_large_for_memory(c, o.seq_len, o.window_count);
    const auto named = model.named_parameters();
    for (const std::string& s : o.params) {
      const bool any = std::any_of(named.begin(), named.end(), [&](const auto& e) { return selected(e.first, s); });
      PHASOR_CHECK(any, "curvature: --params '", s, "' matches no parameter of this '", c.position,
                   "' model (selectors: all, a parameter name, or its dotted suffix such as delta or attn.wq.weight)");
    }
    for (const auto& entry : named) {  // not a structured binding: clang 14 cannot capture one in the lambda below
      const std::string& name = entry.first;
      const Tensor& p = entry.second;
      originals_.push_back(p.detach());
      p.set_data(ops::contiguous(ops::to(p, DType::Float64)));
      if (std::any_of(o.params.begin(), o.params.end(), [&](const std::string& s) { return selected(name, s); })) {
        result_.parameters.emplace_back(name, p.shape());
        params_.push_back(p);
        result_.dimension += p.numel();
      }
    }
    all_ = named;
    AutoGradMode grad_mode(true);
    const Tensor loss = model.loss(from_vector(inputs, {o.window_count, o.seq_len}), from_vector(targets, {o.window_count, o.seq_len}));
    result_.loss = loss.item<double>();
    result_.window = o.window;
    result_.window_count = o.window_count;
    result_.windows = count;
    result_.seq_len = o.seq_len;
    hvp_ = std::make_unique<HessianVectorProduct>(loss, params_);
  }
  ~WindowHessian() {
    for (size_t i = 0; i < all_.size(); ++i) all_[i].second.set_data(originals_[i]);
  }
  WindowHessian(const WindowHessian&) = delete;
  WindowHessian& operator=(const WindowHessian&) = delete;

  int64_t n() const { return result_.dimension; }
  CurvatureResult& result() { return result_; }

  // H v, v and the result as flat vectors over the selected parameters.
  std::vector<double> operator()(const std::vector<double>& v) {
    std::vector<Tensor> parts;
    size_t at = 0;
    for (const Tensor& p : params_) {
      parts.push_back(from_vector(std::vector<double>(v.begin() + at, v.begin() + at + p.numel()), p.shape()));
      at += static_cast<size_t>(p.numel());
    }
    std::vector<double> out;
    for (const Tensor& h : (*hvp_)(parts)) {
      const std::vector<double> x = h.to_vector<double>();
      out.insert(out.end(), x.begin(), x.end());
    }
    ++result_.products;
    return out;
  }

 private:
  CurvatureResult result_;
  nn::NamedTensors all_;
  std::vector<Tensor> originals_, params_;
  std::unique_ptr<HessianVectorProduct> hvp_;
};

double dot(const std::vector<double>& a, const std::vector<double>& b) { return std::inner_product(a.begin(), a.end(), b.begin(), 0.0); }
void axpy(std::vector<double>& y, double a, const std::vector<double>& x) {
  for (size_t i = 0; i < y.size(); ++i) y[i] += a * x[i];
}
double scale_of(const std::vector<double>& eigenvalues) {
  double s = 0;
  for (double e : eigenvalues) s = std::max(s, std::abs(e));
  return s > 0 ? s : 1.0;
}

std::vector<double> dense_hessian(WindowHessian& h) {
  const int64_t n = h.n();
  std::vector<double> m(static_cast<size_t>(n * n));
  for (int64_t j = 0; j < n; ++j) {
    std::vector<double> e(static_cast<size_t>(n), 0.0);
    e[j] = 1.0;
    const std::vector<double> col = h(e);
    for (int64_t i = 0; i < n; ++i) m[i * n + j] = col[i];
  }
  return m;
}

void exact(WindowHessian& h, CurvatureResult& r) {
  const int64_t n = h.n();
  std::vector<double> m = dense_hessian(h);
  double skew = 0, total = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      skew += std::pow(m[i * n + j] - m[j * n + i], 2);
      total += m[i * n + j] * m[i * n + j];
    }
  r.asymmetry = total > 0 ? std::sqrt(skew / total) : 0.0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j) m[i * n + j] = m[j * n + i] = 0.5 * (m[i * n + j] + m[j * n + i]);
  auto [values, vectors] = symmetric_eigen(m, n);
  const double s = scale_of(values);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> residual(static_cast<size_t>(n), 0.0);
    for (int64_t a = 0; a < n; ++a) {
      for (int64_t b = 0; b < n; ++b) residual[a] += m[a * n + b] * vectors[i][b];
      residual[a] -= values[i] * vectors[i][a];
    }
    r.eigenvalues.push_back(values[i]);
    r.eigenvectors.push_back(vectors[i]);
    r.residuals.push_back(std::sqrt(dot(residual, residual)) / s);
  }
}

// The Ritz pairs asked for, as indices into m values sorted largest first:
// the first k, the last k (smallest first), or both.
std::vector<int64_t> wanted(int64_t m, int64_t k, SpectrumEnd which) {
  std::vector<int64_t> out;
  if (which != SpectrumEnd::Smallest)
    for (int64_t i = 0; i < std::min(k, m); ++i) out.push_back(i);
  if (which != SpectrumEnd::Largest)
    for (int64_t i = 0; i < std::min(k, m); ++i) out.push_back(m - 1 - i);
  return out;
}

// Lanczos with full reorthogonalisation from a random unit vector; stops when
// the Ritz estimates of the wanted pairs are within the tolerance, the
// Krylov space is exhausted, or after max_products steps; then checks each
// pair with one more product.
void lanczos(WindowHessian& h, CurvatureResult& r, const CurvatureOptions& o) {
  const int64_t needed = o.which == SpectrumEnd::Both ? 2 * o.top : o.top;
  const int64_t n = h.n(), steps = std::min(n, std::max(o.max_products, needed));
  Generator gen(o.seed);
  std::vector<double> q = randn({n}, DType::Float64, &gen).to_vector<double>();
  const double q_norm = std::sqrt(dot(q, q));
  for (double& x : q) x /= q_norm;
  std::vector<std::vector<double>> basis;
  std::vector<double> alpha, beta;
  std::vector<double> theta;
  std::vector<std::vector<double>> s;
  for (int64_t j = 0; j < steps; ++j) {
    basis.push_back(q);
    std::vector<double> w = h(q);
    const double a = dot(w, q);
    alpha.push_back(a);
    for (int pass = 0; pass < 2; ++pass)
      for (const auto& b : basis) axpy(w, -dot(w, b), b);
    const double b = std::sqrt(dot(w, w));
    const int64_t m = j + 1;
    const bool exhausted = b <= 1e-12 * scale_of(alpha) || m == steps;
    if (m >= needed && (exhausted || m % 5 == 0)) {
      std::vector<double> t(static_cast<size_t>(m * m), 0.0);
      for (int64_t i = 0; i < m; ++i) {
        t[i * m + i] = alpha[i];
        if (i + 1 < m) t[i * m + i + 1] = t[(i + 1) * m + i] = beta[i];
      }
      std::tie(theta, s) = symmetric_eigen(t, m);
      const double sc = scale_of(theta);
      bool done = true;
      for (int64_t i : wanted(m, o.top, o.which)) done = done && std::abs(b * s[i][m - 1]) <= o.tolerance * sc;
      if (done || exhausted) break;
    }
    if (exhausted) break;
    beta.push_back(b);
    for (double& x : w) x /= b;
    q = w;
  }
  const double sc = scale_of(theta);
  for (int64_t i : wanted(static_cast<int64_t>(theta.size()), o.top, o.which)) {
    std::vector<double> y(static_cast<size_t>(n), 0.0);
    for (size_t c = 0; c < basis.size() && c < s[i].size(); ++c) axpy(y, s[i][c], basis[c]);
    const double norm = std::sqrt(dot(y, y));
    for (double& x : y) x /= norm;
    std::vector<double> residual = h(y);
    axpy(residual, -theta[i], y);
    r.eigenvalues.push_back(theta[i]);
    r.eigenvectors.push_back(y);
    r.residuals.push_back(std::sqrt(dot(residual, residual)) / sc);
  }
}

}  // namespace

std::pair<std::vector<double>, std::vector<std::vector<double>>> symmetric_eigen(std::vector<double> a, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n * n), 0.0);  // columns: eigenvectors
  for (int64_t i = 0; i < n; ++i) v[i * n + i] = 1.0;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0, diag = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) (i == j ? diag : off) += a[i * n + j] * a[i * n + j];
    if (off <= 1e-30 * std::max(diag, 1e-300)) break;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        const double apq = a[p * n + q];
        if (apq == 0.0) continue;
        // The rotation that zeroes a[p][q] (Golub and Van Loan, symmetric Schur decomposition).
        const double tau = (a[q * n + q] - a[p * n + p]) / (2 * apq);
        const double t = (tau >= 0 ? 1.0 : -1.0) / (std::abs(tau) + std::sqrt(1 + tau * tau));
        const double c = 1 / std::sqrt(1 + t * t), sn = t * c;
        for (int64_t k = 0; k < n; ++k) {  // columns p, q
          const double akp = a[k * n + p], akq = a[k * n + q];
          a[k * n + p] = c * akp - sn * akq;
          a[k * n + q] = sn * akp + c * akq;
        }
        for (int64_t k = 0; k < n; ++k) {  // rows p, q
          const double apk = a[p * n + k], aqk = a[q * n + k];
          a[p * n + k] = c * apk - sn * aqk;
          a[q * n + k] = sn * apk + c * aqk;
        }
        for (int64_t k = 0; k < n; ++k) {
          const double vkp = v[k * n + p], vkq = v[k * n + q];
          v[k * n + p] = c * vkp - sn * vkq;
          v[k * n + q] = sn * vkp + c * vkq;
        }
      }
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return a[x * n + x] > a[y * n + y]; });
  std::vector<double> values;
  std::vector<std::vector<double>> vectors;
  for (int64_t i : order) {
    values.push_back(a[i * n + i]);
    std::vector<double> col(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) col[k] = v[k * n + i];
    vectors.push_back(col);
  }
  return {values, vectors};
}

std::vector<double> exact_hessian(const CausalLM& model, const std::vector<int64_t>& tokens, const CurvatureOptions& options) {
  WindowHessian h(model, tokens, options);
  return dense_hessian(h);
}

CurvatureResult curvature(const CausalLM& model, const std::vector<int64_t>& tokens, const CurvatureOptions& o) {
  PHASOR_CHECK(o.top >= 0, "curvature: --top must be positive or 'all', got ", o.top);
  PHASOR_CHECK(o.max_products > 0, "curvature: --max-hvps must be positive, got ", o.max_products);
  PHASOR_CHECK(o.tolerance > 0, "curvature: --tol must be positive, got ", o.tolerance);
  WindowHessian h(model, tokens, o);
  CurvatureResult& r = h.result();
  constexpr int64_t kExactLimit = 1024;
  PHASOR_CHECK(o.top <= h.n(), "curvature: --top ", o.top, " exceeds the ", h.n(), " selected parameters");
  PHASOR_CHECK(o.which != SpectrumEnd::Both || 2 * o.top <= h.n(), "curvature: --top ", o.top, " at both ends needs ", 2 * o.top,
               " eigenvalues, more than the ", h.n(), " selected parameters");
  if (o.top == 0) {
    PHASOR_CHECK(h.n() <= kExactLimit, "curvature: --top all forms the exact Hessian of at most ", kExactLimit,
                 " parameters; the selection has ", h.n(), " (pass --top K)");
    r.method = "exact";
    exact(h, r);
  } else {
    r.method = "lanczos";
    lanczos(h, r, o);
  }
  r.converged = std::all_of(r.residuals.begin(), r.residuals.end(), [&](double x) { return x <= o.tolerance; });
  return r;
}

void save_eigenvectors(const std::string& path, const CurvatureResult& r, const ModelConfig& config) {
  nn::StateDict tensors;
  const int64_t k = static_cast<int64_t>(r.eigenvalues.size());
  tensors.emplace("eigenvalues", ops::to(from_vector(r.eigenvalues, {k}), DType::Float32));
  size_t at = 0;
  for (const auto& [name, shape] : r.parameters) {
    const int64_t numel = shape.numel();
    std::vector<double> rows;
    for (const auto& y : r.eigenvectors) rows.insert(rows.end(), y.begin() + at, y.begin() + at + numel);
    Dims s = shape;
    s.insert(0, k);
    tensors.emplace(name, ops::to(from_vector(rows, s), DType::Float32));
    at += static_cast<size_t>(numel);
  }
  nn::save_tensors(path, tensors,
                   {{"format", "phasor-curvature"}, {"config", to_json(config).dump()}, {"window", std::to_string(r.window)},
                    {"window_count", std::to_string(r.window_count)}, {"seq_len", std::to_string(r.seq_len)}, {"loss", nlohmann::json(r.loss).dump()}, {"method", r.method}});
}

nlohmann::json curvature_json(const CurvatureResult& r) {
  nlohmann::json params = nlohmann::json::array();
  for (const auto& [name, shape] : r.parameters) {
    std::vector<int64_t> dims(shape.begin(), shape.end());
    params.push_back({{"name", name}, {"shape", dims}});
  }
  nlohmann::json j = {{"method", r.method},       {"loss", r.loss},         {"window", r.window},       {"windows", r.windows},
                      {"window_count", r.window_count}, {"seq_len", r.seq_len},     {"parameters", params},   {"dimension", r.dimension}, {"eigenvalues", r.eigenvalues},
                      {"residuals", r.residuals}, {"hvps", r.products},     {"converged", r.converged}};
  if (r.method == "exact") j["asymmetry"] = r.asymmetry;
  return j;
}

}  // namespace phasor
