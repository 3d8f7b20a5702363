// What every command-line tool of crema does around its own work, in one place: glog to stderr, the usage and
// flags through gflags, every flag checked before gflags parses it (tools/lib/command_line.hpp), the number of
// positional arguments checked, and a crema::Error reported as one line, "<tool>: error: <message>", with status 1.
// `crema` itself, whose first argument is a command, has its own main but the same checks.
#pragma once

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/synced_memory.hpp"
#include "tools/lib/command_line.hpp"

namespace crema {

// Runs `body` on the positional arguments and returns the exit status it returns.
inline int RunTool(int argc, char** argv, const ToolUsage& usage,
                   const std::function<int(const std::vector<std::string>& arguments)>& body) {
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = usage.min_log_level;
  gflags::SetUsageMessage(usage.text);
  try {
    CheckCommandLineFlags(argc, argv, usage.name);
    HostMemoryLimit();  // reads CREMA_HOST_MEMORY_LIMIT: a bad value is named now, not at the first blob
  } catch (const Error& error) {
    std::fprintf(stderr, "%s: error: %s\n", usage.name, error.what());
    return 1;
  }
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  const int count = argc - 1;
  if (count < usage.min_arguments || count > usage.max_arguments)
    return ReportUsageError(usage.name, usage.name, ArgumentCountMessage(usage, count));
  try {
    return body(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const Error& error) {
    std::fprintf(stderr, "%s: error: %s\n", usage.name, error.what());
    return 1;
  }
}

}  // namespace crema
