#include "app/sweep_stats.h"

#include <algorithm>
#include <cstdio>

#include "tensor/error.h"

namespace phasor {

double SeedStats::mean() const {
  double s = 0;
  for (double v : values) s += v;
  return s / static_cast<double>(values.size());
}

double SeedStats::sd() const {
  if (values.size() < 2) return 0;
  const double m = mean();
  double s = 0;
  for (double v : values) s += (v - m) * (v - m);
  return std::sqrt(s / static_cast<double>(values.size() - 1));
}

double SeedStats::standard_error() const { return sd() / std::sqrt(static_cast<double>(values.size())); }

LineFit weighted_line_fit(const std::vector<double>& x, const std::vector<double>& y, const std::vector<double>& se) {
  PHASOR_CHECK(x.size() == y.size() && x.size() == se.size(), "fit: ", x.size(), " x, ", y.size(), " y and ", se.size(),
               " standard errors; give one of each per point");
  double w = 0, wx = 0, wy = 0, wxx = 0, wxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    PHASOR_CHECK(se[i] > 0 && std::isfinite(se[i]), "fit: point ", i, " has standard error ", se[i], "; a weighted fit needs positive ones");
    const double wi = 1 / (se[i] * se[i]);
    w += wi, wx += wi * x[i], wy += wi * y[i], wxx += wi * x[i] * x[i], wxy += wi * x[i] * y[i];
  }
  const double det = w * wxx - wx * wx;  // 0 when every x is the same (up to rounding)
  PHASOR_CHECK(x.size() >= 2 && det > 1e-12 * w * wxx, "fit: a line needs at least two distinct x");
  LineFit f;
  f.points = x.size();
  f.slope = (w * wxy - wx * wy) / det;
  f.intercept = (wxx * wy - wx * wxy) / det;
  f.slope_se = std::sqrt(w / det);
  f.intercept_se = std::sqrt(wxx / det);
  for (size_t i = 0; i < x.size(); ++i) f.chi2 += std::pow((y[i] - f.intercept - f.slope * x[i]) / se[i], 2);
  return f;
}

std::string format_number(const char* fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, value);
  return buf;
}

double median(std::vector<double> v) {
  PHASOR_CHECK(!v.empty(), "median of no values");
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace phasor
