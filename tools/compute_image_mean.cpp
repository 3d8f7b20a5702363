// compute_image_mean: the mean image of a database of Datum records, as a .binaryproto that a Data layer's
// transform_param.mean_file reads; Caffe's tool, with its usage.
//
//   compute_image_mean [--backend=lmdb|leveldb] INPUT_DB [OUTPUT_FILE]
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>

#include "io/db.hpp"
#include "io/image_mean.hpp"
#include "io/proto_io.hpp"

DEFINE_string(backend, "lmdb", "The database to read: lmdb or leveldb");

int main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  gflags::SetUsageMessage(
      "computes the mean image of a database of Datum records\n"
      "usage: compute_image_mean [--backend=lmdb|leveldb] INPUT_DB [OUTPUT_FILE]\n"
      "  OUTPUT_FILE: the mean as a BlobProto (.binaryproto); without it the means are only printed");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  if (argc < 2 || argc > 3) {
    gflags::ShowUsageWithFlagsRestrict(argv[0], "compute_image_mean");
    return 1;
  }
  try {
    const crema::DataParameter::DB backend = crema::ParseDbBackend(FLAGS_backend);
    const crema::ImageMean result = crema::ComputeImageMean(backend, argv[1]);
    LOG(INFO) << "Processed " << result.records << " files.";
    if (argc == 3) {
      LOG(INFO) << "Write to " << argv[2];
      crema::WriteProtoToBinaryFile(result.mean, argv[2]);
    }
    const std::vector<double> means = crema::ChannelMeans(result.mean);
    for (size_t c = 0; c < means.size(); ++c) LOG(INFO) << "mean_value channel [" << c << "]: " << means[c];
    return 0;
  } catch (const crema::Error& error) {
    std::fprintf(stderr, "compute_image_mean: error: %s\n", error.what());
    return 1;
  }
}
