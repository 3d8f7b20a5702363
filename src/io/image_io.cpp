#include "io/image_io.hpp"

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

namespace crema {

namespace {

int ReadFlag(ImageColor color) {
  switch (color) {
    case ImageColor::kColor:
      return cv::IMREAD_COLOR;
    case ImageColor::kGray:
      return cv::IMREAD_GRAYSCALE;
    case ImageColor::kAsStored:
      break;
  }
  return cv::IMREAD_ANYCOLOR;
}

// An 8-bit image (1 or 3 channels; 4 are reduced to 3) as a raw Datum.
Datum MatToDatum(cv::Mat image, int label) {
  if (image.channels() == 4) cv::cvtColor(image, image, cv::COLOR_BGRA2BGR);
  if (image.depth() != CV_8U) image.convertTo(image, CV_8U);
  const int channels = image.channels(), height = image.rows, width = image.cols;
  std::string bytes(static_cast<size_t>(channels) * height * width, '\0');
  for (int h = 0; h < height; ++h) {
    const unsigned char* row = image.ptr<unsigned char>(h);
    for (int w = 0; w < width; ++w)
      for (int c = 0; c < channels; ++c)
        bytes[(static_cast<size_t>(c) * height + h) * width + w] = static_cast<char>(row[w * channels + c]);
  }
  Datum datum;
  datum.set_channels(channels);
  datum.set_height(height);
  datum.set_width(width);
  datum.set_data(std::move(bytes));
  datum.set_label(label);
  datum.set_encoded(false);
  return datum;
}

}  // namespace

Datum ReadImageToDatum(const std::string& path, int label, int new_height, int new_width, ImageColor color) {
  cv::Mat image = cv::imread(path, ReadFlag(color));
  CREMA_CHECK(!image.empty()) << "cannot read image '" << path << "' (missing, unreadable or not an image)";
  if (new_height > 0 && new_width > 0 && (image.rows != new_height || image.cols != new_width)) {
    cv::resize(image, image, cv::Size(new_width, new_height), 0, 0, cv::INTER_LINEAR);
  }
  return MatToDatum(image, label);
}

Datum DecodeDatum(const Datum& datum, ImageColor color) {
  if (!datum.encoded()) return datum;
  const std::string& bytes = datum.data();
  CREMA_CHECK(!bytes.empty()) << "an encoded datum holds no bytes";
  const cv::Mat buffer(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));
  cv::Mat image = cv::imdecode(buffer, ReadFlag(color));
  CREMA_CHECK(!image.empty()) << "an encoded datum (" << bytes.size() << " bytes) is not an image OpenCV can decode";
  return MatToDatum(image, datum.label());
}

std::string EncodeImage(const std::string& extension, const unsigned char* pixels, int height, int width,
                        int channels) {
  const cv::Mat image(height, width, CV_8UC(channels), const_cast<unsigned char*>(pixels));
  std::vector<unsigned char> encoded;
  CREMA_CHECK(cv::imencode(extension, image, encoded)) << "cannot encode an image as '" << extension << "'";
  return std::string(encoded.begin(), encoded.end());
}

}  // namespace crema
