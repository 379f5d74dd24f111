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

double t_quantile_975(int64_t dof) {
  PHASOR_CHECK(dof >= 1, "t quantile: ", dof, " degrees of freedom; it needs at least one");
  static constexpr double kTable[30] = {12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
                                        2.2010,  2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
                                        2.0796,  2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423};
  if (dof <= 30) return kTable[dof - 1];
  const double z = 1.959964, v = static_cast<double>(dof);  // Cornish-Fisher: error under 1e-5 past 30
  return z + (z * z * z + z) / (4 * v) + (5 * std::pow(z, 5) + 16 * z * z * z + 3 * z) / (96 * v * v);
}

std::optional<PairedDifference> paired_difference(const SeedStats& variant, const SeedStats& reference) {
  if (variant.seeds.size() != variant.values.size() || reference.seeds.size() != reference.values.size()) return std::nullopt;
  SeedStats d;
  for (size_t i = 0; i < variant.seeds.size(); ++i)
    for (size_t j = 0; j < reference.seeds.size(); ++j)
      if (variant.seeds[i] == reference.seeds[j]) d.add(variant.seeds[i], variant.values[i] - reference.values[j]);
  if (d.values.empty()) return std::nullopt;
  PairedDifference p;
  p.pairs = d.values.size();
  p.mean = d.mean();
  p.se = d.standard_error();
  p.half_width = p.pairs >= 2 ? t_quantile_975(static_cast<int64_t>(p.pairs) - 1) * p.se : 0;
  return p;
}

std::string PairedDifference::format(const char* fmt) const {
  if (!has_interval()) return format_number(fmt, mean) + " (n=1)";
  std::string se_text = format_number(fmt, se);  // without the sign `fmt` may force
  if (!se_text.empty() && se_text.front() == '+') se_text = se_text.substr(1);
  return format_number(fmt, mean) + " ± " + se_text + " [" + format_number(fmt, mean - half_width) +
         ", " + format_number(fmt, mean + half_width) + "]";
}

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
