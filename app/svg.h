#pragma once
// Building blocks of the self-contained SVG charts that `phasor plot` and
// `phasor attention` write: number formatting, XML escaping, linear axes with
// readable ticks, and a plotting frame with its grid, tick labels and titles.
#include <cstddef>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

namespace phasor::svg {

// value with `decimals` digits after the point ("-0" printed as "0").
std::string fixed(double value, int decimals = 1);
// & < > " as XML entities.
std::string escape(const std::string& text);

// Tableau 10: distinct hues that stay readable on white and for most colour-blind
// readers; colour(i) cycles through them.
const char* colour(size_t i);

// A linear axis whose ends are rounded out to whole ticks.
struct Axis {
  double low, high, tick;
  double pixel_low, pixel_high;

  double to_pixel(double value) const { return pixel_low + (value - low) / (high - low) * (pixel_high - pixel_low); }
  int decimals() const;
  std::vector<double> ticks() const;
};

// Ticks of 1, 2 or 5 times a power of ten; min_tick = 1 keeps an axis of whole
// numbers (steps) from growing fractional ticks. One value gets some room around it.
Axis make_axis(double min, double max, double pixel_low, double pixel_high, double min_tick = 0);

struct Range {
  double min = std::numeric_limits<double>::infinity(), max = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (v < min) min = v;
    if (v > max) max = v;
  }
  bool empty() const { return !(min <= max); }
};

// The plotting rectangle of one chart, in pixels.
struct Frame {
  double left, right, top, bottom;
};

// How an x axis maps its values: as they are, or as log2 / log10 of them (the
// axis then holds the logarithms, and its ticks are labelled with the values).
enum class XScale { Linear, Log2, Log10 };
double x_position(XScale scale, double value);  // value, log2(value) or log10(value)

// The opening <svg> tag of a width x height document, with a white background.
std::string begin_document(double width, double height);
// Light grid lines at every tick, and the tick labels left of and below the
// frame. Log2: x holds log2 of the values, and its ticks are labelled 2^tick;
// Log10: log10, ticks labelled 10^tick in short form (100k, 316k, 1M).
void grid_and_ticks(std::ostream& out, const Frame& f, const Axis& x, const Axis& y, XScale x_scale = XScale::Linear);
// The frame's outline, a bold title above it, and the axis labels.
void frame_and_labels(std::ostream& out, const Frame& f, const std::string& title, const std::string& x_label,
                      const std::string& y_label, int title_size = 18);

}  // namespace phasor::svg
