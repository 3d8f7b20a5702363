// Line charts for the tools (plot_training_log): a chart is described once (panels of series sharing an x
// axis), laid out once into a Drawing of plain shapes in pixels, and that drawing is written by one of two
// small back ends: SVG (text, always available) or PNG (rasterised with OpenCV). So both files show the same
// layout.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace crema {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};
// A palette of ten colours that stay apart from each other; index wraps around.
Rgb SeriesColor(int index);

struct ChartSeries {
  std::string label;
  std::vector<double> x, y;  // same length; a non-finite y (or, on a logarithmic axis, one <= 0) breaks the line
  Rgb color;
  bool markers = false;  // a dot at every point (sparse series: test passes)
};

struct ChartPanel {
  std::string y_label;
  std::vector<ChartSeries> series;
  bool log_y = false;
  double relative_height = 1;  // of the panels' shared height
};

// Panels stacked top to bottom over one x axis, whose tick labels and label are drawn under the last panel.
struct Chart {
  std::string title;
  std::string x_label;
  std::vector<ChartPanel> panels;
  int width = 900;
  int panel_height = 240;  // pixels for a panel of relative_height 1
};

// The shapes of a laid-out chart, in pixels from the top-left corner, in drawing order.
struct Point {
  double x = 0, y = 0;
};
struct DrawnPath {
  std::vector<Point> points;
  Rgb color;
  double width = 1;
};
struct DrawnRect {
  double x = 0, y = 0, width = 0, height = 0;
  bool filled = false;
  Rgb fill;
  bool stroked = false;
  Rgb stroke;
};
struct DrawnDot {
  Point center;
  double radius = 2;
  Rgb color;
};
enum class TextAnchor { kStart, kMiddle, kEnd };
struct DrawnText {
  Point baseline;  // where the anchor point of the text's baseline lies
  std::string text;
  double size = 12;  // the font size (em) in pixels
  Rgb color;
  TextAnchor anchor = TextAnchor::kStart;
  bool bold = false;
};
using DrawnItem = std::variant<DrawnPath, DrawnRect, DrawnDot, DrawnText>;

struct Drawing {
  int width = 0, height = 0;
  std::vector<DrawnItem> items;
};

// How wide the layout assumes a text to be (both back ends' fonts fit in it).
double TextWidth(const std::string& text, double size);

// Tick positions for a linear axis over [low, high]: steps of 1, 2 or 5 times a power of ten, about `count`
// of them, the first at or below `low` and the last at or above `high`.
std::vector<double> LinearTicks(double low, double high, int count);
// Powers of ten covering [low, high] (both > 0), every other one when they would be more than 8.
std::vector<double> LogTicks(double low, double high);
// A tick's label: as many decimals as the step between ticks needs ("0.25", "2000"), or %g for the very large
// and very small ("1e-05").
std::string FormatTick(double value, double step);

Drawing LayOutChart(const Chart& chart);

std::string DrawingToSvg(const Drawing& drawing);
// Whether PNG charts can be written (this crema was built with OpenCV).
bool PngChartsAvailable();
// Rasterises the drawing (anti-aliased, drawn at twice the size and scaled down) and writes it as a PNG.
// Throws naming the path when it cannot be written, or when this crema was built without OpenCV.
void WriteDrawingPng(const Drawing& drawing, const std::string& path);
// Writes the chart as SVG or PNG by the extension of `path` (.svg or .png); throws naming the path for any
// other extension.
void WriteChart(const Chart& chart, const std::string& path);

}  // namespace crema
