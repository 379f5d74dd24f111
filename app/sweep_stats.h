#pragma once
// The statistics of a sweep's report: values over seeds, their mean and
// standard error, and a weighted straight-line fit (the scale report's trend).
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace phasor {

// One measure of one cell over its seeds.
struct SeedStats {
  std::vector<double> values;
  double mean() const;
  double sd() const;              // sample standard deviation (n - 1); 0 for one value
  double standard_error() const;  // sd / sqrt(n)
};

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
