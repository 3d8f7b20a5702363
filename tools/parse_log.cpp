// parse_log: a training log (crema's or Caffe's) as two CSV tables, as Caffe's tools/extra/parse_log.py
// writes them, for spreadsheets and plotting scripts.
//
//   parse_log [--delimiter=,] LOG OUTDIR
//
// Writes OUTDIR/<name of LOG>.train and .test (columns NumIters, Seconds, LearningRate, then one per net
// output), and .test1, .test2 ... for further test nets. Reads glog's lines with and without the year.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tools/lib/training_log.hpp"
#include "tools/tool_main.hpp"

DEFINE_string(delimiter, ",", "The column delimiter: one character, or 'tab'");

int main(int argc, char** argv) {
  return crema::RunTool(
      argc, argv,
      {"parse_log",
       "parses a training log into CSV tables of its training and test outputs\n"
       "usage: parse_log [--delimiter=,] LOG OUTDIR\n"
       "  writes OUTDIR/<LOG's name>.train and OUTDIR/<LOG's name>.test (.test1 ... for further test nets)",
       2, 2},
      [](const std::vector<std::string>& arguments) {
        const std::string delimiter = FLAGS_delimiter == "tab" ? "\t" : FLAGS_delimiter;
        CREMA_CHECK(delimiter.size() == 1 && delimiter != "\n" && delimiter != "\"")
            << "--delimiter must be one character (or 'tab'), got '" << FLAGS_delimiter << "'";
        const crema::TrainingLog log = crema::ReadTrainingLog(arguments[0]);
        const std::string name = std::filesystem::path(arguments[0]).filename().string();
        const auto written = crema::WriteLogTables(log, name, arguments[1], delimiter[0]);
        std::printf("Wrote %s (%zu rows)\n", written[0].c_str(), log.train.rows.size());
        for (size_t t = 1; t < written.size(); ++t)
          std::printf("Wrote %s (%zu rows)\n", written[t].c_str(),
                      t - 1 < log.tests.size() ? log.tests[t - 1].rows.size() : 0);
        return 0;
      });
}
