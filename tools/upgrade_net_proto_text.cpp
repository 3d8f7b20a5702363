// upgrade_net_proto_text: a net prototxt in any of Caffe's legacy forms (V0, V1, deprecated data-layer and
// BatchNorm fields, net-level inputs) written again in today's form; Caffe's tool, with its usage.
//
//   upgrade_net_proto_text NET_IN NET_OUT
#include "tools/upgrade_net_tool.hpp"

int main(int argc, char** argv) { return crema::UpgradeNetTool(argc, argv, crema::ProtoForm::kText); }
