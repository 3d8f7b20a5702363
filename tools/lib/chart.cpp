#include "tools/lib/chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#ifdef CREMA_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

#include "core/common.hpp"
#include "io/image_codecs_library.hpp"
#include "io/proto_io.hpp"

namespace crema {

namespace {

constexpr double kTitleSize = 17;
constexpr double kLabelSize = 13;
constexpr double kTickSize = 11.5;
constexpr double kLegendSize = 12;
constexpr double kLineWidth = 1.6;
constexpr double kDotRadius = 2.6;
const Rgb kInk{40, 40, 40};
const Rgb kFaint{110, 110, 110};
const Rgb kGrid{226, 226, 226};
const Rgb kWhite{255, 255, 255};

// Where values lie along an axis, and its ticks.
struct Axis {
  double low = 0, high = 1;
  bool log = false;
  std::vector<double> ticks;
  double step = 0;  // linear axes: the distance between ticks

  bool Drawable(double value) const { return std::isfinite(value) && (!log || value > 0); }
  double Fraction(double value) const {
    if (log) return (std::log10(value) - std::log10(low)) / (std::log10(high) - std::log10(low));
    return (value - low) / (high - low);
  }
  std::string Label(double value) const { return log ? FormatTick(value, value) : FormatTick(value, step); }
};

Axis MakeLinearAxis(double low, double high) {
  if (!(low <= high)) low = 0, high = 1;
  if (low == high) {
    // A constant (a fixed learning rate): centred, with room on both sides.
    const double pad = low == 0 ? 1 : std::fabs(low) * 0.5;
    low -= pad;
    high += pad;
  }
  Axis axis;
  axis.ticks = LinearTicks(low, high, 5);
  axis.low = axis.ticks.front();
  axis.high = axis.ticks.back();
  axis.step = axis.ticks[1] - axis.ticks[0];
  return axis;
}

Axis MakeLogAxis(double low, double high) {
  Axis axis;
  axis.log = true;
  axis.ticks = LogTicks(low, high);
  axis.low = axis.ticks.front();
  axis.high = axis.ticks.back();
  return axis;
}

// The axis of the values `values` (all series of a panel, or every x).
Axis AxisFor(const std::vector<double>& values, bool log) {
  double low = std::numeric_limits<double>::infinity(), high = -low;
  for (double v : values) {
    if (!std::isfinite(v) || (log && v <= 0)) continue;
    low = std::min(low, v);
    high = std::max(high, v);
  }
  if (low > high) return MakeLinearAxis(0, 1);  // nothing to draw
  if (log) return MakeLogAxis(low, high);
  return MakeLinearAxis(low, high);
}

// A rectangle in pixels.
struct Box {
  double left = 0, top = 0, right = 0, bottom = 0;
  bool Contains(Point p) const { return p.x >= left && p.x <= right && p.y >= top && p.y <= bottom; }
};

DrawnText Text(double x, double y, const std::string& text, double size, Rgb color, TextAnchor anchor,
               bool bold = false) {
  DrawnText drawn;
  drawn.baseline = {x, y};
  drawn.text = text;
  drawn.size = size;
  drawn.color = color;
  drawn.anchor = anchor;
  drawn.bold = bold;
  return drawn;
}

// Items are made whole before they enter the list: GCC (12, -O3) otherwise warns that the variant's other
// alternatives may be read uninitialized.
DrawnItem Dot(Point center, Rgb color) {
  DrawnDot dot;
  dot.center = center;
  dot.radius = kDotRadius;
  dot.color = color;
  return DrawnItem(dot);
}

DrawnPath Segment(Point from, Point to, Rgb color, double width) {
  DrawnPath path;
  path.points = {from, to};
  path.color = color;
  path.width = width;
  return path;
}

// The pixel paths of a series (split where a value cannot be drawn).
std::vector<std::vector<Point>> SeriesPaths(const ChartSeries& series, const Axis& x_axis, const Axis& y_axis,
                                            const Box& plot) {
  std::vector<std::vector<Point>> paths(1);
  for (size_t i = 0; i < series.x.size() && i < series.y.size(); ++i) {
    if (!x_axis.Drawable(series.x[i]) || !y_axis.Drawable(series.y[i])) {
      if (!paths.back().empty()) paths.emplace_back();
      continue;
    }
    const double x = plot.left + x_axis.Fraction(series.x[i]) * (plot.right - plot.left);
    const double y = plot.bottom - y_axis.Fraction(series.y[i]) * (plot.bottom - plot.top);
    paths.back().push_back({x, y});
  }
  if (paths.back().empty()) paths.pop_back();
  return paths;
}

// How many points along the paths (sampled every few pixels) fall inside `box`: the legend goes where this
// is least.
int PointsCovered(const std::vector<std::vector<Point>>& paths, const Box& box) {
  int covered = 0;
  for (const auto& path : paths) {
    for (size_t i = 0; i < path.size(); ++i) {
      if (box.Contains(path[i])) ++covered;
      if (i + 1 == path.size()) break;
      const double dx = path[i + 1].x - path[i].x, dy = path[i + 1].y - path[i].y;
      const int steps = static_cast<int>(std::hypot(dx, dy) / 4);
      for (int s = 1; s < steps; ++s) {
        const double t = static_cast<double>(s) / steps;
        if (box.Contains({path[i].x + t * dx, path[i].y + t * dy})) ++covered;
      }
    }
  }
  return covered;
}

void AddLegend(const ChartPanel& panel, const Box& plot, const std::vector<std::vector<Point>>& all_paths,
               Drawing* drawing) {
  std::vector<const ChartSeries*> entries;
  for (const auto& series : panel.series)
    if (!series.label.empty()) entries.push_back(&series);
  if (entries.empty()) return;
  constexpr double kRow = 17, kPad = 7, kSample = 22, kInset = 8;
  double text_width = 0;
  for (const auto* series : entries) text_width = std::max(text_width, TextWidth(series->label, kLegendSize));
  const double width = kPad + kSample + 6 + text_width + kPad;
  const double height = kPad + kRow * entries.size() + kPad - 4;
  // Corners in order of preference; the one over the fewest drawn points wins.
  const Box corners[] = {
      {plot.right - kInset - width, plot.top + kInset, plot.right - kInset, plot.top + kInset + height},
      {plot.right - kInset - width, plot.bottom - kInset - height, plot.right - kInset, plot.bottom - kInset},
      {plot.left + kInset, plot.top + kInset, plot.left + kInset + width, plot.top + kInset + height},
      {plot.left + kInset, plot.bottom - kInset - height, plot.left + kInset + width, plot.bottom - kInset},
  };
  const Box* best = &corners[0];
  int best_covered = std::numeric_limits<int>::max();
  for (const Box& corner : corners) {
    const int covered = PointsCovered(all_paths, corner);
    if (covered < best_covered) best = &corner, best_covered = covered;
  }
  DrawnRect frame;
  frame.x = best->left;
  frame.y = best->top;
  frame.width = width;
  frame.height = height;
  frame.filled = true;
  frame.fill = kWhite;
  frame.stroked = true;
  frame.stroke = {200, 200, 200};
  drawing->items.push_back(frame);
  for (size_t i = 0; i < entries.size(); ++i) {
    const double middle = best->top + kPad + kRow * i + kRow / 2 - 2;
    const double sample_left = best->left + kPad;
    drawing->items.push_back(
        Segment({sample_left, middle}, {sample_left + kSample, middle}, entries[i]->color, kLineWidth + 0.4));
    if (entries[i]->markers) drawing->items.push_back(Dot({sample_left + kSample / 2, middle}, entries[i]->color));
    drawing->items.push_back(Text(sample_left + kSample + 6, middle + kLegendSize * 0.36, entries[i]->label,
                                  kLegendSize, kInk, TextAnchor::kStart));
  }
}

std::string Hex(Rgb color) {
  char text[8];
  std::snprintf(text, sizeof(text), "#%02x%02x%02x", color.r, color.g, color.b);
  return text;
}

// Coordinates with one decimal: enough at any zoom, and small files.
std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", value);
  std::string result = text;
  if (result.size() > 2 && result.compare(result.size() - 2, 2, ".0") == 0) result.resize(result.size() - 2);
  return result == "-0" ? "0" : result;
}

std::string XmlEscaped(const std::string& text) {
  std::string escaped;
  for (char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

std::string Extension(const std::string& path) {
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string extension = path.substr(dot + 1);
  for (char& c : extension) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return extension;
}

}  // namespace

Rgb SeriesColor(int index) {
  static const Rgb kPalette[] = {{31, 119, 180}, {255, 127, 14},  {44, 160, 44},   {214, 39, 40},  {148, 103, 189},
                                 {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};
  constexpr int kCount = sizeof(kPalette) / sizeof(kPalette[0]);
  return kPalette[((index % kCount) + kCount) % kCount];
}

double TextWidth(const std::string& text, double size) {
  // DejaVu Sans (the widest of the usual sans-serif fonts) averages about 0.6 em for digits and lower case;
  // OpenCV's Hershey font is narrower.
  return 0.62 * size * static_cast<double>(text.size());
}

std::vector<double> LinearTicks(double low, double high, int count) {
  CREMA_CHECK(std::isfinite(low) && std::isfinite(high) && low < high && count > 0)
      << "chart axis: cannot place ticks over [" << low << ", " << high << "]";
  const double raw = (high - low) / count;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double normalized = raw / magnitude;
  const double step = (normalized < 1.5 ? 1 : normalized < 3 ? 2 : normalized < 7 ? 5 : 10) * magnitude;
  const double first = std::floor(low / step + 1e-9);
  const double last = std::ceil(high / step - 1e-9);
  std::vector<double> ticks;
  for (double k = first; k <= last + 0.5; ++k) ticks.push_back(k * step == 0 ? 0.0 : k * step);
  if (ticks.size() < 2) ticks.push_back(ticks.back() + step);
  return ticks;
}

std::vector<double> LogTicks(double low, double high) {
  CREMA_CHECK(low > 0 && high >= low && std::isfinite(high))
      << "chart axis: cannot place logarithmic ticks over [" << low << ", " << high << "]";
  const int first = static_cast<int>(std::floor(std::log10(low) + 1e-9));
  int last = static_cast<int>(std::ceil(std::log10(high) - 1e-9));
  if (last <= first) last = first + 1;
  const int stride = last - first > 8 ? 2 : 1;
  std::vector<double> ticks;
  int k = first;
  for (; k < last; k += stride) ticks.push_back(std::pow(10.0, k));
  ticks.push_back(std::pow(10.0, k));
  return ticks;
}

std::string FormatTick(double value, double step) {
  char text[32];
  const double magnitude = std::max(std::fabs(value), std::fabs(step));
  if (value == 0) return "0";
  if (magnitude >= 1e6 || std::fabs(step) < 1e-4) {
    std::snprintf(text, sizeof(text), "%g", value);
  } else {
    const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(std::fabs(step)) - 1e-9));
    std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  }
  return text;
}

Drawing LayOutChart(const Chart& chart) {
  CREMA_CHECK(!chart.panels.empty()) << "chart '" << chart.title << "': nothing to draw (no panels)";
  std::vector<double> xs;
  for (const auto& panel : chart.panels)
    for (const auto& series : panel.series) xs.insert(xs.end(), series.x.begin(), series.x.end());
  const Axis x_axis = AxisFor(xs, false);
  std::vector<Axis> y_axes;
  for (const auto& panel : chart.panels) {
    std::vector<double> ys;
    for (const auto& series : panel.series) ys.insert(ys.end(), series.y.begin(), series.y.end());
    const bool any_positive = std::any_of(ys.begin(), ys.end(), [](double v) { return std::isfinite(v) && v > 0; });
    y_axes.push_back(AxisFor(ys, panel.log_y && any_positive));
  }

  // Margins wide enough for the tick labels.
  double widest_y_label = 0;
  for (const Axis& axis : y_axes)
    for (double tick : axis.ticks) widest_y_label = std::max(widest_y_label, TextWidth(axis.Label(tick), kTickSize));
  const double left = std::max(48.0, widest_y_label + 16);
  const double right = chart.width - std::max(22.0, TextWidth(x_axis.Label(x_axis.high), kTickSize) / 2 + 8);
  constexpr double kTitleZone = 40, kPanelLabelZone = 24, kPanelGap = 6, kBottomZone = 50;

  Drawing drawing;
  drawing.width = chart.width;
  double y = kTitleZone;
  std::vector<Box> plots;
  for (const auto& panel : chart.panels) {
    y += kPanelLabelZone;
    const double height = std::max(60.0, chart.panel_height * panel.relative_height);
    plots.push_back({left, y, right, y + height});
    y += height + kPanelGap;
  }
  drawing.height = static_cast<int>(std::ceil(y - kPanelGap + kBottomZone));

  DrawnRect background;
  background.width = drawing.width;
  background.height = drawing.height;
  background.filled = true;
  background.fill = kWhite;
  drawing.items.push_back(background);
  drawing.items.push_back(Text(chart.width / 2.0, 27, chart.title, kTitleSize, kInk, TextAnchor::kMiddle, true));

  for (size_t p = 0; p < chart.panels.size(); ++p) {
    const ChartPanel& panel = chart.panels[p];
    const Axis& y_axis = y_axes[p];
    const Box& plot = plots[p];
    const bool last = p + 1 == chart.panels.size();
    for (double tick : y_axis.ticks) {
      const double ty = plot.bottom - y_axis.Fraction(tick) * (plot.bottom - plot.top);
      drawing.items.push_back(Segment({plot.left, ty}, {plot.right, ty}, kGrid, 1));
      drawing.items.push_back(
          Text(plot.left - 6, ty + kTickSize * 0.35, y_axis.Label(tick), kTickSize, kFaint, TextAnchor::kEnd));
    }
    for (double tick : x_axis.ticks) {
      const double tx = plot.left + x_axis.Fraction(tick) * (plot.right - plot.left);
      drawing.items.push_back(Segment({tx, plot.top}, {tx, plot.bottom}, kGrid, 1));
      if (last)
        drawing.items.push_back(Text(tx, plot.bottom + 17, x_axis.Label(tick), kTickSize, kFaint, TextAnchor::kMiddle));
    }
    drawing.items.push_back(Text(plot.left, plot.top - 8, panel.y_label + (y_axis.log ? " (log scale)" : ""),
                                 kLabelSize, kInk, TextAnchor::kStart, true));

    std::vector<std::vector<Point>> all_paths;
    for (const auto& series : panel.series) {
      const auto paths = SeriesPaths(series, x_axis, y_axis, plot);
      for (const auto& points : paths) {
        if (points.size() > 1) {
          DrawnPath path;
          path.points = points;
          path.color = series.color;
          path.width = kLineWidth;
          drawing.items.push_back(path);
        }
        if (series.markers || points.size() == 1)
          for (const Point& point : points) drawing.items.push_back(Dot(point, series.color));
      }
      all_paths.insert(all_paths.end(), paths.begin(), paths.end());
    }
    DrawnRect frame;
    frame.x = plot.left;
    frame.y = plot.top;
    frame.width = plot.right - plot.left;
    frame.height = plot.bottom - plot.top;
    frame.stroked = true;
    frame.stroke = {150, 150, 150};
    drawing.items.push_back(frame);
    AddLegend(panel, plot, all_paths, &drawing);
    if (last)
      drawing.items.push_back(
          Text((plot.left + plot.right) / 2, plot.bottom + 40, chart.x_label, kLabelSize, kInk, TextAnchor::kMiddle));
  }
  return drawing;
}

std::string DrawingToSvg(const Drawing& drawing) {
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << drawing.width << "\" height=\"" << drawing.height
      << "\" viewBox=\"0 0 " << drawing.width << " " << drawing.height
      << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n";
  for (const DrawnItem& item : drawing.items) {
    if (const auto* path = std::get_if<DrawnPath>(&item)) {
      svg << "<polyline fill=\"none\" stroke=\"" << Hex(path->color) << "\" stroke-width=\"" << Number(path->width)
          << "\" stroke-linejoin=\"round\" stroke-linecap=\"round\" points=\"";
      for (size_t i = 0; i < path->points.size(); ++i)
        svg << (i ? " " : "") << Number(path->points[i].x) << "," << Number(path->points[i].y);
      svg << "\"/>\n";
    } else if (const auto* rect = std::get_if<DrawnRect>(&item)) {
      svg << "<rect x=\"" << Number(rect->x) << "\" y=\"" << Number(rect->y) << "\" width=\"" << Number(rect->width)
          << "\" height=\"" << Number(rect->height) << "\" fill=\"" << (rect->filled ? Hex(rect->fill) : "none")
          << "\"";
      if (rect->stroked) svg << " stroke=\"" << Hex(rect->stroke) << "\"";
      svg << "/>\n";
    } else if (const auto* dot = std::get_if<DrawnDot>(&item)) {
      svg << "<circle cx=\"" << Number(dot->center.x) << "\" cy=\"" << Number(dot->center.y) << "\" r=\""
          << Number(dot->radius) << "\" fill=\"" << Hex(dot->color) << "\"/>\n";
    } else if (const auto* text = std::get_if<DrawnText>(&item)) {
      const char* anchor = text->anchor == TextAnchor::kStart    ? "start"
                           : text->anchor == TextAnchor::kMiddle ? "middle"
                                                                 : "end";
      svg << "<text x=\"" << Number(text->baseline.x) << "\" y=\"" << Number(text->baseline.y) << "\" font-size=\""
          << Number(text->size) << "\" fill=\"" << Hex(text->color) << "\" text-anchor=\"" << anchor << "\""
          << (text->bold ? " font-weight=\"bold\"" : "") << ">" << XmlEscaped(text->text) << "</text>\n";
    }
  }
  svg << "</svg>\n";
  return svg.str();
}

#ifdef CREMA_USE_OPENCV

bool PngChartsAvailable() { return true; }

void WriteDrawingPng(const Drawing& drawing, const std::string& path) {
  // Drawn at twice the size and scaled down: OpenCV's anti-aliasing alone leaves thin lines and the Hershey
  // font's strokes ragged.
  constexpr int kScale = 2;
  constexpr int kShift = 3;  // fractional bits of the coordinates passed to OpenCV
  const auto at = [](Point p) {
    return cv::Point(static_cast<int>(std::lround(p.x * kScale * (1 << kShift))),
                     static_cast<int>(std::lround(p.y * kScale * (1 << kShift))));
  };
  const auto bgr = [](Rgb c) { return cv::Scalar(c.b, c.g, c.r); };
  const auto thickness = [](double width) { return std::max(1, static_cast<int>(std::lround(width * kScale))); };
  cv::Mat canvas(drawing.height * kScale, drawing.width * kScale, CV_8UC3, cv::Scalar(255, 255, 255));
  int baseline = 0;
  const double cap_height = cv::getTextSize("H", cv::FONT_HERSHEY_SIMPLEX, 1.0, 1, &baseline).height;
  for (const DrawnItem& item : drawing.items) {
    if (const auto* path = std::get_if<DrawnPath>(&item)) {
      std::vector<cv::Point> points;
      for (const Point& p : path->points) points.push_back(at(p));
      cv::polylines(canvas, points, false, bgr(path->color), thickness(path->width), cv::LINE_AA, kShift);
    } else if (const auto* rect = std::get_if<DrawnRect>(&item)) {
      const cv::Point from = at({rect->x, rect->y}), to = at({rect->x + rect->width, rect->y + rect->height});
      if (rect->filled) cv::rectangle(canvas, from, to, bgr(rect->fill), cv::FILLED, cv::LINE_AA, kShift);
      if (rect->stroked) cv::rectangle(canvas, from, to, bgr(rect->stroke), thickness(1), cv::LINE_AA, kShift);
    } else if (const auto* dot = std::get_if<DrawnDot>(&item)) {
      cv::circle(canvas, at(dot->center), static_cast<int>(std::lround(dot->radius * kScale * (1 << kShift))),
                 bgr(dot->color), cv::FILLED, cv::LINE_AA, kShift);
    } else if (const auto* text = std::get_if<DrawnText>(&item)) {
      // Capitals 0.7 em tall, as in the SVG's fonts.
      const double scale = text->size * kScale * 0.7 / cap_height;
      const int weight = std::max(1, static_cast<int>(std::lround(text->size * kScale / (text->bold ? 11.0 : 13.0))));
      const cv::Size size = cv::getTextSize(text->text, cv::FONT_HERSHEY_SIMPLEX, scale, weight, &baseline);
      double x = text->baseline.x * kScale;
      if (text->anchor == TextAnchor::kMiddle) x -= size.width / 2.0;
      if (text->anchor == TextAnchor::kEnd) x -= size.width;
      cv::putText(canvas, text->text,
                  cv::Point(static_cast<int>(std::lround(x)), static_cast<int>(std::lround(text->baseline.y * kScale))),
                  cv::FONT_HERSHEY_SIMPLEX, scale, bgr(text->color), weight, cv::LINE_AA);
    }
  }
  cv::Mat image;
  cv::resize(canvas, image, cv::Size(drawing.width, drawing.height), 0, 0, cv::INTER_AREA);
  std::vector<unsigned char> bytes;
  CREMA_CHECK(ImageCodecs().imencode(".png", image, bytes, {})) << path << ": OpenCV could not encode the chart as PNG";
  WriteStringToFileAtomically(std::string(bytes.begin(), bytes.end()), path);
}

#else  // !CREMA_USE_OPENCV

bool PngChartsAvailable() { return false; }

void WriteDrawingPng(const Drawing&, const std::string& path) {
  CREMA_FAIL() << path << ": this crema was built without OpenCV (CREMA_USE_OPENCV=OFF) and cannot write PNG "
               << "charts; write an .svg instead";
}

#endif  // CREMA_USE_OPENCV

void WriteChart(const Chart& chart, const std::string& path) {
  const std::string extension = Extension(path);
  if (extension == "svg") {
    WriteStringToFileAtomically(DrawingToSvg(LayOutChart(chart)), path);
  } else if (extension == "png") {
    WriteDrawingPng(LayOutChart(chart), path);
  } else {
    CREMA_FAIL() << path << ": cannot tell the chart's format from the name; end it in .svg or .png";
  }
}

}  // namespace crema
