// upgrade_net_proto_text: a net prototxt in any of Caffe's legacy forms (V0, V1, deprecated data-layer and
// BatchNorm fields, net-level inputs) written again in today's form; Caffe's tool, with its usage.
//
//   upgrade_net_proto_text NET_IN NET_OUT
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>

#include "io/proto_io.hpp"
#include "net/upgrade.hpp"

int main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  gflags::SetUsageMessage(
      "rewrites a net prototxt in Caffe's legacy forms (V0, V1 `layers`, deprecated fields) in today's form\n"
      "usage: upgrade_net_proto_text NET_IN NET_OUT");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  if (argc != 3) {
    std::fprintf(stderr, "%s\n", gflags::ProgramUsage());
    return 1;
  }
  try {
    crema::NetParameter net;
    crema::ReadProtoFromTextFile(argv[1], &net);
    if (crema::NetNeedsUpgrade(net, crema::NetInputs::kIntoInputLayer)) {
      for (const auto& notice : crema::UpgradeLegacyNet(&net, argv[1], crema::NetInputs::kIntoInputLayer))
        LOG(INFO) << notice;
    } else {
      LOG(INFO) << "File already in latest proto format: " << argv[1];
    }
    crema::WriteProtoToTextFile(net, argv[2]);
    LOG(INFO) << "Wrote upgraded NetParameter text proto to " << argv[2];
    return 0;
  } catch (const crema::Error& error) {
    std::fprintf(stderr, "upgrade_net_proto_text: error: %s\n", error.what());
    return 1;
  }
}
