// The mean image of a database of Datum records (compute_image_mean): what a Data layer's
// transform_param.mean_file subtracts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/common.hpp"

namespace crema {

struct ImageMean {
  BlobProto mean;       // 1 x channels x height x width, in Caffe's legacy num/channels/height/width fields
  int64_t records = 0;  // how many Datums were averaged
};

// Averages every Datum of the database (encoded ones decoded as stored), value by value, in double. Throws
// naming the database when it cannot be opened or is empty, and naming the record's key when a record is not a
// Datum or its shape differs from the first record's (both shapes named).
ImageMean ComputeImageMean(DataParameter::DB backend, const std::string& path);

// The mean of each channel of a mean image (what compute_image_mean prints).
std::vector<double> ChannelMeans(const BlobProto& mean);

}  // namespace crema
