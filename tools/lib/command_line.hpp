// The command line of crema's tools, checked before gflags parses it: every flag known, given its value, of the
// right type (gflags would print its own "ERROR: ..." and exit); a usage error reported as the usage on stderr and
// one "<tool>: error: <message>" line. Used by tools/tool_main.hpp (RunTool) and by crema's own main.
#pragma once

#include <glog/logging.h>

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

// The name among `candidates` that `name` most likely misspells (edit distance, with '-' read as '_'; a name
// that a candidate starts with counts too), or "" when none is near enough. Where two are as near, the one
// listed first wins.
std::string NearestName(const std::string& name, const std::vector<std::string>& candidates);

// Checks every flag in argv[1..argc) against the flags defined, before gflags parses them. Throws crema::Error
// for the first flag that is unknown ("unknown flag --solvr (did you mean --solver?)"), lacks its value, or has a
// value of the wrong type ("--iterations='abc' is not an integer"). Flags defined in a file whose path holds
// `own_file` are suggested before others. With a help or version flag on the line nothing is checked: gflags
// answers it.
void CheckCommandLineFlags(int argc, char** argv, const std::string& own_file);

// The usage message, then the flags defined in the file `own_file` names, as --help shows them.
std::string UsageWithFlags(const std::string& own_file);

// A command line of the wrong shape (no command, wrong argument count): the usage on stderr, then
// "<tool>: error: <message>" as its last line. Returns the exit status, 1.
int ReportUsageError(const std::string& tool, const std::string& own_file, const std::string& message);

// "expected 3 arguments (IMAGES LABELS DB), got 0; see convert_mnist --help": the positional arguments the usage
// line names, and how many were given.
std::string ArgumentCountMessage(const ToolUsage& usage, int count);

}  // namespace crema
