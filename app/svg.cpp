#include "app/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <sstream>

namespace phasor::svg {

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value + 0.0);  // + 0.0 turns -0 into 0
  return buffer;
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* colour(size_t i) {
  static const char* const kColours[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                         "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kColours[i % std::size(kColours)];
}

int Axis::decimals() const { return std::max(0, static_cast<int>(-std::floor(std::log10(tick) + 1e-9))); }

// Counted rather than accumulated, so 0.1 steps do not drift.
std::vector<double> Axis::ticks() const {
  const auto count = static_cast<int>(std::lround((high - low) / tick));
  std::vector<double> values;
  for (int i = 0; i <= count; ++i) values.push_back(low + i * tick);
  return values;
}

namespace {
// 1, 2 or 5 times a power of ten: tick labels people can read at a glance.
double nice_step(double raw) {
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double fraction = raw / power;
  return power * (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10);
}
}  // namespace

Axis make_axis(double min, double max, double pixel_low, double pixel_high, double min_tick) {
  if (!(max > min)) {  // one value (or one point): give it some room
    const double pad = std::max(std::abs(max) * 0.1, 1.0);
    min -= pad;
    max += pad;
  }
  const double tick = std::max(nice_step((max - min) / 6), min_tick);
  return {std::floor(min / tick) * tick, std::ceil(max / tick) * tick, tick, pixel_low, pixel_high};
}

std::string begin_document(double width, double height) {
  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height << "\" viewBox=\"0 0 "
      << width << ' ' << height << "\" font-family=\"sans-serif\" font-size=\"13\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  return out.str();
}

double x_position(XScale scale, double value) {
  return scale == XScale::Log2 ? std::log2(value) : scale == XScale::Log10 ? std::log10(value) : value;
}

namespace {
// 10^exponent with two or three significant digits and a k or M suffix: 100k, 316k, 1M, 3.2M.
std::string short_power_of_ten(double exponent) {
  const double value = std::pow(10.0, exponent);
  const auto digits = [](double v, const char* suffix) {  // 3.2M, 316k, 1M (not 1.0M)
    return fixed(v, v < 10 && std::abs(v - std::round(v)) > 0.05 ? 1 : 0) + suffix;
  };
  if (value >= 1e6) return digits(value / 1e6, "M");
  if (value >= 1e3) return digits(value / 1e3, "k");
  return digits(value, "");
}

std::string x_tick_label(XScale scale, const Axis& x, double tick) {
  switch (scale) {
    case XScale::Log2: return fixed(std::exp2(tick), 0);
    case XScale::Log10: return short_power_of_ten(tick);
    case XScale::Linear: break;
  }
  return fixed(tick, x.decimals());
}
}  // namespace

void grid_and_ticks(std::ostream& out, const Frame& f, const Axis& x, const Axis& y, XScale x_scale) {
  out << "<g stroke=\"#e6e6e6\" stroke-width=\"1\">\n";
  for (double v : x.ticks())
    out << "<line x1=\"" << fixed(x.to_pixel(v)) << "\" y1=\"" << f.top << "\" x2=\"" << fixed(x.to_pixel(v)) << "\" y2=\""
        << f.bottom << "\"/>\n";
  for (double v : y.ticks())
    out << "<line x1=\"" << f.left << "\" y1=\"" << fixed(y.to_pixel(v)) << "\" x2=\"" << f.right << "\" y2=\""
        << fixed(y.to_pixel(v)) << "\"/>\n";
  out << "</g>\n<g fill=\"#333\">\n";
  for (double v : x.ticks())
    out << "<text x=\"" << fixed(x.to_pixel(v)) << "\" y=\"" << f.bottom + 20 << "\" text-anchor=\"middle\">"
        << x_tick_label(x_scale, x, v) << "</text>\n";
  for (double v : y.ticks())
    out << "<text x=\"" << f.left - 8 << "\" y=\"" << fixed(y.to_pixel(v) + 4) << "\" text-anchor=\"end\">"
        << fixed(v, y.decimals()) << "</text>\n";
  out << "</g>\n";
}

void frame_and_labels(std::ostream& out, const Frame& f, const std::string& title, const std::string& x_label,
                      const std::string& y_label, int title_size) {
  const double middle_x = (f.left + f.right) / 2, middle_y = (f.top + f.bottom) / 2, y_label_x = f.left - 55;
  out << "<rect x=\"" << f.left << "\" y=\"" << f.top << "\" width=\"" << f.right - f.left << "\" height=\"" << f.bottom - f.top
      << "\" fill=\"none\" stroke=\"#333\"/>\n"
      << "<text x=\"" << middle_x << "\" y=\"" << f.top - title_size - 7 << "\" text-anchor=\"middle\" font-size=\"" << title_size
      << "\" font-weight=\"bold\">" << escape(title) << "</text>\n"
      << "<text x=\"" << middle_x << "\" y=\"" << f.bottom + 48 << "\" text-anchor=\"middle\">" << escape(x_label) << "</text>\n"
      << "<text x=\"" << y_label_x << "\" y=\"" << middle_y << "\" text-anchor=\"middle\" transform=\"rotate(-90 " << y_label_x
      << ' ' << middle_y << ")\">" << escape(y_label) << "</text>\n";
}

}  // namespace phasor::svg
