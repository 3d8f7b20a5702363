// What every command-line tool of crema does around its own work, in one place: glog to stderr, the usage and
// flags through gflags, the number of positional arguments checked (the usage and status 1 otherwise), and a
// crema::Error reported as one line, "<tool>: error: <message>", with status 1. `crema` itself, whose first
// argument is a command, has its own main.
#pragma once

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/common.hpp"

namespace crema {

struct ToolUsage {
  const char* name;   // the program, as its messages start (and the file its flags are defined in)
  const char* text;   // what it does, then "usage: ..." lines
  int min_arguments;  // positional arguments, after the flags
  int max_arguments;
  int min_log_level = google::GLOG_INFO;  // the default of --minloglevel
};

// Runs `body` on the positional arguments and returns the exit status it returns.
inline int RunTool(int argc, char** argv, const ToolUsage& usage,
                   const std::function<int(const std::vector<std::string>& arguments)>& body) {
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = usage.min_log_level;
  gflags::SetUsageMessage(usage.text);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  const int count = argc - 1;
  if (count < usage.min_arguments || count > usage.max_arguments) {
    gflags::ShowUsageWithFlagsRestrict(argv[0], usage.name);
    return 1;
  }
  try {
    return body(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const Error& error) {
    std::fprintf(stderr, "%s: error: %s\n", usage.name, error.what());
    return 1;
  }
}

}  // namespace crema
