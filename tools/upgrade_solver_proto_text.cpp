// upgrade_solver_proto_text: a solver prototxt with the deprecated solver_type enum (or nets inline in Caffe's
// legacy forms) written again in today's form; Caffe's tool, with its usage.
//
//   upgrade_solver_proto_text SOLVER_IN SOLVER_OUT
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>

#include "io/proto_io.hpp"
#include "net/upgrade.hpp"

int main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  gflags::SetUsageMessage(
      "rewrites a solver prototxt that uses solver_type (or holds legacy nets inline) in today's form\n"
      "usage: upgrade_solver_proto_text SOLVER_IN SOLVER_OUT");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  if (argc != 3) {
    std::fprintf(stderr, "%s\n", gflags::ProgramUsage());
    return 1;
  }
  try {
    crema::SolverParameter solver;
    crema::ReadProtoFromTextFile(argv[1], &solver);
    if (crema::SolverNeedsUpgrade(solver)) {
      for (const auto& notice : crema::UpgradeLegacySolver(&solver, argv[1])) LOG(INFO) << notice;
    } else {
      LOG(INFO) << "File already in latest proto format: " << argv[1];
    }
    crema::WriteProtoToTextFile(solver, argv[2]);
    LOG(INFO) << "Wrote upgraded SolverParameter text proto to " << argv[2];
    return 0;
  } catch (const crema::Error& error) {
    std::fprintf(stderr, "upgrade_solver_proto_text: error: %s\n", error.what());
    return 1;
  }
}
