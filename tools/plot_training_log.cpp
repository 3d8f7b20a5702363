// plot_training_log: the training loss, every test output and the learning rate of one or more training logs
// against iterations or time, as a picture or as one merged table.
//
//   plot_training_log [--x=iters|seconds] LOG [LOG ...] OUT.{svg,png,csv}
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "io/proto_io.hpp"
#include "tools/lib/chart.hpp"
#include "tools/lib/training_log.hpp"
#include "tools/tool_main.hpp"

DEFINE_string(x, "iters", "What the x axis shows: iters, or seconds (since the log's first line)");

int main(int argc, char** argv) {
  return crema::RunTool(argc, argv,
                        {"plot_training_log",
                         "plots training logs: the training loss, the test outputs and the learning rate\n"
                         "usage: plot_training_log [--x=iters|seconds] LOG [LOG ...] OUT.{svg,png,csv}\n"
                         "  several logs share one chart (to compare runs); .csv writes their values as one table",
                         2, 1000000},
                        [](const std::vector<std::string>& arguments) {
                          CREMA_CHECK(FLAGS_x == "iters" || FLAGS_x == "seconds")
                              << "--x must be iters or seconds, got '" << FLAGS_x << "'";
                          const std::string output = arguments.back();
                          // Logs are named by their file names, or by their paths where two share a name (run1/log,
                          // run2/log).
                          std::vector<std::string> paths(arguments.begin(), arguments.end() - 1);
                          std::set<std::string> names, repeated;
                          for (const auto& path : paths) {
                            const std::string name = std::filesystem::path(path).filename().string();
                            if (!names.insert(name).second) repeated.insert(name);
                          }
                          std::vector<crema::NamedTrainingLog> logs;
                          for (const auto& path : paths) {
                            const std::string name = std::filesystem::path(path).filename().string();
                            logs.push_back({repeated.count(name) ? path : name, crema::ReadTrainingLog(path)});
                          }
                          const std::string extension = std::filesystem::path(output).extension().string();
                          if (extension == ".csv") {
                            crema::WriteStringToFileAtomically(crema::MergedLogCsv(logs), output);
                          } else {
                            crema::WriteChart(
                                crema::TrainingLogChart(
                                    logs, FLAGS_x == "iters" ? crema::LogAxis::kIterations : crema::LogAxis::kSeconds),
                                output);
                          }
                          std::printf("Wrote %s\n", output.c_str());
                          return 0;
                        });
}
