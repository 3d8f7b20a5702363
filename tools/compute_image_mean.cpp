// compute_image_mean: the mean image of a database of Datum records, as a .binaryproto that a Data layer's
// transform_param.mean_file reads; Caffe's tool, with its usage.
//
//   compute_image_mean [--backend=lmdb|leveldb] INPUT_DB [OUTPUT_FILE]
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <vector>

#include "io/db.hpp"
#include "io/proto_io.hpp"
#include "tools/lib/image_mean.hpp"
#include "tools/tool_main.hpp"

DEFINE_string(backend, "lmdb", "The database to read: lmdb or leveldb");

int main(int argc, char** argv) {
  return crema::RunTool(argc, argv,
                        {"compute_image_mean",
                         "computes the mean image of a database of Datum records\n"
                         "usage: compute_image_mean [--backend=lmdb|leveldb] INPUT_DB [OUTPUT_FILE]\n"
                         "  OUTPUT_FILE: the mean as a BlobProto (.binaryproto); without it the means are only printed",
                         1, 2},
                        [](const std::vector<std::string>& arguments) {
                          const crema::DataParameter::DB backend = crema::ParseDbBackend(FLAGS_backend);
                          const crema::ImageMean result = crema::ComputeImageMean(backend, arguments[0]);
                          LOG(INFO) << "Processed " << result.records << " files.";
                          if (arguments.size() == 2) {
                            LOG(INFO) << "Write to " << arguments[1];
                            crema::WriteProtoToBinaryFile(result.mean, arguments[1]);
                          }
                          const std::vector<double> means = crema::ChannelMeans(result.mean);
                          for (size_t c = 0; c < means.size(); ++c)
                            LOG(INFO) << "mean_value channel [" << c << "]: " << means[c];
                          return 0;
                        });
}
