// upgrade_net_proto_binary: a binary net (a .caffemodel) in any of Caffe's legacy forms (V0, V1, deprecated
// data-layer and BatchNorm fields, net-level inputs) written again in today's form, its weights with their
// layers; Caffe's tool, with its usage.
//
//   upgrade_net_proto_binary NET_IN NET_OUT
#include "tools/upgrade_net_tool.hpp"

int main(int argc, char** argv) { return crema::UpgradeNetTool(argc, argv, crema::ProtoForm::kBinary); }
