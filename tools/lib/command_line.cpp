#include "tools/lib/command_line.hpp"

#include <gflags/gflags.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace crema {

// The name among `candidates` that `name` most likely misspells (edit distance, with '-' read as '_'; a name
// that a candidate starts with counts too), or "" when none is near enough. Where two are as near, the one
// listed first wins.
std::string NearestName(const std::string& name, const std::vector<std::string>& candidates) {
  std::string typed = name;
  std::replace(typed.begin(), typed.end(), '-', '_');
  const auto distance = [](const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t above = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diagonal = above;
      }
    }
    return row[b.size()];
  };
  // Short names are too easily "near" anything: one edit for up to 4 letters, two beyond, three beyond 8.
  const size_t allowed = typed.size() <= 4 ? 1 : typed.size() <= 8 ? 2 : 3;
  std::string best;
  size_t best_distance = allowed + 1;
  for (const auto& candidate : candidates) {
    size_t d = distance(typed, candidate);
    if (typed.size() >= 3 && candidate.compare(0, typed.size(), typed) == 0) d = std::min<size_t>(d, 1);
    if (d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

namespace {

// gflags' own flags that act rather than set (help, version, reading flags from elsewhere): left to gflags.
bool IsGflagsAction(const std::string& name) {
  for (const char* action : {"help", "helpfull", "helpshort", "helpxml", "helpon", "helpmatch", "helppackage",
                             "version", "flagfile", "fromenv", "tryfromenv", "undefok"})
    if (name == action) return true;
  return false;
}

// What a value of a gflags type must look like, for the message when it does not.
std::string ExpectedValue(const gflags::CommandLineFlagInfo& info, const std::string& value) {
  if (info.type == "bool") return "is not true or false";
  if (info.type == "double") return "is not a number";
  if (info.type == "string") return "is refused";
  const bool is_unsigned = info.type[0] == 'u';
  errno = 0;
  char* end = nullptr;
  std::strtoll(value.c_str(), &end, 10);
  const bool integer = !value.empty() && end != value.c_str() && *end == '\0';
  if (integer && errno != ERANGE && !(is_unsigned && value.find('-') != std::string::npos))
    return "is out of the range of a " + info.type.substr(is_unsigned ? 4 : 3) + "-bit integer";
  return is_unsigned ? "is not a non-negative integer" : "is not an integer";
}

}  // namespace

// Checks every flag in argv[1..argc) against the flags defined, before gflags parses them (gflags would print
// its own "ERROR: unknown command line flag" and exit). Throws crema::Error for the first flag that is unknown
// ("unknown flag --solvr (did you mean --solver?)"), lacks its value, or has a value of the wrong type
// ("--iterations='abc' is not an integer"). Flags defined in a file whose path holds `own_file` are suggested
// before others. With a help or version flag on the line nothing is checked: gflags answers it.
void CheckCommandLineFlags(int argc, char** argv, const std::string& own_file) {
  std::vector<std::string> own, others;
  {
    std::vector<gflags::CommandLineFlagInfo> flags;
    gflags::GetAllFlags(&flags);
    for (const auto& flag : flags)
      (flag.filename.find(own_file) != std::string::npos ? own : others).push_back(flag.name);
  }
  std::vector<std::string> known = own;
  known.insert(known.end(), others.begin(), others.end());

  struct Given {
    std::string name, value;
    bool has_value;
    gflags::CommandLineFlagInfo info;
  };
  std::vector<Given> given;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;  // what follows are arguments, even where they start with '-'
    if (arg.size() < 2 || arg[0] != '-') continue;
    const std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    const size_t equals = body.find('=');
    Given flag{body.substr(0, equals),
               equals == std::string::npos ? "" : body.substr(equals + 1),
               equals != std::string::npos,
               {}};
    if (IsGflagsAction(flag.name)) return;
    if (!gflags::GetCommandLineFlagInfo(flag.name.c_str(), &flag.info)) {
      // --nofoo is --foo=false for a true/false flag.
      gflags::CommandLineFlagInfo negated;
      if (flag.name.compare(0, 2, "no") == 0 && gflags::GetCommandLineFlagInfo(flag.name.substr(2).c_str(), &negated) &&
          negated.type == "bool") {
        CREMA_CHECK(!flag.has_value) << "--" << flag.name << " takes no value; write --" << negated.name << "="
                                     << flag.value;
        continue;
      }
      const std::string nearest = NearestName(flag.name, known);
      CREMA_FAIL() << "unknown flag --" << flag.name
                   << (nearest.empty() ? " (" + std::string(argv[0]).substr(std::string(argv[0]).rfind('/') + 1) +
                                             " --help lists the flags)"
                                       : " (did you mean --" + nearest + "?)");
    }
    if (!flag.has_value && flag.info.type == "bool") {
      flag.value = "true";
    } else if (!flag.has_value) {
      // gflags takes the next argument as the value of --name given without '='.
      CREMA_CHECK(i + 1 < argc && std::string(argv[i + 1]).compare(0, 2, "--") != 0)
          << "--" << flag.name << " needs a value: --" << flag.name << "=VALUE";
      flag.value = argv[++i];
    }
    given.push_back(flag);
  }
  for (const auto& flag : given) {
    // gflags' own parser decides; it sets the flag, as parsing will again.
    CREMA_CHECK(!gflags::SetCommandLineOption(flag.name.c_str(), flag.value.c_str()).empty())
        << "--" << flag.name << "='" << flag.value << "' " << ExpectedValue(flag.info, flag.value);
  }
}

// The usage message, then the flags defined in the file `own_file` names, as --help shows them.
std::string UsageWithFlags(const std::string& own_file) {
  std::string text = gflags::ProgramUsage();
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  std::string listed;
  for (const auto& flag : flags)
    if (flag.filename.find(own_file) != std::string::npos) listed += gflags::DescribeOneFlag(flag);
  if (!listed.empty()) text += "\n\n  Flags:\n" + listed;
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

// A command line of the wrong shape (no command, wrong argument count): the usage on stderr, then
// "<tool>: error: <message>" as its last line. Returns the exit status, 1.
int ReportUsageError(const std::string& tool, const std::string& own_file, const std::string& message) {
  std::fputs(UsageWithFlags(own_file).c_str(), stderr);
  std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), message.c_str());
  return 1;
}

namespace {

// The positional arguments the usage line names ("IMAGES LABELS DB"), its flags left out.
std::string ArgumentNames(const ToolUsage& usage) {
  const std::string text = usage.text;
  const std::string marker = std::string("usage: ") + usage.name + " ";
  const size_t start = text.find(marker);
  if (start == std::string::npos) return "";
  const size_t from = start + marker.size();
  const std::string line = text.substr(from, text.find('\n', from) - from);
  std::string names;
  size_t position = 0;
  while (position < line.size()) {
    const size_t end = std::min(line.find(' ', position), line.size());
    const std::string word = line.substr(position, end - position);
    if (!word.empty() && word.compare(0, 2, "[-") != 0 && word != "[FLAGS]") names += (names.empty() ? "" : " ") + word;
    position = end + 1;
  }
  return names;
}

}  // namespace

std::string ArgumentCountMessage(const ToolUsage& usage, int count) {
  const auto arguments = [](int n) { return std::to_string(n) + (n == 1 ? " argument" : " arguments"); };
  std::string expected;
  if (usage.min_arguments == usage.max_arguments) {
    expected = arguments(usage.min_arguments);
  } else if (usage.max_arguments >= 1000) {
    expected = "at least " + arguments(usage.min_arguments);
  } else if (usage.max_arguments == usage.min_arguments + 1) {
    expected = std::to_string(usage.min_arguments) + " or " + arguments(usage.max_arguments);
  } else {
    expected = std::to_string(usage.min_arguments) + " to " + arguments(usage.max_arguments);
  }
  const std::string names = ArgumentNames(usage);
  return "expected " + expected + (names.empty() ? "" : " (" + names + ")") + ", got " + std::to_string(count) +
         "; see " + usage.name + " --help";
}

}  // namespace crema
