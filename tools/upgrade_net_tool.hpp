// upgrade_net_proto_text and upgrade_net_proto_binary: one program in two file forms, Caffe's two tools.
#pragma once

#include <glog/logging.h>

#include <string>
#include <vector>

#include "io/proto_io.hpp"
#include "net/upgrade.hpp"
#include "tools/tool_main.hpp"

namespace crema {

enum class ProtoForm { kText, kBinary };

inline int UpgradeNetTool(int argc, char** argv, ProtoForm form) {
  const bool text = form == ProtoForm::kText;
  const ToolUsage usage =
      text ? ToolUsage{"upgrade_net_proto_text",
                       "rewrites a net prototxt in Caffe's legacy forms (V0, V1 `layers`, deprecated fields) in "
                       "today's form\nusage: upgrade_net_proto_text NET_IN NET_OUT",
                       2, 2}
           : ToolUsage{"upgrade_net_proto_binary",
                       "rewrites a binary net (.caffemodel, weights kept) in Caffe's legacy forms (V0, V1 `layers`, "
                       "deprecated\nfields) in today's form\nusage: upgrade_net_proto_binary NET_IN NET_OUT",
                       2, 2};
  return RunTool(argc, argv, usage, [text](const std::vector<std::string>& arguments) {
    NetParameter net;
    if (text) {
      ReadProtoFromTextFile(arguments[0], &net);
    } else {
      ReadProtoFromBinaryFile(arguments[0], &net);
    }
    if (NetNeedsUpgrade(net, NetInputs::kIntoInputLayer)) {
      for (const auto& notice : UpgradeLegacyNet(&net, arguments[0], NetInputs::kIntoInputLayer)) LOG(INFO) << notice;
    } else {
      LOG(INFO) << "File already in latest proto format: " << arguments[0];
    }
    if (text) {
      WriteProtoToTextFile(net, arguments[1]);
    } else {
      WriteProtoToBinaryFile(net, arguments[1]);
    }
    LOG(INFO) << "Wrote upgraded NetParameter " << (text ? "text" : "binary") << " proto to " << arguments[1];
    return 0;
  });
}

}  // namespace crema
