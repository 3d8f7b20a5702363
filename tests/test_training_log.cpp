// Training logs read back (parse_log, plot_training_log): glog's line prefix with and without the year, times
// across midnight and across years, Caffe's and crema's line shapes, several test nets kept apart, a real log
// of `crema train` checked line by line against what a separate scan of it finds, the CSV tables (and their
// round trip), and the charts drawn from them.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#ifdef CREMA_USE_OPENCV
#include <opencv2/imgcodecs.hpp>
#endif

#include "io/proto_io.hpp"
#include "test_util.hpp"
#include "tools/lib/chart.hpp"
#include "tools/lib/training_log.hpp"

namespace crema {
namespace {

TrainingLog Parse(const std::string& text, int end_year = 2026) {
  std::istringstream in(text);
  return ParseTrainingLog(in, end_year);
}

// A few lines of a Caffe log, in the shapes Caffe 1.0 prints them, with glog's prefix `date` + " " + time.
std::string CaffeLines(const std::vector<std::pair<std::string, std::string>>& stamps_and_messages) {
  std::string text;
  for (const auto& [stamp, message] : stamps_and_messages)
    text += "I" + stamp + "  4242 solver.cpp:228] " + message + "\n";
  return text;
}

TEST(GlogTimestampTest, ReadsBothFormsAndSkipsLaunchersPrefixes) {
  LogTimestamp stamp;
  ASSERT_TRUE(ParseGlogTimestamp("I1122 10:31:07.123456 1234 solver.cpp:228] Iteration 0", &stamp));
  EXPECT_EQ(stamp.year, 0);
  EXPECT_EQ(stamp.month, 11);
  EXPECT_EQ(stamp.day, 22);
  EXPECT_NEAR(stamp.seconds_of_day, 10 * 3600 + 31 * 60 + 7.123456, 1e-9);

  ASSERT_TRUE(ParseGlogTimestamp("W20261122 23:59:59.999999 1234 net.cpp:1] warning", &stamp));
  EXPECT_EQ(stamp.year, 2026);
  EXPECT_EQ(stamp.month, 11);
  EXPECT_EQ(stamp.day, 22);
  EXPECT_NEAR(stamp.seconds_of_day, 86399.999999, 1e-9);

  ASSERT_TRUE(ParseGlogTimestamp("[1,0]<stderr>:I0101 00:00:01.5 77 solver.cpp:1] x", &stamp));
  EXPECT_EQ(stamp.month, 1);
  EXPECT_NEAR(stamp.seconds_of_day, 1.5, 1e-9);

  EXPECT_FALSE(ParseGlogTimestamp("Iteration 100, loss = 0.5", &stamp));
  EXPECT_FALSE(ParseGlogTimestamp("I1322 10:31:07.1 month 13", &stamp));
  EXPECT_FALSE(ParseGlogTimestamp("I112 10:31:07.1 three digits", &stamp));
  EXPECT_FALSE(ParseGlogTimestamp("", &stamp));
}

// Caffe 1.0's line shapes, old glog's prefix (no year), across midnight on New Year's Eve.
TEST(TrainingLogTest, CaffeLinesWithoutTheYearAcrossMidnight) {
  const std::string text = CaffeLines({
      {"1231 23:59:50.000000", "Solving LeNet"},
      {"1231 23:59:50.100000", "Iteration 0, Testing net (#0)"},
      {"1231 23:59:51.000000", "    Test net output #0: accuracy = 0.1"},
      {"1231 23:59:51.000001", "    Test net output #1: loss = 2.3 (* 1 = 2.3 loss)"},
      {"1231 23:59:51.500000", "Iteration 0, loss = 2.25"},
      {"1231 23:59:51.500001", "    Train net output #0: loss = 2.25 (* 1 = 2.25 loss)"},
      {"1231 23:59:51.500002", "Iteration 0, lr = 0.01"},
      {"0101 00:00:02.250000", "Iteration 100 (9.3 iter/s, 10.75s/100 iters), loss = 0.5"},
      {"0101 00:00:02.250001", "    Train net output #0: loss = 0.5 (* 1 = 0.5 loss)"},
      {"0101 00:00:02.250002", "Iteration 100, lr = 0.00992565"},
      {"0101 00:00:03.000000", "Iteration 100, Testing net (#0)"},
      {"0101 00:00:04.000000", "    Test net output #0: accuracy = 0.8"},
      {"0101 00:00:04.000001", "    Test net output #1: loss = 0.6 (* 1 = 0.6 loss)"},
  });
  const TrainingLog log = Parse(text);
  ASSERT_EQ(log.losses.size(), 2u);
  EXPECT_EQ(log.losses[1].iteration, 100);
  EXPECT_DOUBLE_EQ(log.losses[1].value, 0.5);
  // Seconds since the first line, 23:59:50: ten seconds to midnight and 2.25 after it.
  ASSERT_TRUE(log.losses[1].seconds);
  EXPECT_NEAR(*log.losses[1].seconds, 12.25, 1e-6);

  ASSERT_EQ(log.train.outputs, std::vector<std::string>({"loss"}));
  EXPECT_EQ(log.train.output_is_loss, std::vector<bool>({true}));
  ASSERT_EQ(log.train.rows.size(), 2u);
  EXPECT_EQ(log.train.rows[0].iteration, 0);
  EXPECT_NEAR(*log.train.rows[0].seconds, 1.500001, 1e-6);
  EXPECT_DOUBLE_EQ(*log.train.rows[0].learning_rate, 0.01);
  EXPECT_EQ(log.train.rows[1].iteration, 100);
  EXPECT_NEAR(*log.train.rows[1].seconds, 12.250001, 1e-6);
  // The rate printed for iteration 100 (after its outputs), not the one before.
  EXPECT_DOUBLE_EQ(*log.train.rows[1].learning_rate, 0.00992565);
  EXPECT_DOUBLE_EQ(*log.train.rows[1].values[0], 0.5);

  ASSERT_EQ(log.tests.size(), 1u);
  const LogTable& test = log.tests[0];
  ASSERT_EQ(test.outputs, std::vector<std::string>({"accuracy", "loss"}));
  EXPECT_EQ(test.output_is_loss, std::vector<bool>({false, true}));
  ASSERT_EQ(test.rows.size(), 2u);
  // The test at iteration 0 runs before any rate is printed: it takes the first one.
  EXPECT_DOUBLE_EQ(*test.rows[0].learning_rate, 0.01);
  EXPECT_NEAR(*test.rows[0].seconds, 1.0, 1e-6);
  EXPECT_DOUBLE_EQ(*test.rows[0].values[0], 0.1);
  EXPECT_DOUBLE_EQ(*test.rows[0].values[1], 2.3);
  EXPECT_EQ(test.rows[1].iteration, 100);
  EXPECT_NEAR(*test.rows[1].seconds, 14.0, 1e-6);
  EXPECT_DOUBLE_EQ(*test.rows[1].values[0], 0.8);
  EXPECT_DOUBLE_EQ(*test.rows[1].values[1], 0.6);
}

// glog 0.6's prefix carries the year: the same log across a year's end, and across a leap day.
TEST(TrainingLogTest, LinesWithTheYearAcrossYearsAndLeapDays) {
  const TrainingLog log = Parse(CaffeLines({
      {"20261231 23:59:59.500000", "Iteration 0, loss = 1"},
      {"20270101 00:00:01.000000", "Iteration 10, loss = 0.9"},
      {"20280228 12:00:00.000000", "Iteration 20, loss = 0.8"},
      {"20280301 12:00:00.000000", "Iteration 30, loss = 0.7"},
  }));
  ASSERT_EQ(log.losses.size(), 4u);
  EXPECT_NEAR(*log.losses[1].seconds, 1.5, 1e-6);
  // 2028 is a leap year: two days from February 28 to March 1.
  EXPECT_NEAR(*log.losses[3].seconds - *log.losses[2].seconds, 2 * 86400.0, 1e-6);
}

// Without the year, a new year starts where December turns to January, and the years of the lines are
// counted back from the year the log ends in: only then does a February lie in the right year.
TEST(TrainingLogTest, YearsWithoutTheYearCountBackFromTheEnd) {
  const std::string text = CaffeLines({
      {"1231 23:00:00.000000", "Iteration 0, loss = 1"},
      {"0228 12:00:00.000000", "Iteration 10, loss = 0.9"},
      {"0301 12:00:00.000000", "Iteration 20, loss = 0.8"},
  });
  // Ending in 2028 (leap): December 2027, then February 2028 has 29 days.
  TrainingLog log = Parse(text, 2028);
  EXPECT_NEAR(*log.losses[2].seconds - *log.losses[1].seconds, 2 * 86400.0, 1e-6);
  // Ending in 2027: February 2027 has 28.
  log = Parse(text, 2027);
  EXPECT_NEAR(*log.losses[2].seconds - *log.losses[1].seconds, 86400.0, 1e-6);
  // December 31 23:00 to February 28 12:00 of the next year: an hour, 58 days and 12 hours.
  EXPECT_NEAR(*log.losses[1].seconds, (1 + 58 * 24 + 12) * 3600.0, 1e-6);

  // A glog file's header names the year the log starts in, whatever the end year says.
  log = Parse("Log file created at: 2027/12/31 23:00:00\n" + text, 1999);
  EXPECT_NEAR(*log.losses[2].seconds - *log.losses[1].seconds, 2 * 86400.0, 1e-6);

  // A line a second thread wrote a moment earlier, just after midnight, stays in the old year.
  log = Parse(CaffeLines({
                  {"1231 23:59:59.900000", "Iteration 0, loss = 1"},
                  {"0101 00:00:00.100000", "Iteration 1, loss = 1"},
                  {"1231 23:59:59.950000", "Iteration 2, loss = 1"},
                  {"0101 00:00:00.300000", "Iteration 3, loss = 1"},
              }),
              2027);
  EXPECT_NEAR(*log.losses[1].seconds, 0.2, 1e-6);
  EXPECT_NEAR(*log.losses[2].seconds, 0.05, 1e-6);
  EXPECT_NEAR(*log.losses[3].seconds, 0.4, 1e-6);
}

// crema's shapes, two test nets with outputs of their own, a NaN, and lines without a prefix at all.
TEST(TrainingLogTest, SeveralTestNetsDoNotMix) {
  const std::string text =
      "I20261122 10:00:00.000000 1 solver.cpp:153] Solving tiny\n"
      "I20261122 10:00:00.100000 1 solver.cpp:314] Iteration 0, Testing net (#0)\n"
      "I20261122 10:00:00.200000 1 solver.cpp:326]     Test net output #0: accuracy = 0.25\n"
      "I20261122 10:00:00.300000 1 solver.cpp:326]     Test net output #1: loss = 1.5 (* 1 = 1.5 loss)\n"
      "I20261122 10:00:00.400000 1 solver.cpp:314] Iteration 0, Testing net (#1)\n"
      "I20261122 10:00:00.500000 1 solver.cpp:326]     Test net output #0: accuracy = 0.5\n"
      "I20261122 10:00:00.600000 1 solver.cpp:326]     Test net output #1: top2 = 0.75\n"
      "I20261122 10:00:00.700000 1 solver.cpp:326]     Test net output #2: loss = 1.25 (* 1 = 1.25 loss)\n"
      "Iteration 0, loss = 1.4\n"
      "    Train net output #0: loss = 1.4 (* 1 = 1.4 loss)\n"
      "Iteration 0, lr = 0.1\n"
      "I20261122 10:00:01.000000 1 solver.cpp:314] Iteration 10, Testing net (#0)\n"
      "I20261122 10:00:01.100000 1 solver.cpp:326]     Test net output #0: accuracy = 0.375\n"
      "I20261122 10:00:01.200000 1 solver.cpp:326]     Test net output #1: loss = nan (* 1 = nan loss)\n"
      "I20261122 10:00:01.300000 1 solver.cpp:314] Iteration 10, Testing net (#1)\n"
      "I20261122 10:00:01.400000 1 solver.cpp:326]     Test net output #0: accuracy = 0.625\n"
      "I20261122 10:00:01.500000 1 solver.cpp:326]     Test net output #1: top2 = 0.875\n"
      "I20261122 10:00:01.600000 1 solver.cpp:326]     Test net output #2: loss = 1 (* 1 = 1 loss)\n";
  const TrainingLog log = Parse(text);
  ASSERT_EQ(log.tests.size(), 2u);
  EXPECT_EQ(log.tests[0].outputs, std::vector<std::string>({"accuracy", "loss"}));
  EXPECT_EQ(log.tests[1].outputs, std::vector<std::string>({"accuracy", "top2", "loss"}));
  ASSERT_EQ(log.tests[0].rows.size(), 2u);
  ASSERT_EQ(log.tests[1].rows.size(), 2u);
  EXPECT_DOUBLE_EQ(*log.tests[0].rows[0].values[0], 0.25);
  EXPECT_DOUBLE_EQ(*log.tests[1].rows[0].values[0], 0.5);
  EXPECT_DOUBLE_EQ(*log.tests[0].rows[1].values[0], 0.375);
  EXPECT_TRUE(std::isnan(*log.tests[0].rows[1].values[1]));
  EXPECT_EQ(log.tests[1].rows[1].iteration, 10);
  EXPECT_DOUBLE_EQ(*log.tests[1].rows[1].values[1], 0.875);
  EXPECT_NEAR(*log.tests[1].rows[1].seconds, 1.4, 1e-6);
  // Lines without glog's prefix are read; they have no time.
  ASSERT_EQ(log.train.rows.size(), 1u);
  EXPECT_FALSE(log.train.rows[0].seconds);
  EXPECT_DOUBLE_EQ(*log.train.rows[0].values[0], 1.4);
  EXPECT_DOUBLE_EQ(*log.tests[1].rows[1].learning_rate, 0.1);

  // The tables as parse_log writes them: net #1 in a file of its own, a NaN as "nan".
  EXPECT_EQ(LogTableToCsv(log.tests[0]),
            "NumIters,Seconds,LearningRate,accuracy,loss\n"
            "0,0.200000,0.1,0.25,1.5\n"
            "10,1.100000,0.1,0.375,nan\n");
  EXPECT_EQ(LogTableToCsv(log.tests[1], ';'),
            "NumIters;Seconds;LearningRate;accuracy;top2;loss\n"
            "0;0.500000;0.1;0.5;0.75;1.25\n"
            "10;1.400000;0.1;0.625;0.875;1\n");
  EXPECT_EQ(LogTableToCsv(log.train), "NumIters,Seconds,LearningRate,loss\n0,,0.1,1.4\n");
}

// A row whose outputs were cut off (a log truncated mid-test) keeps the outputs it has, the rest empty; an
// output index printed under two names gets a column of its own.
TEST(TrainingLogTest, MissingOutputsAreEmptyAndRepeatedNamesApart) {
  const TrainingLog log = Parse(
      "Iteration 0, Testing net (#0)\n"
      "    Test net output #0: accuracy = 0.5\n"
      "    Test net output #1: loss = 2 (* 1 = 2 loss)\n"
      "Iteration 10, Testing net (#0)\n"
      "    Test net output #0: accuracy = 0.75\n"
      "Iteration 20, Testing net (#0)\n"
      "    Test net output #0: prob = 0.1\n"
      "    Test net output #1: prob = 0.9\n");
  const LogTable& test = log.tests.at(0);
  EXPECT_EQ(test.outputs, std::vector<std::string>({"accuracy", "loss", "prob", "prob#1"}));
  ASSERT_EQ(test.rows.size(), 3u);
  EXPECT_FALSE(test.rows[1].values[1]);
  EXPECT_DOUBLE_EQ(*test.rows[2].values[3], 0.9);
  EXPECT_FALSE(test.rows[2].learning_rate);
  EXPECT_EQ(LogTableToCsv(test),
            "NumIters,Seconds,LearningRate,accuracy,loss,prob,prob#1\n"
            "0,,,0.5,2,,\n"
            "10,,,0.75,,,\n"
            "20,,,,,0.1,0.9\n");
}

TEST(TrainingLogTest, CsvRoundTrip) {
  LogTable table;
  table.outputs = {"accuracy", "loss"};
  table.output_is_loss = {false, false};
  const double values[][2] = {{0.1035, 2.32436}, {0.8203, 0.493778}, {1.0 / 3.0, 1e-7}};
  for (int i = 0; i < 3; ++i) {
    LogTable::Row row;
    row.iteration = 500 * i;
    row.seconds = 3.917123 * i;
    row.learning_rate = 0.01 / (1 + i);
    row.values = {values[i][0], values[i][1]};
    table.rows.push_back(row);
  }
  table.rows[1].values[0].reset();
  table.rows[2].learning_rate.reset();
  for (char delimiter : {',', '\t', ';'}) {
    const std::string csv = LogTableToCsv(table, delimiter);
    const LogTable back = LogTableFromCsv(csv, "table.csv", delimiter);
    EXPECT_EQ(back.outputs, table.outputs);
    ASSERT_EQ(back.rows.size(), table.rows.size());
    for (size_t r = 0; r < table.rows.size(); ++r) {
      EXPECT_EQ(back.rows[r].iteration, table.rows[r].iteration);
      EXPECT_NEAR(*back.rows[r].seconds, *table.rows[r].seconds, 1e-6);
      EXPECT_EQ(back.rows[r].learning_rate, table.rows[r].learning_rate);
      EXPECT_EQ(back.rows[r].values, table.rows[r].values);  // exactly: the shortest text that reads back
    }
    EXPECT_EQ(LogTableToCsv(back, delimiter), csv);
  }
  test::ExpectErrorContaining([] { LogTableFromCsv("NumIters,Seconds,LearningRate,loss\n1,2,3\n", "t.csv"); },
                              {"t.csv:2", "3 fields", "4"});
  test::ExpectErrorContaining([] { LogTableFromCsv("NumIters,Seconds,LearningRate\n1,x,3\n", "t.csv"); },
                              {"t.csv:2", "Seconds", "'x'"});
  test::ExpectErrorContaining([] { LogTableFromCsv("Iters,Seconds\n", "t.csv"); }, {"t.csv:1", "NumIters"});
}

TEST(ChartTest, TicksAndTheirLabels) {
  EXPECT_EQ(LinearTicks(0, 10000, 5), std::vector<double>({0, 2000, 4000, 6000, 8000, 10000}));
  const std::vector<double> rates = LinearTicks(0.0059, 0.01, 5);
  ASSERT_EQ(rates.size(), 6u);
  EXPECT_NEAR(rates.front(), 0.005, 1e-12);
  EXPECT_NEAR(rates.back(), 0.01, 1e-12);
  EXPECT_EQ(FormatTick(rates[1], rates[1] - rates[0]), "0.006");
  const std::vector<double> losses = LinearTicks(0.05, 2.33, 5);
  EXPECT_EQ(losses.front(), 0);
  EXPECT_NEAR(losses.back(), 2.5, 1e-12);
  EXPECT_EQ(FormatTick(losses[1], losses[1] - losses[0]), "0.5");
  EXPECT_EQ(FormatTick(-1500, 500), "-1500");
  EXPECT_EQ(LogTicks(1.5e-4, 0.1), std::vector<double>({1e-4, 1e-3, 1e-2, 1e-1}));
  EXPECT_EQ(LogTicks(0.01, 0.01).size(), 2u);
  EXPECT_EQ(FormatTick(1e-5, 1e-5), "1e-05");
  EXPECT_EQ(FormatTick(0.001, 0.001), "0.001");
  EXPECT_EQ(LogTicks(1e-12, 1).size(), 7u);  // every other power of ten past 8
}

// Where a series' points land: the layout maps each value linearly (or logarithmically) into its panel, and
// the SVG holds exactly those points.
TEST(ChartTest, SeriesLandWhereTheirValuesSay) {
  Chart chart;
  chart.title = "t";
  chart.panels.resize(2);
  chart.panels[0].series.push_back({"a", {0, 50, 100}, {0, 1, 0.5}, SeriesColor(0), false});
  chart.panels[1].log_y = true;
  chart.panels[1].y_label = "rate";
  chart.panels[1].series.push_back({"", {0, 100}, {0.1, 0.001}, SeriesColor(1), false});
  const Drawing drawing = LayOutChart(chart);
  // The series' own paths, told from the grid and the legend's samples by colour and length.
  const auto same = [](Rgb a, Rgb b) { return a.r == b.r && a.g == b.g && a.b == b.b; };
  std::vector<const DrawnPath*> series;
  for (const auto& item : drawing.items) {
    const auto* path = std::get_if<DrawnPath>(&item);
    if (path && ((same(path->color, SeriesColor(0)) && path->points.size() == 3) || same(path->color, SeriesColor(1))))
      series.push_back(path);
  }
  ASSERT_EQ(series.size(), 2u);
  const auto& a = series[0]->points;
  ASSERT_EQ(a.size(), 3u);
  // x: 0, 50, 100 equally spaced; y: 1 at the top of the [0, 1] axis, 0 at its bottom, 0.5 halfway.
  EXPECT_NEAR(a[1].x - a[0].x, a[2].x - a[1].x, 1e-9);
  EXPECT_NEAR(a[2].y, (a[0].y + a[1].y) / 2, 1e-9);
  EXPECT_LT(a[1].y, a[0].y);
  // On the logarithmic axis [0.001, 0.1] the two values are its two ends, the panel's height apart.
  const auto& b = series[1]->points;
  ASSERT_EQ(b.size(), 2u);
  EXPECT_GT(b[1].y - b[0].y, 0.5 * chart.panel_height);

  const std::string svg = DrawingToSvg(drawing);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  // The SVG's polyline of series a (its colour, three points) holds the layout's points to a tenth of a pixel.
  const std::regex polyline("<polyline[^>]*stroke=\"#1f77b4\"[^>]*points=\"([^\"]*)\"");
  std::vector<Point> drawn;
  for (std::sregex_iterator it(svg.begin(), svg.end(), polyline), end; it != end; ++it) {
    std::istringstream numbers((*it)[1].str());
    std::vector<Point> points;
    Point point;
    char comma;
    while (numbers >> point.x >> comma >> point.y) points.push_back(point);
    if (points.size() == 3) drawn = points;
  }
  ASSERT_EQ(drawn.size(), 3u) << svg;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(drawn[i].x, a[i].x, 0.051);
    EXPECT_NEAR(drawn[i].y, a[i].y, 0.051);
  }
  EXPECT_NE(svg.find(">rate (log scale)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">a</text>"), std::string::npos);  // the legend
}

// The PNG back end draws the same layout: the series' colour lies where the SVG's line runs.
TEST(ChartTest, PngShowsTheSeriesWhereTheLayoutPutsThem) {
  if (!PngChartsAvailable()) GTEST_SKIP() << "built without OpenCV: no PNG charts";
#ifdef CREMA_USE_OPENCV
  test::TempDir dir;
  Chart chart;
  chart.title = "png";
  chart.panels.resize(1);
  chart.panels[0].series.push_back({"", {0, 10}, {3, 3.5}, Rgb{214, 39, 40}, false});
  const Drawing drawing = LayOutChart(chart);
  WriteDrawingPng(drawing, dir.file("chart.png"));
  const cv::Mat image = cv::imread(dir.file("chart.png"), cv::IMREAD_COLOR);
  ASSERT_FALSE(image.empty());
  EXPECT_EQ(image.cols, drawing.width);
  EXPECT_EQ(image.rows, drawing.height);
  const DrawnPath* line = nullptr;
  for (const auto& item : drawing.items)
    if (const auto* path = std::get_if<DrawnPath>(&item); path && path->color.r == 214) line = path;
  ASSERT_NE(line, nullptr);
  // Red along the line's middle third, sampled every few pixels.
  int red = 0, samples = 0;
  const Point from = line->points[0], to = line->points[1];
  for (double t = 0.33; t <= 0.67; t += 0.02, ++samples) {
    const cv::Vec3b pixel = image.at<cv::Vec3b>(static_cast<int>(std::lround(from.y + t * (to.y - from.y))),
                                                static_cast<int>(std::lround(from.x + t * (to.x - from.x))));
    if (pixel[2] > 150 && pixel[1] < 130 && pixel[0] < 130) ++red;
  }
  EXPECT_GE(red, samples - 1) << red << " of " << samples;
  // And no red far from it.
  EXPECT_EQ(image.at<cv::Vec3b>(5, 5), cv::Vec3b(255, 255, 255));
#endif
}

// A real log: a tiny net trained by tools/crema with two test nets and a step learning rate, read back and
// checked against what a regular-expression scan of the same file finds.
class CremaTrainLogTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir;
    test::WriteRandomDatums(dir_->file("db"), 64, 4, 4, 4, 31);
    std::ofstream(dir_->file("net.prototxt"))
        << "name: 'tiny'\n"
           "layer { name: 'data' type: 'Data' top: 'data' top: 'label'\n"
           "  data_param { source: '"
        << dir_->file("db")
        << "' batch_size: 8 backend: LMDB }\n"
           "  transform_param { scale: 0.00390625 } }\n"
           "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip'\n"
           "  inner_product_param { num_output: 4 weight_filler { type: 'xavier' } } }\n"
           "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }\n"
           "layer { name: 'accuracy' type: 'Accuracy' bottom: 'ip' bottom: 'label' top: 'accuracy'\n"
           "  include { phase: TEST } }\n"
           "layer { name: 'top2' type: 'Accuracy' bottom: 'ip' bottom: 'label' top: 'top2'\n"
           "  accuracy_param { top_k: 2 } include { phase: TEST stage: 'second' } }\n";
    std::ofstream(dir_->file("solver.prototxt")) << "net: '" << dir_->file("net.prototxt") << "'\n"
                                                 << "test_iter: 2 test_iter: 3\n"
                                                    "test_state { } test_state { stage: 'second' }\n"
                                                    "test_interval: 20\n"
                                                    "base_lr: 0.5 lr_policy: 'step' gamma: 0.1 stepsize: 25\n"
                                                    "display: 5 max_iter: 60\n"
                                                    "snapshot_after_train: false\n"
                                                    "solver_mode: CPU random_seed: 3\n";
    std::string output;
    const auto start = std::chrono::steady_clock::now();
    status_ = test::RunCommand(
        test::ToolsDir() + "/crema train --solver=" + dir_->file("solver.prototxt") + " > " + dir_->file("train.log"),
        &output);
    wall_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  static void TearDownTestSuite() { delete dir_; }

  void SetUp() override {
    ASSERT_EQ(status_, 0) << test::FileBytes(dir_->file("train.log"));
    text_ = test::FileBytes(dir_->file("train.log"));
  }

  static test::TempDir* dir_;
  static int status_;
  static double wall_seconds_;
  std::string text_;
};
test::TempDir* CremaTrainLogTest::dir_ = nullptr;
int CremaTrainLogTest::status_ = -1;
double CremaTrainLogTest::wall_seconds_ = 0;

TEST_F(CremaTrainLogTest, ParsedValuesAreTheLinesOfTheLog) {
  // The scan: each kind of line by its own expression.
  const std::regex loss_line(R"(Iteration (\d+), loss = (\S+))");
  const std::regex rate_line(R"(Iteration (\d+), lr = (\S+))");
  const std::regex testing_line(R"(Iteration (\d+), Testing net \(#(\d+)\))");
  const std::regex test_output(R"(Test net output #(\d+): (\S+) = (\S+))");
  const std::regex train_output(R"(Train net output #(\d+): (\S+) = (\S+))");
  std::vector<std::pair<long, double>> losses, rates, train_losses;
  std::map<int, std::vector<std::pair<long, std::vector<double>>>> tests;
  int net = -1;
  long iteration = -1;
  std::istringstream lines(text_);
  std::string line;
  std::smatch match;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, match, loss_line)) {
      losses.emplace_back(std::stol(match[1]), std::stod(match[2]));
    } else if (std::regex_search(line, match, rate_line)) {
      rates.emplace_back(std::stol(match[1]), std::stod(match[2]));
    } else if (std::regex_search(line, match, testing_line)) {
      iteration = std::stol(match[1]);
      net = std::stoi(match[2]);
      tests[net].emplace_back(iteration, std::vector<double>());
    } else if (std::regex_search(line, match, test_output)) {
      tests[net].back().second.push_back(std::stod(match[3]));
    } else if (std::regex_search(line, match, train_output)) {
      train_losses.emplace_back(losses.back().first, std::stod(match[3]));
    }
  }
  // 60 iterations shown every 5, and once more after the last; tests at 0, 20, 40 and 60; the rate at each
  // displayed update.
  ASSERT_EQ(losses.size(), 13u);
  ASSERT_EQ(rates.size(), 12u);
  ASSERT_EQ(tests.size(), 2u);
  ASSERT_EQ(tests[0].size(), 4u);
  ASSERT_EQ(tests[1].size(), 4u);

  const TrainingLog log = ReadTrainingLog(dir_->file("train.log"));
  ASSERT_EQ(log.losses.size(), losses.size());
  for (size_t i = 0; i < losses.size(); ++i) {
    EXPECT_EQ(log.losses[i].iteration, losses[i].first);
    EXPECT_DOUBLE_EQ(log.losses[i].value, losses[i].second);
    ASSERT_TRUE(log.losses[i].seconds);
    if (i > 0) {
      EXPECT_GE(*log.losses[i].seconds, *log.losses[i - 1].seconds);
    }
  }
  // Times since the first line: within the run's own length.
  EXPECT_LE(*log.losses.back().seconds, wall_seconds_ + 1.0);
  ASSERT_EQ(log.learning_rates.size(), rates.size());
  for (size_t i = 0; i < rates.size(); ++i) {
    EXPECT_EQ(log.learning_rates[i].iteration, rates[i].first);
    EXPECT_DOUBLE_EQ(log.learning_rates[i].value, rates[i].second);
  }
  ASSERT_EQ(log.train.rows.size(), train_losses.size());
  for (size_t i = 0; i < train_losses.size(); ++i) {
    EXPECT_EQ(log.train.rows[i].iteration, train_losses[i].first);
    EXPECT_DOUBLE_EQ(*log.train.rows[i].values[0], train_losses[i].second);
    // The step policy: 0.5 before iteration 25, 0.05 before 50, then 0.005.
    const double expected_rate = train_losses[i].first < 25 ? 0.5 : train_losses[i].first < 50 ? 0.05 : 0.005;
    EXPECT_NEAR(*log.train.rows[i].learning_rate, expected_rate, expected_rate * 1e-5) << train_losses[i].first;
  }
  ASSERT_EQ(log.tests.size(), 2u);
  // In the order the net's outputs come: the loss layer's top first.
  EXPECT_EQ(log.tests[0].outputs, std::vector<std::string>({"loss", "accuracy"}));
  EXPECT_EQ(log.tests[1].outputs, std::vector<std::string>({"loss", "accuracy", "top2"}));
  for (int t = 0; t < 2; ++t) {
    ASSERT_EQ(log.tests[t].rows.size(), tests[t].size());
    for (size_t r = 0; r < tests[t].size(); ++r) {
      EXPECT_EQ(log.tests[t].rows[r].iteration, tests[t][r].first);
      ASSERT_EQ(log.tests[t].rows[r].values.size(), tests[t][r].second.size());
      for (size_t c = 0; c < tests[t][r].second.size(); ++c)
        EXPECT_DOUBLE_EQ(*log.tests[t].rows[r].values[c], tests[t][r].second[c]) << t << " " << r << " " << c;
    }
  }
}

TEST_F(CremaTrainLogTest, ParseLogWritesTablesThatReadBack) {
  test::TempDir out;
  std::string output;
  ASSERT_EQ(test::RunCommand(test::ToolsDir() + "/parse_log " + dir_->file("train.log") + " " + out.path(), &output), 0)
      << output;
  const TrainingLog log = ReadTrainingLog(dir_->file("train.log"));
  const std::vector<std::pair<std::string, const LogTable*>> files = {
      {"train.log.train", &log.train}, {"train.log.test", &log.tests[0]}, {"train.log.test1", &log.tests[1]}};
  for (const auto& [name, table] : files) {
    const std::string csv = test::FileBytes(out.file(name));
    EXPECT_EQ(csv, LogTableToCsv(*table)) << name;
    const LogTable back = LogTableFromCsv(csv, name);
    EXPECT_EQ(back.outputs, table->outputs);
    ASSERT_EQ(back.rows.size(), table->rows.size());
    for (size_t r = 0; r < back.rows.size(); ++r) {
      EXPECT_EQ(back.rows[r].iteration, table->rows[r].iteration);
      EXPECT_EQ(back.rows[r].values, table->rows[r].values);
      EXPECT_EQ(back.rows[r].learning_rate, table->rows[r].learning_rate);
    }
  }
  EXPECT_NE(output.find("train.log.test1 (4 rows)"), std::string::npos) << output;

  ASSERT_EQ(test::RunCommand(
                test::ToolsDir() + "/parse_log --delimiter=tab " + dir_->file("train.log") + " " + out.path(), &output),
            0)
      << output;
  EXPECT_EQ(test::FileBytes(out.file("train.log.test")), LogTableToCsv(log.tests[0], '\t'));
}

TEST_F(CremaTrainLogTest, PlotTrainingLogDrawsEveryOutput) {
  const TrainingLog log = ReadTrainingLog(dir_->file("train.log"));
  const Chart chart = TrainingLogChart({{"train.log", log}}, LogAxis::kIterations);
  ASSERT_EQ(chart.panels.size(), 3u);
  std::vector<std::string> labels;
  for (const auto& panel : chart.panels)
    for (const auto& series : panel.series) labels.push_back(series.label);
  EXPECT_EQ(labels, std::vector<std::string>({"train loss", "test loss", "test#1 loss", "test accuracy",
                                              "test#1 accuracy", "test#1 top2", ""}));
  EXPECT_EQ(chart.panels[0].series[0].y.size(), log.losses.size());
  EXPECT_EQ(chart.panels[1].y_label, "outputs");
  // The rate falls from 0.5 to 0.005: a logarithmic axis.
  EXPECT_TRUE(chart.panels[2].log_y);
  EXPECT_EQ(chart.title, "Training log: train.log");

  test::TempDir out;
  std::string output;
  const std::string tool = test::ToolsDir() + "/plot_training_log ";
  ASSERT_EQ(test::RunCommand(tool + dir_->file("train.log") + " " + out.file("chart.svg"), &output), 0) << output;
  const std::string svg = test::FileBytes(out.file("chart.svg"));
  for (const char* text : {">train loss</text>", ">test#1 top2</text>", ">learning rate (log scale)</text>",
                           ">iterations</text>", ">Training log: train.log</text>"})
    EXPECT_NE(svg.find(text), std::string::npos) << text;
  ASSERT_EQ(test::RunCommand(tool + "--x=seconds " + dir_->file("train.log") + " " + out.file("chart.svg"), &output),
            0);
  EXPECT_NE(test::FileBytes(out.file("chart.svg")).find(">seconds</text>"), std::string::npos);
  if (PngChartsAvailable()) {
    ASSERT_EQ(test::RunCommand(tool + dir_->file("train.log") + " " + out.file("chart.png"), &output), 0) << output;
    EXPECT_EQ(test::FileBytes(out.file("chart.png")).substr(1, 3), "PNG");
  }

  // Two runs on one chart, and their merged table.
  const std::string second = out.file("again.log");
  std::ofstream(second) << text_;
  ASSERT_EQ(test::RunCommand(tool + dir_->file("train.log") + " " + second + " " + out.file("both.csv"), &output), 0)
      << output;
  const std::string csv = test::FileBytes(out.file("both.csv"));
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "Log,NumIters,Seconds,LearningRate,loss,train loss,test loss,test accuracy,test#1 loss,"
            "test#1 accuracy,test#1 top2");
  // Every iteration that printed something, once per log: 0, 5, ..., 60.
  size_t rows = 0;
  for (char c : csv) rows += c == '\n';
  EXPECT_EQ(rows, 1 + 2 * 13u);
  EXPECT_NE(csv.find("\nagain.log,60,"), std::string::npos);
  const Chart both = TrainingLogChart({{"train.log", log}, {"again.log", log}}, LogAxis::kIterations);
  EXPECT_EQ(both.panels[0].series[0].label, "train.log: train loss");
  EXPECT_EQ(both.title, "Training logs: train.log, again.log");
}

TEST(TrainingLogToolsTest, ErrorsNameWhatIsWrong) {
  test::TempDir dir;
  std::string output;
  const std::string tools = test::ToolsDir();
  EXPECT_EQ(test::RunCommand(tools + "/parse_log " + dir.file("missing.log") + " " + dir.path(), &output), 1);
  EXPECT_NE(output.find("parse_log: error: cannot read the log '" + dir.file("missing.log") + "'"), std::string::npos)
      << output;
  std::ofstream(dir.file("empty.log")) << "nothing to see\n";
  EXPECT_EQ(test::RunCommand(tools + "/parse_log " + dir.file("empty.log") + " " + dir.file("nowhere"), &output), 1);
  EXPECT_NE(output.find("'" + dir.file("nowhere") + "' does not exist"), std::string::npos) << output;
  EXPECT_EQ(test::RunCommand(tools + "/parse_log --delimiter=ab " + dir.file("empty.log") + " " + dir.path(), &output),
            1);
  EXPECT_NE(output.find("--delimiter"), std::string::npos) << output;
  // A log without a single line parse_log reads gives header-only tables.
  ASSERT_EQ(test::RunCommand(tools + "/parse_log " + dir.file("empty.log") + " " + dir.path(), &output), 0) << output;
  EXPECT_EQ(test::FileBytes(dir.file("empty.log.test")), "NumIters,Seconds,LearningRate\n");

  EXPECT_EQ(test::RunCommand(tools + "/plot_training_log " + dir.file("empty.log") + " " + dir.file("p.svg"), &output),
            1);
  EXPECT_NE(output.find("plot_training_log: error: "), std::string::npos) << output;
  EXPECT_NE(output.find("empty.log prints no losses"), std::string::npos) << output;
  std::ofstream(dir.file("one.log")) << "Iteration 0, loss = 1\nIteration 1, loss = 0.5\n";
  EXPECT_EQ(test::RunCommand(tools + "/plot_training_log " + dir.file("one.log") + " " + dir.file("p.jpg"), &output),
            1);
  EXPECT_NE(output.find(dir.file("p.jpg") + ": cannot tell the chart's format"), std::string::npos) << output;
  EXPECT_EQ(test::RunCommand(tools + "/plot_training_log --x=hours " + dir.file("one.log") + " " + dir.file("p.svg"),
                             &output),
            1);
  EXPECT_NE(output.find("--x must be iters or seconds"), std::string::npos) << output;
}

}  // namespace
}  // namespace crema
