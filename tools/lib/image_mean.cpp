#include "tools/lib/image_mean.hpp"

#include <memory>
#include <sstream>
#include <vector>

#include "io/db.hpp"
#include "io/image_io.hpp"

namespace crema {

namespace {
std::string ShapeOf(const Datum& datum) {
  std::ostringstream out;
  out << datum.channels() << " x " << datum.height() << " x " << datum.width();
  return out.str();
}
}  // namespace

ImageMean ComputeImageMean(DataParameter::DB backend, const std::string& path) {
  std::unique_ptr<DbReader> reader = OpenDbReader(backend, path);
  CREMA_CHECK(reader->Valid()) << DbBackendName(backend) << " '" << path << "' holds no records to average";
  ImageMean result;
  std::vector<double> sums;
  Datum first;
  for (; reader->Valid(); reader->Next()) {
    Datum datum;
    CREMA_CHECK(datum.ParseFromString(reader->value()))
        << DbBackendName(backend) << " '" << path << "': record '" << reader->key() << "' is not a Datum";
    if (datum.encoded()) datum = DecodeDatum(datum, ImageColor::kAsStored);
    const size_t count = static_cast<size_t>(datum.channels()) * datum.height() * datum.width();
    if (result.records == 0) {
      CREMA_CHECK(count > 0) << DbBackendName(backend) << " '" << path << "': record '" << reader->key()
                             << "' has the empty shape " << ShapeOf(datum);
      first = datum;
      sums.assign(count, 0.0);
    } else {
      CREMA_CHECK(datum.channels() == first.channels() && datum.height() == first.height() &&
                  datum.width() == first.width())
          << DbBackendName(backend) << " '" << path << "': record '" << reader->key() << "' is " << ShapeOf(datum)
          << ", but the first record is " << ShapeOf(first)
          << "; a mean image needs records of one size (resize them, e.g. convert_imageset --resize_height)";
    }
    const std::string& bytes = datum.data();
    if (!bytes.empty()) {
      CREMA_CHECK(bytes.size() == count) << DbBackendName(backend) << " '" << path << "': record '" << reader->key()
                                         << "' holds " << bytes.size() << " bytes for its shape " << ShapeOf(datum)
                                         << " (" << count << " values)";
      for (size_t i = 0; i < count; ++i) sums[i] += static_cast<uint8_t>(bytes[i]);
    } else {
      CREMA_CHECK(static_cast<size_t>(datum.float_data_size()) == count)
          << DbBackendName(backend) << " '" << path << "': record '" << reader->key() << "' holds "
          << datum.float_data_size() << " float values for its shape " << ShapeOf(datum) << " (" << count << " values)";
      for (size_t i = 0; i < count; ++i) sums[i] += datum.float_data(static_cast<int>(i));
    }
    ++result.records;
  }
  BlobProto& mean = result.mean;
  mean.set_num(1);
  mean.set_channels(first.channels());
  mean.set_height(first.height());
  mean.set_width(first.width());
  for (const double total : sums) mean.add_data(static_cast<float>(total / result.records));
  return result;
}

std::vector<double> ChannelMeans(const BlobProto& mean) {
  const int channels = mean.channels();
  const int plane = channels > 0 ? mean.data_size() / channels : 0;
  std::vector<double> means(channels, 0.0);
  for (int c = 0; c < channels; ++c) {
    for (int i = 0; i < plane; ++i) means[c] += mean.data(c * plane + i);
    if (plane > 0) means[c] /= plane;
  }
  return means;
}

}  // namespace crema
