// Training logs as tables (parse_log, plot_training_log): what `crema train` and Caffe print, read back into
// the iterations, times, learning rates and net outputs they report.
//
// The lines read (anywhere in a line, so prefixes such as mpirun's "[1,0]<stderr>:" do not matter):
//   Iteration N, loss = X                 the displayed training loss (smoothed over average_loss iterations);
//                                         Caffe's "Iteration N (R iter/s, Ss/K iters), loss = X" too
//   Iteration N, lr = X                   the learning rate of iteration N
//   Iteration N, Testing net (#t)         test net t starts a test pass at iteration N
//   Train net output #k: name = v [(* w = x loss)]
//   Test net output #k: name = v [(* w = x loss)]
// Times come from glog's line prefix, which glog before 0.6 writes without the year ("I1122 10:31:07.123456")
// and glog 0.6 and later with it ("I20261122 10:31:07.123456"); both are read, also mixed in one file.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "core/common.hpp"
#include "tools/lib/chart.hpp"

namespace crema {

// The time in a glog line prefix. year is 0 where the line does not carry one.
struct LogTimestamp {
  int year = 0;
  int month = 0;
  int day = 0;
  double seconds_of_day = 0;
};
// Reads the glog prefix ([IWEF] then MMDD or YYYYMMDD, a space, HH:MM:SS[.ffffff]) at the start of `line`
// (leading spaces and a prefix such as "[1,0]<stderr>:" skipped). False when the line has none.
bool ParseGlogTimestamp(const std::string& line, LogTimestamp* stamp);

// A value the log printed at some iteration ("Iteration N, loss = X", "Iteration N, lr = X").
struct LogPoint {
  int64_t iteration = 0;
  std::optional<double> seconds;  // since the log's first timestamped line; absent where the line had no time
  double value = 0;
};

// One of parse_log's tables: a row for each iteration at which the net printed its outputs.
struct LogTable {
  struct Row {
    int64_t iteration = 0;
    std::optional<double> seconds;
    std::optional<double> learning_rate;
    std::vector<std::optional<double>> values;  // one per output; absent where the row lacks it
  };
  // The outputs' names, in the order the log first printed them (the columns after NumIters, Seconds,
  // LearningRate). An index printed under two names, or a name under two indices, gets "name#k".
  std::vector<std::string> outputs;
  // Per output: whether the log printed it as a loss ("(* w = x loss)").
  std::vector<bool> output_is_loss;
  std::vector<Row> rows;

  // The index of the output named `name`, or -1.
  int OutputIndex(const std::string& name) const;
};

struct TrainingLog {
  LogTable train;                        // "Train net output" lines
  std::vector<LogTable> tests;           // "Test net output" lines, one table per test net (#0, #1, ...)
  std::vector<LogPoint> losses;          // "Iteration N, loss = X"
  std::vector<LogPoint> learning_rates;  // "Iteration N, lr = X"
};

// Parses a log. A row's learning rate is the one printed for its iteration, else the latest printed before
// it, else (the tests at iteration 0, which run before the first update) the first one printed. `end_year`
// is the year the log ends in, for logs whose lines carry no year (a file's modification year; the year of a
// glog file's "Log file created at:" header is used instead where present): only the lengths of Februaries
// crossed depend on it, since a line's year follows from the one before it.
TrainingLog ParseTrainingLog(std::istream& log, int end_year);
// Reads the log file at `path` (its modification year as end_year); throws naming the path when it cannot be
// read.
TrainingLog ReadTrainingLog(const std::string& path);

// A table as CSV with Caffe's parse_log columns: NumIters, Seconds, LearningRate, then one per output. Absent
// values are empty fields, a NaN a log printed is "nan"; lines end in "\n".
std::string LogTableToCsv(const LogTable& table, char delimiter = ',');
// The inverse of LogTableToCsv (output_is_loss is not stored and comes back false). Throws naming `origin`
// and the line when a field is not a number or a row has the wrong number of fields.
LogTable LogTableFromCsv(const std::string& csv, const std::string& origin, char delimiter = ',');

// Writes parse_log's files into `folder`: <name>.train and <name>.test (test net #0), and <name>.test1,
// <name>.test2 ... for the further test nets. Returns the paths written.
std::vector<std::string> WriteLogTables(const TrainingLog& log, const std::string& name, const std::string& folder,
                                        char delimiter = ',');

// A log with the name it is shown under (a file's base name).
struct NamedTrainingLog {
  std::string name;
  TrainingLog log;
};

// Every log's values as one CSV (plot_training_log's .csv): a row per log and iteration, with columns Log,
// NumIters, Seconds, LearningRate, "loss" (the displayed loss), "train <output>" and "test <output>"
// ("test#1 <output>" for test net #1, ...), the union over all logs.
std::string MergedLogCsv(const std::vector<NamedTrainingLog>& logs, char delimiter = ',');

enum class LogAxis { kIterations, kSeconds };

// The chart plot_training_log draws: a panel of losses (the displayed training loss, every loss the test nets
// print, and the training net's loss outputs where it has several), a panel of the other outputs (accuracy)
// where there are any, and a panel of the learning rate (logarithmic when it spans a factor of 10 or more),
// against iterations or time. Several logs share the panels, their series named after them.
Chart TrainingLogChart(const std::vector<NamedTrainingLog>& logs, LogAxis x_axis);

}  // namespace crema
