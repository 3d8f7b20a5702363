// extract_features: the values of some blobs of a trained net, item by item, saved to databases or HDF5 files;
// Caffe's tool, with its usage (and its trailing CPU/GPU [DEVICE_ID] arguments).
//
//   extract_features [--gpu=ID] PRETRAINED_WEIGHTS NET_PROTOTXT BLOB_NAME1[,NAME2,...] SAVE_DB1[,DB2,...]
//                    NUM_MINI_BATCHES [lmdb|leveldb|hdf5] [CPU|GPU [DEVICE_ID]]
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/context.hpp"
#include "io/proto_io.hpp"
#include "net/net.hpp"
#include "tools/lib/feature_extractor.hpp"
#include "tools/tool_main.hpp"

DEFINE_string(gpu, "", "run on this GPU (an id such as 0); empty: the CPU");

namespace crema {
namespace {

// Caffe splits the comma lists without dropping empty items; an empty name is an error here instead.
std::vector<std::string> SplitNames(const std::string& text, const char* what) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    CREMA_CHECK(!item.empty()) << "the " << what << " list '" << text << "' has an empty item";
    items.push_back(item);
  }
  CREMA_CHECK(!items.empty()) << "no " << what << " given";
  return items;
}

int ParseCount(const std::string& text, const char* what, int minimum) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  CREMA_CHECK(end != text.c_str() && *end == '\0' && errno == 0 && value >= minimum && value <= INT_MAX)
      << what << " '" << text << "' is not " << (minimum > 0 ? "a positive" : "a non-negative") << " integer";
  return static_cast<int>(value);
}

int Run(const std::vector<std::string>& arguments) {
  // WEIGHTS, NET, BLOBS, OUTPUTS, NUM_MINI_BATCHES, then optionally the format and CPU/GPU [ID].
  FeatureExtraction job;
  job.blob_names = SplitNames(arguments[2], "blob name");
  job.outputs = SplitNames(arguments[3], "output");
  job.mini_batches = ParseCount(arguments[4], "NUM_MINI_BATCHES", 1);
  size_t position = 5;
  if (position < arguments.size() && arguments[position] != "CPU" && arguments[position] != "GPU")
    job.format = ParseFeatureFormat(arguments[position++]);
  int gpu = FLAGS_gpu.empty() ? -1 : ParseCount(FLAGS_gpu, "--gpu", 0);
  if (position < arguments.size()) {
    const std::string device = arguments[position++];
    CREMA_CHECK(device == "CPU" || device == "GPU") << "'" << device << "': expected CPU or GPU after the format";
    if (device == "GPU") {
      const int id = position < arguments.size() ? ParseCount(arguments[position++], "DEVICE_ID", 0) : 0;
      CREMA_CHECK(gpu < 0 || gpu == id) << "--gpu=" << gpu << " and GPU " << id << " name two devices";
      gpu = id;
    } else {
      CREMA_CHECK(gpu < 0) << "--gpu=" << gpu << " and CPU name two devices";
    }
  }
  CREMA_CHECK(position == arguments.size()) << "unexpected argument '" << arguments[position] << "'";

  const std::string weights = arguments[0], model = arguments[1];
  CREMA_CHECK(FileExists(weights)) << "weights file '" << weights << "' does not exist";
  CREMA_CHECK(FileExists(model)) << "net file '" << model << "' does not exist";
  auto context = std::make_shared<Context>(gpu < 0 ? Device::kCPU : Device::kGPU, gpu < 0 ? 0 : gpu);
  LOG(INFO) << (gpu < 0 ? std::string("Using the CPU") : "Using GPU " + std::to_string(gpu));
  Net net(model, TEST, 0, {}, context);
  const std::vector<std::string> copied = net.CopyTrainedLayersFrom(weights);
  for (const auto& layer : net.LayersNotCopied(copied))
    LOG(WARNING) << "Layer " << layer << ": not in '" << weights << "'; its parameters are its fillers'";
  ExtractFeatures(&net, job);  // which runs the passes after the weights, once it knows the blobs it reads
  return 0;
}

}  // namespace
}  // namespace crema

int main(int argc, char** argv) {
  return crema::RunTool(
      argc, argv,
      {"extract_features",
       "saves the values of blobs of a trained net, item by item, to databases or HDF5 files\n"
       "usage: extract_features [--gpu=ID] PRETRAINED_WEIGHTS NET_PROTOTXT BLOB_NAME1[,NAME2,...] "
       "SAVE_DB1[,DB2,...] NUM_MINI_BATCHES [lmdb|leveldb|hdf5] [CPU|GPU [DEVICE_ID]]\n"
       "  The net runs in the TEST phase with its own data layer, NUM_MINI_BATCHES forward passes. Each blob goes to\n"
       "  its own database (default lmdb): one Datum of float_data per item, keys 0000000000, 0000000001, ...;\n"
       "  or with hdf5 to an HDF5 file, a dataset named after the blob (items x the blob's other dims), with the\n"
       "  net's `label` blob beside it when there is one.",
       5, 8},
      [](const std::vector<std::string>& arguments) { return crema::Run(arguments); });
}
