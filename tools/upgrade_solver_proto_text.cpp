// upgrade_solver_proto_text: a solver prototxt with the deprecated solver_type enum (or nets inline in Caffe's
// legacy forms) written again in today's form; Caffe's tool, with its usage.
//
//   upgrade_solver_proto_text SOLVER_IN SOLVER_OUT
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <vector>

#include "io/proto_io.hpp"
#include "net/upgrade.hpp"
#include "tools/tool_main.hpp"

int main(int argc, char** argv) {
  return crema::RunTool(
      argc, argv,
      {"upgrade_solver_proto_text",
       "rewrites a solver prototxt that uses solver_type (or holds legacy nets inline) in today's form\n"
       "usage: upgrade_solver_proto_text SOLVER_IN SOLVER_OUT",
       2, 2},
      [](const std::vector<std::string>& arguments) {
        crema::SolverParameter solver;
        crema::ReadProtoFromTextFile(arguments[0], &solver);
        if (crema::SolverNeedsUpgrade(solver)) {
          for (const auto& notice : crema::UpgradeLegacySolver(&solver, arguments[0])) LOG(INFO) << notice;
        } else {
          LOG(INFO) << "File already in latest proto format: " << arguments[0];
        }
        crema::WriteProtoToTextFile(solver, arguments[1]);
        LOG(INFO) << "Wrote upgraded SolverParameter text proto to " << arguments[1];
        return 0;
      });
}
