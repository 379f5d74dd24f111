#pragma once
// The statistics of a sweep's report: values over seeds, their mean and
// standard error, and a weighted straight-line fit (the scale report's trend).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace phasor {

// One measure of one cell over its seeds.
struct SeedStats {
  std::vector<double> values;
  std::vector<int64_t> seeds;  // the seed of each value, where known (add()); pairs two variants' values
  void add(int64_t seed, double value) { seeds.push_back(seed), values.push_back(value); }
  double mean() const;
  double sd() const;              // sample standard deviation (n - 1); 0 for one value
  double standard_error() const;  // sd / sqrt(n)
};

// The two-sided 97.5% quantile of Student's t with `dof` degrees of freedom
// (the 95% interval's multiplier): exact to 4 digits for 1 to 30, the
// Cornish-Fisher expansion above. Throws unless dof >= 1.
double t_quantile_975(int64_t dof);

// variant - reference over the seeds both have, paired seed by seed (the same
// seed: the same initialisation stream and batch order, so what the seeds share
// cancels): the mean of the per-seed differences, its standard error
// sd / sqrt(n) and the 95% interval mean +- t(n-1) se.
struct PairedDifference {
  double mean = 0, se = 0, half_width = 0;  // half_width: t_quantile_975(n - 1) * se; 0 for one pair
  size_t pairs = 0;
  bool has_interval() const { return pairs >= 2; }
  // The 95% interval leaves out 0: the data favour one side.
  bool excludes_zero() const { return has_interval() && std::abs(mean) > half_width; }
  // "+0.0123 ± 0.0045 [+0.0027, +0.0219]" ("+0.0123 (n=1)" for one pair); `fmt` for every number.
  std::string format(const char* fmt = "%+.4f") const;
};
// Null when no seed of `variant` has a value of `reference` for the same seed
// (or either lacks its seeds).
std::optional<PairedDifference> paired_difference(const SeedStats& variant, const SeedStats& reference);

// y = intercept + slope * x fitted by weighted least squares with weights
// 1 / se^2, each se taken as the known standard error of its y; the standard
// errors of slope and intercept follow from those alone (not rescaled by the
// scatter), and chi2 = sum ((y - fit) / se)^2 over points - 2 degrees of
// freedom says whether the points scatter more than their errors.
struct LineFit {
  double intercept = 0, slope = 0, intercept_se = 0, slope_se = 0, chi2 = 0;
  size_t points = 0;
  // |slope| > 2 standard errors: a trend the seeds' noise is unlikely to make.
  bool slope_distinguishable_from_zero() const { return std::abs(slope) > 2 * slope_se; }
};
// Throws phasor::Error unless the lists have one length, at least two distinct
// x and every se is positive.
LineFit weighted_line_fit(const std::vector<double>& x, const std::vector<double>& y, const std::vector<double>& se);

// printf of one number ("%.4f").
std::string format_number(const char* fmt, double value);
double median(std::vector<double> values);

}  // namespace phasor
