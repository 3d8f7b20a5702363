#include "io/data_transformer.hpp"

#include <glog/logging.h>

#include <cstdint>

#include "io/image_io.hpp"
#include "io/proto_io.hpp"

namespace crema {

namespace {

std::string DimsString(const std::vector<int>& dims) {
  std::string text;
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? "x" : "") + std::to_string(dims[i]);
  return text;
}

}  // namespace

DataTransformer::DataTransformer(const TransformationParameter& param, Phase phase) : param_(param), phase_(phase) {
  CREMA_CHECK(!(param_.force_color() && param_.force_gray()))
      << "transform_param: force_color and force_gray cannot both be set";
  CREMA_CHECK(!(param_.has_mean_file() && param_.mean_value_size() > 0))
      << "transform_param: give mean_file or mean_value, not both";
  if (!param_.has_mean_file()) return;

  const std::string& path = param_.mean_file();
  BlobProto proto;
  ReadProtoFromBinaryFile(path, &proto);
  const std::vector<int> shape = Blob::ShapeOf(proto);
  CREMA_CHECK((shape.size() == 4 && shape[0] == 1) || shape.size() == 3)
      << "mean file '" << path << "' holds a blob of shape " << DimsString(shape) << "; a mean image has shape 1xCxHxW";
  mean_shape_.assign(shape.end() - 3, shape.end());
  const int64_t count = int64_t{mean_shape_[0]} * mean_shape_[1] * mean_shape_[2];
  if (proto.double_data_size() > 0) {
    CREMA_CHECK(proto.double_data_size() == count) << "mean file '" << path << "' has shape " << DimsString(shape)
                                                   << " but holds " << proto.double_data_size() << " values";
    mean_.assign(proto.double_data().begin(), proto.double_data().end());
  } else {
    CREMA_CHECK(proto.data_size() == count) << "mean file '" << path << "' has shape " << DimsString(shape)
                                            << " but holds " << proto.data_size() << " values";
    mean_.assign(proto.data().begin(), proto.data().end());
  }
}

Datum DataTransformer::Decode(const Datum& datum) const {
  if (!datum.encoded()) return datum;
  const ImageColor color =
      param_.force_color() ? ImageColor::kColor : (param_.force_gray() ? ImageColor::kGray : ImageColor::kAsStored);
  return DecodeDatum(datum, color);
}

std::vector<int> DataTransformer::CheckDatum(const Datum& datum) const {
  CHECK(!datum.encoded()) << "DataTransformer: an encoded datum must be decoded first";
  const std::vector<int> dims = {datum.channels(), datum.height(), datum.width()};
  CREMA_CHECK(dims[0] > 0 && dims[1] > 0 && dims[2] > 0)
      << "a datum has shape " << DimsString(dims) << " (channels x height x width); each must be positive";
  // Three positive ints can overflow 64 bits; no record holds more than 2^31 values (protobuf's 2 GiB).
  int64_t count = 0;
  CREMA_CHECK(!__builtin_mul_overflow(int64_t{dims[0]} * dims[1], int64_t{dims[2]}, &count) && count <= INT32_MAX)
      << "a datum has shape " << DimsString(dims) << " (channels x height x width): more values than a record can "
      << "hold (2^31)";
  if (!datum.data().empty()) {
    CREMA_CHECK(static_cast<int64_t>(datum.data().size()) == count)
        << "a datum of shape " << DimsString(dims) << " holds " << datum.data().size() << " bytes, not " << count;
  } else {
    CREMA_CHECK(datum.float_data_size() == count) << "a datum of shape " << DimsString(dims) << " holds "
                                                  << datum.float_data_size() << " float values, not " << count;
  }
  const int crop = static_cast<int>(param_.crop_size());
  CREMA_CHECK(crop <= dims[1] && crop <= dims[2])
      << "transform_param.crop_size " << crop << " is larger than the image (" << dims[1] << "x" << dims[2]
      << ", height x width)";
  if (!mean_.empty()) {
    CREMA_CHECK(mean_shape_ == dims) << "mean file '" << param_.mean_file() << "' has shape 1x"
                                     << DimsString(mean_shape_) << " but the data has shape 1x" << DimsString(dims)
                                     << " (CxHxW before cropping)";
  }
  CREMA_CHECK(param_.mean_value_size() <= 1 || param_.mean_value_size() == dims[0])
      << "transform_param.mean_value is given " << param_.mean_value_size() << " times, but the data has " << dims[0]
      << " channel(s); give one value for all channels or one per channel";
  return dims;
}

std::vector<int> DataTransformer::InferBlobShape(const Datum& datum) const {
  if (datum.encoded()) return InferBlobShape(Decode(datum));
  std::vector<int> dims = CheckDatum(datum);
  if (param_.crop_size() > 0) dims[1] = dims[2] = static_cast<int>(param_.crop_size());
  return dims;
}

void DataTransformer::Transform(const Datum& datum, float* out, RandomStream* random) const {
  if (datum.encoded()) return Transform(Decode(datum), out, random);
  const std::vector<int> dims = CheckDatum(datum);
  const int channels = dims[0], height = dims[1], width = dims[2];
  const int crop = static_cast<int>(param_.crop_size());
  const int out_height = crop > 0 ? crop : height;
  const int out_width = crop > 0 ? crop : width;
  const bool train = phase_ == TRAIN;

  int row_offset = 0, column_offset = 0;
  if (crop > 0) {
    if (train) {
      CREMA_CHECK(random != nullptr) << "DataTransformer: random cropping needs a random stream";
      row_offset = static_cast<int>(random->UniformInt(height - crop + 1));
      column_offset = static_cast<int>(random->UniformInt(width - crop + 1));
    } else {
      row_offset = (height - crop) / 2;
      column_offset = (width - crop) / 2;
    }
  }
  bool mirror = false;
  if (train && param_.mirror()) {
    CREMA_CHECK(random != nullptr) << "DataTransformer: random mirroring needs a random stream";
    mirror = random->UniformInt(2) == 1;
  }

  const std::string& bytes = datum.data();
  const bool from_bytes = !bytes.empty();
  const float scale = param_.scale();
  const bool has_mean_values = param_.mean_value_size() > 0;
  for (int c = 0; c < channels; ++c) {
    const float channel_mean = has_mean_values ? param_.mean_value(param_.mean_value_size() == 1 ? 0 : c) : 0.f;
    for (int h = 0; h < out_height; ++h) {
      const int in_row = (c * height + h + row_offset) * width + column_offset;
      float* out_row = out + (c * out_height + h) * out_width;
      for (int w = 0; w < out_width; ++w) {
        const int in_index = in_row + w;
        float value =
            from_bytes ? static_cast<float>(static_cast<uint8_t>(bytes[in_index])) : datum.float_data(in_index);
        value -= mean_.empty() ? channel_mean : mean_[in_index];
        out_row[mirror ? out_width - 1 - w : w] = value * scale;
      }
    }
  }
}

void DataTransformer::Transform(const Datum& datum, Blob* out, RandomStream* random) const {
  std::vector<int> expected = InferBlobShape(datum);
  std::vector<int> shape = out->shape();
  if (shape.size() == 4 && shape[0] == 1) shape.erase(shape.begin());
  CREMA_CHECK(shape == expected) << "DataTransformer: the output blob has shape " << out->shape_string()
                                 << " but the transformed datum has shape " << DimsString(expected);
  Transform(datum, out->mutable_cpu_data(), random);
}

}  // namespace crema
