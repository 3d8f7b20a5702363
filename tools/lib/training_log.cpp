#include "tools/lib/training_log.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "io/proto_io.hpp"

namespace crema {

namespace {

// Days since 1970-01-01 of a date in the proleptic Gregorian calendar (years counted from March, so that the
// leap day ends a year).
int64_t DaysSinceEpoch(int year, int month, int day) {
  const int64_t y = year - (month <= 2 ? 1 : 0);
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t year_of_era = y - era * 400;
  const int64_t day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
  const int64_t day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + day_of_era - 719468;
}

double SecondsSinceEpoch(int year, const LogTimestamp& stamp) {
  return static_cast<double>(DaysSinceEpoch(year, stamp.month, stamp.day)) * 86400.0 + stamp.seconds_of_day;
}

// The times of a log's timestamped lines, in seconds on one clock. A line without a year takes the year that
// puts it closest to the line before it: a new year starts where December turns to January, and a line that
// a second thread wrote a moment earlier than the one before it keeps the old year.
std::vector<double> ResolveTimes(const std::vector<LogTimestamp>& stamps, int start_year, int* end_year) {
  std::vector<double> times;
  times.reserve(stamps.size());
  int year = start_year;
  for (const LogTimestamp& stamp : stamps) {
    if (stamp.year != 0) {
      year = stamp.year;
      times.push_back(SecondsSinceEpoch(year, stamp));
      continue;
    }
    if (!times.empty()) {
      int best = year;
      double best_distance = std::numeric_limits<double>::infinity();
      for (int candidate = year - 1; candidate <= year + 1; ++candidate) {
        const double distance = std::fabs(SecondsSinceEpoch(candidate, stamp) - times.back());
        if (distance < best_distance) best = candidate, best_distance = distance;
      }
      year = best;
    }
    times.push_back(SecondsSinceEpoch(year, stamp));
  }
  *end_year = year;
  return times;
}

bool ReadDigits(const std::string& text, size_t* pos, size_t count, int* value) {
  if (*pos + count > text.size()) return false;
  int result = 0;
  for (size_t i = 0; i < count; ++i) {
    const char c = text[*pos + i];
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    result = result * 10 + (c - '0');
  }
  *pos += count;
  *value = result;
  return true;
}

bool ParseStampAt(const std::string& line, size_t pos, LogTimestamp* stamp) {
  ++pos;  // the severity letter
  size_t digits = 0;
  while (pos + digits < line.size() && std::isdigit(static_cast<unsigned char>(line[pos + digits]))) ++digits;
  LogTimestamp parsed;
  if (digits == 8) {
    if (!ReadDigits(line, &pos, 4, &parsed.year)) return false;
  } else if (digits != 4) {
    return false;
  }
  int hours = 0, minutes = 0, seconds = 0;
  if (!ReadDigits(line, &pos, 2, &parsed.month) || !ReadDigits(line, &pos, 2, &parsed.day)) return false;
  if (pos >= line.size() || line[pos] != ' ') return false;
  ++pos;
  if (!ReadDigits(line, &pos, 2, &hours) || pos >= line.size() || line[pos++] != ':') return false;
  if (!ReadDigits(line, &pos, 2, &minutes) || pos >= line.size() || line[pos++] != ':') return false;
  if (!ReadDigits(line, &pos, 2, &seconds)) return false;
  double fraction = 0;
  if (pos < line.size() && line[pos] == '.') {
    double scale = 0.1;
    for (++pos; pos < line.size() && std::isdigit(static_cast<unsigned char>(line[pos])); ++pos, scale /= 10)
      fraction += (line[pos] - '0') * scale;
  }
  if (parsed.month < 1 || parsed.month > 12 || parsed.day < 1 || parsed.day > 31 || hours > 23 || minutes > 59 ||
      seconds > 60)
    return false;
  parsed.seconds_of_day = hours * 3600.0 + minutes * 60.0 + seconds + fraction;
  *stamp = parsed;
  return true;
}

// The number at `pos` (a C-locale double: also "nan", "-nan", "inf"); false where there is none.
bool ReadNumber(const std::string& text, size_t pos, double* value, size_t* end = nullptr) {
  if (pos >= text.size()) return false;
  const char* start = text.c_str() + pos;
  char* stop = nullptr;
  const double parsed = std::strtod(start, &stop);
  if (stop == start) return false;
  *value = parsed;
  if (end) *end = pos + static_cast<size_t>(stop - start);
  return true;
}

bool ReadInteger(const std::string& text, size_t* pos, int64_t* value) {
  size_t end = *pos;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
  if (end == *pos || end - *pos > 18) return false;
  *value = std::stoll(text.substr(*pos, end - *pos));
  *pos = end;
  return true;
}

bool StartsWithAt(const std::string& text, size_t pos, const char* prefix) {
  return text.compare(pos, std::char_traits<char>::length(prefix), prefix) == 0;
}

// "#k: name = v [(* w = x loss)]" after a "Train net output " or "Test net output ".
struct OutputLine {
  int64_t index = 0;
  std::string name;
  double value = 0;
  bool is_loss = false;
};
bool ParseOutput(const std::string& line, size_t pos, OutputLine* output) {
  if (!StartsWithAt(line, pos, "#")) return false;
  ++pos;
  if (!ReadInteger(line, &pos, &output->index) || !StartsWithAt(line, pos, ": ")) return false;
  pos += 2;
  const size_t equals = line.find(" = ", pos);
  if (equals == std::string::npos || equals == pos) return false;
  output->name = line.substr(pos, equals - pos);
  size_t end = 0;
  if (!ReadNumber(line, equals + 3, &output->value, &end)) return false;
  output->is_loss = line.find(" loss)", end) != std::string::npos;
  return true;
}

// A table being filled: its columns keyed by (output index, name), the row open for more outputs, and the
// timestamp (an index into the log's stamps) of each row.
struct TableBuilder {
  LogTable table;
  std::map<std::pair<int64_t, std::string>, int> columns;
  int open_row = -1;
  std::vector<int> row_stamps;

  void Add(int64_t iteration, int stamp, const OutputLine& output) {
    const auto key = std::make_pair(output.index, output.name);
    auto found = columns.find(key);
    if (found == columns.end()) {
      std::string label = output.name;
      if (table.OutputIndex(label) >= 0) label += "#" + std::to_string(output.index);
      found = columns.emplace(key, static_cast<int>(table.outputs.size())).first;
      table.outputs.push_back(label);
      table.output_is_loss.push_back(output.is_loss);
    }
    const int column = found->second;
    if (open_row >= 0) {
      const LogTable::Row& row = table.rows[open_row];
      if (row.iteration != iteration || (column < static_cast<int>(row.values.size()) && row.values[column]))
        open_row = -1;
    }
    if (open_row < 0) {
      open_row = static_cast<int>(table.rows.size());
      table.rows.emplace_back();
      table.rows.back().iteration = iteration;
      row_stamps.push_back(stamp);
    }
    auto& values = table.rows[open_row].values;
    if (static_cast<int>(values.size()) <= column) values.resize(column + 1);
    values[column] = output.value;
  }
};

// The learning rate printed for `iteration`, else the latest before it, else the first printed.
std::optional<double> RateAt(const std::map<int64_t, double>& rates, int64_t iteration) {
  if (rates.empty()) return std::nullopt;
  auto after = rates.upper_bound(iteration);
  if (after == rates.begin()) return rates.begin()->second;
  return std::prev(after)->second;
}

// Numbers as the shortest text that reads back as the same double; a NaN as "nan".
std::string FormatNumber(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[40];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

std::string FormatOptional(const std::optional<double>& value) { return value ? FormatNumber(*value) : ""; }

std::string FormatSeconds(const std::optional<double>& seconds) {
  if (!seconds) return "";
  char text[40];
  std::snprintf(text, sizeof(text), "%.6f", *seconds);
  return text;
}

std::vector<std::string> SplitFields(const std::string& line, char delimiter) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    const size_t end = line.find(delimiter, start);
    fields.push_back(line.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return fields;
}

int YearOfFile(const std::string& path) {
  struct stat info;
  time_t when = std::time(nullptr);
  if (stat(path.c_str(), &info) == 0) when = info.st_mtime;
  struct tm local;
  localtime_r(&when, &local);
  return local.tm_year + 1900;
}

std::string TestPrefix(size_t net) { return net == 0 ? "test" : "test#" + std::to_string(net); }

}  // namespace

int LogTable::OutputIndex(const std::string& name) const {
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i] == name) return static_cast<int>(i);
  return -1;
}

bool ParseGlogTimestamp(const std::string& line, LogTimestamp* stamp) {
  // The prefix may follow a launcher's own ("[1,0]<stderr>:") but not the message: look near the start only.
  const size_t limit = std::min<size_t>(line.size(), 48);
  for (size_t pos = 0; pos < limit; ++pos) {
    const char c = line[pos];
    if (c != 'I' && c != 'W' && c != 'E' && c != 'F') continue;
    if (pos > 0 && std::isalnum(static_cast<unsigned char>(line[pos - 1]))) continue;
    if (ParseStampAt(line, pos, stamp)) return true;
  }
  return false;
}

TrainingLog ParseTrainingLog(std::istream& input, int end_year) {
  TrainingLog log;
  TableBuilder train;
  std::vector<TableBuilder> tests;
  std::vector<LogTimestamp> stamps;
  std::vector<int> loss_stamps, rate_stamps;
  int header_year = 0;
  int64_t iteration = 0;
  size_t test_net = 0;
  std::string line;
  while (std::getline(input, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    int stamp = -1;
    LogTimestamp parsed;
    if (ParseGlogTimestamp(line, &parsed)) {
      stamp = static_cast<int>(stamps.size());
      stamps.push_back(parsed);
    } else if (stamps.empty()) {
      // glog's log files open with "Log file created at: 2026/11/22 10:31:07".
      const size_t created = line.find("Log file created at: ");
      if (created != std::string::npos) header_year = std::atoi(line.c_str() + created + 21);
    }

    size_t pos = line.find("Iteration ");
    if (pos != std::string::npos) {
      pos += 10;
      int64_t number = 0;
      if (ReadInteger(line, &pos, &number)) {
        iteration = number;
        // Caffe's display line: "Iteration N (R iter/s, Ss/K iters), loss = X".
        if (StartsWithAt(line, pos, " (")) {
          const size_t close = line.find(')', pos);
          if (close != std::string::npos) pos = close + 1;
        }
        double value = 0;
        if (StartsWithAt(line, pos, ", loss = ") && ReadNumber(line, pos + 9, &value)) {
          log.losses.push_back({iteration, std::nullopt, value});
          loss_stamps.push_back(stamp);
          train.open_row = -1;
        } else if (StartsWithAt(line, pos, ", lr = ") && ReadNumber(line, pos + 7, &value)) {
          log.learning_rates.push_back({iteration, std::nullopt, value});
          rate_stamps.push_back(stamp);
        } else if (StartsWithAt(line, pos, ", Testing net (#")) {
          size_t net_pos = pos + 16;
          int64_t net = 0;
          if (ReadInteger(line, &net_pos, &net) && net < 1000) {
            test_net = static_cast<size_t>(net);
            if (tests.size() <= test_net) tests.resize(test_net + 1);
            tests[test_net].open_row = -1;
          }
        }
      }
      continue;
    }
    OutputLine output;
    pos = line.find("Train net output ");
    if (pos != std::string::npos && ParseOutput(line, pos + 17, &output)) {
      train.Add(iteration, stamp, output);
      continue;
    }
    pos = line.find("Test net output ");
    if (pos != std::string::npos && ParseOutput(line, pos + 16, &output)) {
      if (tests.size() <= test_net) tests.resize(test_net + 1);
      tests[test_net].Add(iteration, stamp, output);
    }
  }

  // Years: from the header where there is one, else counted back from the year the log ends in.
  int last_year = 0;
  std::vector<double> times = ResolveTimes(stamps, header_year ? header_year : end_year, &last_year);
  if (!header_year && last_year != end_year) times = ResolveTimes(stamps, 2 * end_year - last_year, &last_year);
  const auto seconds_of = [&](int stamp) -> std::optional<double> {
    if (stamp < 0) return std::nullopt;
    return times[stamp] - times[0];
  };
  for (size_t i = 0; i < log.losses.size(); ++i) log.losses[i].seconds = seconds_of(loss_stamps[i]);
  for (size_t i = 0; i < log.learning_rates.size(); ++i) log.learning_rates[i].seconds = seconds_of(rate_stamps[i]);

  std::map<int64_t, double> rates;
  for (const LogPoint& rate : log.learning_rates) rates[rate.iteration] = rate.value;
  const auto finish = [&](TableBuilder* builder) {
    LogTable& table = builder->table;
    for (size_t r = 0; r < table.rows.size(); ++r) {
      LogTable::Row& row = table.rows[r];
      row.values.resize(table.outputs.size());
      row.seconds = seconds_of(builder->row_stamps[r]);
      row.learning_rate = RateAt(rates, row.iteration);
    }
    return std::move(table);
  };
  log.train = finish(&train);
  for (auto& test : tests) log.tests.push_back(finish(&test));
  return log;
}

TrainingLog ReadTrainingLog(const std::string& path) {
  std::ifstream file(path);
  CREMA_CHECK(file.good()) << "cannot read the log '" << path << "'";
  CREMA_CHECK(!std::filesystem::is_directory(path)) << "'" << path << "' is a folder, not a log file";
  return ParseTrainingLog(file, YearOfFile(path));
}

std::string LogTableToCsv(const LogTable& table, char delimiter) {
  std::string csv = std::string("NumIters") + delimiter + "Seconds" + delimiter + "LearningRate";
  for (const std::string& output : table.outputs) csv += delimiter + output;
  csv += '\n';
  for (const LogTable::Row& row : table.rows) {
    csv += std::to_string(row.iteration) + delimiter + FormatSeconds(row.seconds) + delimiter +
           FormatOptional(row.learning_rate);
    for (size_t i = 0; i < table.outputs.size(); ++i)
      csv += delimiter + (i < row.values.size() ? FormatOptional(row.values[i]) : "");
    csv += '\n';
  }
  return csv;
}

LogTable LogTableFromCsv(const std::string& csv, const std::string& origin, char delimiter) {
  std::istringstream lines(csv);
  std::string line;
  CREMA_CHECK(std::getline(lines, line)) << origin << ": empty; expected a header line starting NumIters";
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const std::vector<std::string> header = SplitFields(line, delimiter);
  CREMA_CHECK(header.size() >= 3 && header[0] == "NumIters" && header[1] == "Seconds" && header[2] == "LearningRate")
      << origin << ":1: expected the header NumIters" << delimiter << "Seconds" << delimiter << "LearningRate..., got '"
      << line << "'";
  LogTable table;
  table.outputs.assign(header.begin() + 3, header.end());
  table.output_is_loss.assign(table.outputs.size(), false);
  for (int number = 2; std::getline(lines, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::vector<std::string> fields = SplitFields(line, delimiter);
    CREMA_CHECK(fields.size() == header.size())
        << origin << ":" << number << ": " << fields.size() << " fields, the header has " << header.size();
    const auto number_of = [&](size_t i) -> std::optional<double> {
      if (fields[i].empty()) return std::nullopt;
      double value = 0;
      size_t end = 0;
      CREMA_CHECK(ReadNumber(fields[i], 0, &value, &end) && end == fields[i].size())
          << origin << ":" << number << ": column " << header[i] << ": '" << fields[i] << "' is not a number";
      return value;
    };
    LogTable::Row row;
    const std::optional<double> iteration = number_of(0);
    CREMA_CHECK(iteration) << origin << ":" << number << ": NumIters is empty";
    row.iteration = static_cast<int64_t>(*iteration);
    row.seconds = number_of(1);
    row.learning_rate = number_of(2);
    for (size_t i = 3; i < fields.size(); ++i) row.values.push_back(number_of(i));
    table.rows.push_back(std::move(row));
  }
  return table;
}

std::vector<std::string> WriteLogTables(const TrainingLog& log, const std::string& name, const std::string& folder,
                                        char delimiter) {
  std::error_code error;
  CREMA_CHECK(std::filesystem::is_directory(folder, error)) << "the output folder '" << folder << "' does not exist";
  std::vector<std::string> written;
  const std::string base = (std::filesystem::path(folder) / name).string();
  WriteStringToFileAtomically(LogTableToCsv(log.train, delimiter), base + ".train");
  written.push_back(base + ".train");
  const size_t tests = std::max<size_t>(1, log.tests.size());
  for (size_t t = 0; t < tests; ++t) {
    const std::string path = base + ".test" + (t == 0 ? "" : std::to_string(t));
    WriteStringToFileAtomically(LogTableToCsv(t < log.tests.size() ? log.tests[t] : LogTable(), delimiter), path);
    written.push_back(path);
  }
  return written;
}

std::string MergedLogCsv(const std::vector<NamedTrainingLog>& logs, char delimiter) {
  // Columns: the union over the logs, in order of first appearance.
  std::vector<std::string> columns = {"loss"};
  const auto column_of = [&](const std::string& name) -> int {
    auto found = std::find(columns.begin(), columns.end(), name);
    if (found != columns.end()) return static_cast<int>(found - columns.begin());
    columns.push_back(name);
    return static_cast<int>(columns.size()) - 1;
  };
  struct Cell {
    std::optional<double> seconds;
    std::vector<std::optional<double>> values;
  };
  std::vector<std::map<int64_t, Cell>> tables(logs.size());
  for (size_t l = 0; l < logs.size(); ++l) {
    const TrainingLog& log = logs[l].log;
    auto& rows = tables[l];
    const auto put = [&](int64_t iteration, const std::optional<double>& seconds, int column, double value) {
      Cell& cell = rows[iteration];
      if (seconds && (!cell.seconds || *seconds < *cell.seconds)) cell.seconds = seconds;
      if (static_cast<int>(cell.values.size()) <= column) cell.values.resize(column + 1);
      cell.values[column] = value;
    };
    for (const LogPoint& loss : log.losses) put(loss.iteration, loss.seconds, 0, loss.value);
    const auto put_table = [&](const LogTable& table, const std::string& prefix) {
      std::vector<int> table_columns;
      for (const std::string& output : table.outputs) table_columns.push_back(column_of(prefix + " " + output));
      for (const LogTable::Row& row : table.rows)
        for (size_t i = 0; i < row.values.size(); ++i)
          if (row.values[i]) put(row.iteration, row.seconds, table_columns[i], *row.values[i]);
    };
    put_table(log.train, "train");
    for (size_t t = 0; t < log.tests.size(); ++t) put_table(log.tests[t], TestPrefix(t));
  }
  std::string csv = std::string("Log") + delimiter + "NumIters" + delimiter + "Seconds" + delimiter + "LearningRate";
  for (const std::string& column : columns) csv += delimiter + column;
  csv += '\n';
  for (size_t l = 0; l < logs.size(); ++l) {
    std::map<int64_t, double> rates;
    for (const LogPoint& rate : logs[l].log.learning_rates) rates[rate.iteration] = rate.value;
    for (const auto& [iteration, cell] : tables[l]) {
      csv += logs[l].name + delimiter + std::to_string(iteration) + delimiter + FormatSeconds(cell.seconds) +
             delimiter + FormatOptional(RateAt(rates, iteration));
      for (size_t c = 0; c < columns.size(); ++c)
        csv += delimiter + (c < cell.values.size() ? FormatOptional(cell.values[c]) : "");
      csv += '\n';
    }
  }
  return csv;
}

Chart TrainingLogChart(const std::vector<NamedTrainingLog>& logs, LogAxis x_axis) {
  CREMA_CHECK(!logs.empty()) << "no training log to plot";
  // Seconds are shown in the unit that keeps the tick labels short.
  double longest = 0;
  for (const auto& named : logs) {
    for (const LogPoint& loss : named.log.losses)
      if (loss.seconds) longest = std::max(longest, *loss.seconds);
    for (const auto& test : named.log.tests)
      for (const auto& row : test.rows)
        if (row.seconds) longest = std::max(longest, *row.seconds);
  }
  double time_unit = 1;
  std::string x_label = "iterations";
  if (x_axis == LogAxis::kSeconds) {
    x_label = "seconds";
    if (longest > 3 * 3600.0) {
      time_unit = 3600, x_label = "hours";
    } else if (longest > 300) {
      time_unit = 60, x_label = "minutes";
    }
  }
  const auto x_of = [&](int64_t iteration, const std::optional<double>& seconds) {
    if (x_axis == LogAxis::kIterations) return static_cast<double>(iteration);
    return seconds ? *seconds / time_unit : std::numeric_limits<double>::quiet_NaN();
  };

  ChartPanel losses, outputs, rates;
  losses.y_label = "loss";
  rates.y_label = "learning rate";
  rates.relative_height = 0.55;
  std::set<std::string> output_names;
  // Each source (a log's training net, each of its test nets) has a colour of its own; a panel that shows
  // two series of one source gives the second the next free colour.
  int next_source_color = 0;
  std::map<const ChartPanel*, std::set<int>> used_colors;
  const auto add = [&](ChartPanel* panel, ChartSeries series, int source_color) {
    int color = source_color;
    while (used_colors[panel].count(color % 10) && used_colors[panel].size() < 10) ++color;
    used_colors[panel].insert(color % 10);
    series.color = SeriesColor(color);
    panel->series.push_back(std::move(series));
  };
  double lowest_rate = std::numeric_limits<double>::infinity(), highest_rate = 0;
  for (const auto& named : logs) {
    const TrainingLog& log = named.log;
    const std::string prefix = logs.size() > 1 ? named.name + ": " : "";
    const int train_color = next_source_color++;
    const auto table_series = [&](const LogTable& table, size_t column, const std::string& label) {
      ChartSeries series;
      series.label = label;
      for (const auto& row : table.rows) {
        if (!row.values[column]) continue;
        series.x.push_back(x_of(row.iteration, row.seconds));
        series.y.push_back(*row.values[column]);
      }
      return series;
    };
    const auto points_series = [&](const std::vector<LogPoint>& points, const std::string& label) {
      ChartSeries series;
      series.label = label;
      for (const LogPoint& point : points) {
        series.x.push_back(x_of(point.iteration, point.seconds));
        series.y.push_back(point.value);
      }
      return series;
    };
    int train_losses = 0;
    for (bool is_loss : log.train.output_is_loss) train_losses += is_loss;
    if (!log.losses.empty()) add(&losses, points_series(log.losses, prefix + "train loss"), train_color);
    for (size_t c = 0; c < log.train.outputs.size(); ++c) {
      const bool is_loss = log.train.output_is_loss[c];
      // A single loss output is the displayed loss again (unsmoothed): drawn only when no loss line is there.
      if (is_loss && train_losses == 1 && !log.losses.empty()) continue;
      if (!is_loss) output_names.insert(log.train.outputs[c]);
      add(is_loss ? &losses : &outputs, table_series(log.train, c, prefix + "train " + log.train.outputs[c]),
          train_color);
    }
    for (size_t t = 0; t < log.tests.size(); ++t) {
      const int test_color = next_source_color++;
      const LogTable& test = log.tests[t];
      for (size_t c = 0; c < test.outputs.size(); ++c) {
        ChartSeries series = table_series(test, c, prefix + TestPrefix(t) + " " + test.outputs[c]);
        series.markers = true;
        if (!test.output_is_loss[c]) output_names.insert(test.outputs[c]);
        add(test.output_is_loss[c] ? &losses : &outputs, std::move(series), test_color);
      }
    }
    if (!log.learning_rates.empty()) {
      ChartSeries series = points_series(log.learning_rates, prefix + "lr");
      for (const LogPoint& rate : log.learning_rates) {
        if (rate.value > 0) lowest_rate = std::min(lowest_rate, rate.value);
        highest_rate = std::max(highest_rate, rate.value);
      }
      // One log's rate needs no legend.
      if (logs.size() == 1) series.label.clear();
      add(&rates, std::move(series), train_color);
    }
  }
  rates.log_y = highest_rate > 0 && lowest_rate > 0 && highest_rate / lowest_rate >= 10;
  outputs.y_label = output_names.size() == 1 ? *output_names.begin() : "outputs";

  Chart chart;
  chart.x_label = x_label;
  for (ChartPanel* panel : {&losses, &outputs, &rates})
    if (!panel->series.empty()) chart.panels.push_back(*panel);
  std::string names;
  for (size_t l = 0; l < logs.size(); ++l) names += (l ? ", " : "") + logs[l].name;
  CREMA_CHECK(!chart.panels.empty()) << (logs.size() > 1 ? "the logs " + names + " print" : names + " prints")
                                     << " no losses, outputs or learning rates (lines such as 'Iteration N, loss = "
                                        "X' or 'Test net output #0: accuracy = 0.9')";
  chart.title = (logs.size() == 1 ? "Training log: " : "Training logs: ") + names;
  return chart;
}

}  // namespace crema
