#include "io/image_io.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#ifdef CREMA_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "io/image_codecs_library.hpp"
#endif

namespace crema {

#ifdef CREMA_USE_OPENCV

bool ImageCodecsAvailable() { return true; }

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

// The image `decode` returns (cv::imdecode or cv::imread), with OpenCV's exceptions caught: it throws for some
// damaged files and for a header that claims more pixels than it decodes (CV_IO_MAX_IMAGE_PIXELS). An image it
// cannot decode is empty, and *why (when there is one) holds OpenCV's reason, " (OpenCV: ...)", for the caller's
// message.
template <typename Decode>
cv::Mat CatchingOpenCv(Decode decode, std::string* why) {
  try {
    return decode();
  } catch (const cv::Exception& error) {
    *why = " (OpenCV: " + error.err + ")";
    return cv::Mat();
  }
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

// The height and width a JPEG or PNG header claims ({0, 0} for another format, or a header that ends early).
std::pair<uint32_t, uint32_t> ClaimedImageSize(const std::string& bytes) {
  const auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])); };
  const auto big_endian = [&](size_t at, int count) {
    uint32_t value = 0;
    for (int i = 0; i < count; ++i) value = value << 8 | byte(at + i);
    return value;
  };
  if (bytes.size() >= 24 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0 && bytes.compare(12, 4, "IHDR") == 0)
    return {big_endian(20, 4), big_endian(16, 4)};
  if (bytes.size() < 4 || byte(0) != 0xFF || byte(1) != 0xD8) return {0, 0};
  // JPEG: segments until the first start-of-frame (SOF0..SOF15 but DHT, JPG and DAC), which holds the size.
  size_t at = 2;
  while (at + 4 <= bytes.size() && byte(at) == 0xFF) {
    const uint32_t marker = byte(at + 1);
    if (marker == 0xFF) {  // fill byte
      ++at;
      continue;
    }
    if (marker == 0xD8 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {  // no length
      at += 2;
      continue;
    }
    const uint32_t length = big_endian(at + 2, 2);
    const bool frame = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame && at + 9 <= bytes.size()) return {big_endian(at + 5, 2), big_endian(at + 7, 2)};
    if (marker == 0xDA || length < 2) break;  // scan data: no frame header before it
    at += 2 + length;
  }
  return {0, 0};
}

}  // namespace

Datum ReadImageToDatum(const std::string& path, int label, int new_height, int new_width, ImageColor color) {
  std::string why;
  cv::Mat image = CatchingOpenCv([&] { return ImageCodecs().imread(path, ReadFlag(color)); }, &why);
  CREMA_CHECK(!image.empty()) << "cannot read image '" << path << "' (missing, unreadable or not an image)" << why;
  if (new_height > 0 && new_width > 0 && (image.rows != new_height || image.cols != new_width)) {
    cv::resize(image, image, cv::Size(new_width, new_height), 0, 0, cv::INTER_LINEAR);
  }
  return MatToDatum(image, label);
}

Datum DecodeDatum(const Datum& datum, ImageColor color) {
  if (!datum.encoded()) return datum;
  const std::string& bytes = datum.data();
  CREMA_CHECK(!bytes.empty()) << "an encoded datum holds no bytes";
  // A damaged header can claim gigapixels that OpenCV would allocate and decode for seconds. Compressed data has a
  // floor: a JPEG spends at least 2 bits on every 8x8 block of every component, and deflate (PNG) expands at most
  // 1032:1, so more than 4096 pixels a byte (beyond a megapixel of slack) is no image these bytes can hold.
  const auto [claimed_height, claimed_width] = ClaimedImageSize(bytes);
  const uint64_t claimed = uint64_t{claimed_height} * claimed_width;
  CREMA_CHECK(claimed <= uint64_t{4096} * bytes.size() + (uint64_t{1} << 20))
      << "an encoded datum (" << bytes.size() << " bytes) claims an image of " << claimed_height << " x "
      << claimed_width << " pixels, more than so few compressed bytes can hold: its header is damaged";
  const cv::Mat buffer(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));
  std::string why;
  cv::Mat image = CatchingOpenCv([&] { return ImageCodecs().imdecode(buffer, ReadFlag(color)); }, &why);
  CREMA_CHECK(!image.empty()) << "an encoded datum (" << bytes.size() << " bytes) is not an image OpenCV can decode"
                              << why;
  return MatToDatum(image, datum.label());
}

Datum CropResizeDatum(const Datum& image, int x1, int y1, int x2, int y2, int out_height, int out_width, bool mirror) {
  CREMA_CHECK(!image.encoded()) << "CropResizeDatum: the datum must be decoded first";
  const int channels = image.channels(), height = image.height(), width = image.width();
  CREMA_CHECK(channels > 0 && static_cast<int64_t>(image.data().size()) == int64_t{channels} * height * width)
      << "CropResizeDatum: a datum of " << channels << "x" << height << "x" << width << " holds " << image.data().size()
      << " bytes";
  CREMA_CHECK(0 <= x1 && x1 <= x2 && x2 < width && 0 <= y1 && y1 <= y2 && y2 < height)
      << "the region x " << x1 << ".." << x2 << ", y " << y1 << ".." << y2 << " is empty or leaves the image (" << width
      << " wide, " << height << " high)";
  CREMA_CHECK(out_height > 0 && out_width > 0)
      << "cannot resize a region to " << out_height << "x" << out_width << " (height x width)";
  const int region_height = y2 - y1 + 1, region_width = x2 - x1 + 1;
  cv::Mat region(region_height, region_width, CV_8UC(channels));
  const std::string& bytes = image.data();
  for (int h = 0; h < region_height; ++h) {
    unsigned char* row = region.ptr<unsigned char>(h);
    for (int w = 0; w < region_width; ++w)
      for (int c = 0; c < channels; ++c)
        row[w * channels + c] =
            static_cast<unsigned char>(bytes[(static_cast<size_t>(c) * height + y1 + h) * width + x1 + w]);
  }
  cv::Mat resized;
  cv::resize(region, resized, cv::Size(out_width, out_height), 0, 0, cv::INTER_LINEAR);
  if (mirror) cv::flip(resized, resized, 1);
  return MatToDatum(resized, image.label());
}

namespace {

// A format's name as OpenCV's encoders know it: lower case, without the dot, "jpeg" as "jpg".
std::string NormalizedFormat(const std::string& format) {
  std::string name = !format.empty() && format[0] == '.' ? format.substr(1) : format;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return name == "jpeg" ? "jpg" : name;
}

// The format a file's extension names ("" when its name has none).
std::string FormatOfFileName(const std::string& path) {
  const size_t dot = path.find_last_of('.'), slash = path.find_last_of('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  return NormalizedFormat(path.substr(dot + 1));
}

}  // namespace

bool CanEncodeImageFormat(const std::string& format) {
  const std::string name = NormalizedFormat(format);
  if (name.empty()) return false;
  try {
    return ImageCodecs().haveImageWriter("image." + name);
  } catch (const cv::Exception&) {
    return false;
  }
}

Datum ReadImageToEncodedDatum(const std::string& path, int label, int new_height, int new_width, ImageColor color,
                              const std::string& format, ImageShape* shape) {
  // The file is read once: its bytes are what is stored when the image needs no change.
  std::ifstream file(path, std::ios::binary);
  CREMA_CHECK(file) << "cannot read image '" << path << "' (missing or unreadable)";
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  CREMA_CHECK(!file.bad()) << "cannot read image '" << path << "' (a read error)";
  CREMA_CHECK(!bytes.empty()) << "cannot read image '" << path << "' (an empty file)";
  const cv::Mat buffer(1, static_cast<int>(bytes.size()), CV_8UC1, bytes.data());
  auto decode = [&](int flag) {
    std::string why;
    cv::Mat image = CatchingOpenCv([&] { return ImageCodecs().imdecode(buffer, flag); }, &why);
    CREMA_CHECK(!image.empty()) << "cannot read image '" << path << "' (not an image OpenCV can decode)" << why;
    return image;
  };
  // Decoded as stored first: when the file already has the channels asked for, this is the image ReadImageToDatum
  // gives, and the file's bytes may be kept.
  cv::Mat image = decode(cv::IMREAD_ANYCOLOR);
  bool changed = false;
  if ((color == ImageColor::kColor && image.channels() != 3) || (color == ImageColor::kGray && image.channels() != 1)) {
    image = decode(ReadFlag(color));
    changed = true;
  }
  if (new_height > 0 && new_width > 0 && (image.rows != new_height || image.cols != new_width)) {
    cv::resize(image, image, cv::Size(new_width, new_height), 0, 0, cv::INTER_LINEAR);
    changed = true;
  }
  if (shape != nullptr) *shape = ImageShape{image.channels(), image.rows, image.cols};
  const std::string own_format = FormatOfFileName(path), wanted_format = NormalizedFormat(format);
  Datum datum;
  datum.set_label(label);
  datum.set_encoded(true);
  if (!changed && (wanted_format.empty() || wanted_format == own_format)) {
    datum.set_data(std::move(bytes));
    return datum;
  }
  const std::string target = wanted_format.empty() ? own_format : wanted_format;
  CREMA_CHECK(!target.empty()) << "cannot re-encode image '" << path
                               << "': its name has no extension to take the format from; name a format (e.g. png)";
  std::vector<unsigned char> encoded;
  bool written = false;
  try {
    written = ImageCodecs().imencode("." + target, image, encoded, {});
  } catch (const cv::Exception&) {
    written = false;
  }
  CREMA_CHECK(written) << "cannot encode image '" << path << "' as '" << target << "' (not a format OpenCV can write)";
  datum.set_data(std::string(encoded.begin(), encoded.end()));
  return datum;
}

std::string EncodeImage(const std::string& extension, const unsigned char* pixels, int height, int width,
                        int channels) {
  const cv::Mat image(height, width, CV_8UC(channels), const_cast<unsigned char*>(pixels));
  std::vector<unsigned char> encoded;
  CREMA_CHECK(ImageCodecs().imencode(extension, image, encoded, {}))
      << "cannot encode an image as '" << extension << "'";
  return std::string(encoded.begin(), encoded.end());
}

#else  // !CREMA_USE_OPENCV

// A build without OpenCV keeps every caller (ImageData, WindowData, encoded Data records) and fails where an
// image would have to be read, naming what was asked, so that a net that needs no images still runs.
namespace {
constexpr const char* kWithoutOpenCv = "this crema was built without OpenCV (CREMA_USE_OPENCV=OFF): ";
}

bool ImageCodecsAvailable() { return false; }

Datum ReadImageToDatum(const std::string& path, int label, int new_height, int new_width, ImageColor color) {
  CREMA_FAIL() << kWithoutOpenCv << "cannot decode '" << path << "'";
  return {};  // not reached: the line above throws
}

Datum DecodeDatum(const Datum& datum, ImageColor color) {
  if (!datum.encoded()) return datum;
  CREMA_FAIL() << kWithoutOpenCv << "cannot decode an encoded datum (" << datum.data().size() << " bytes)";
  return {};  // not reached
}

Datum CropResizeDatum(const Datum& image, int x1, int y1, int x2, int y2, int out_height, int out_width, bool mirror) {
  CREMA_FAIL() << kWithoutOpenCv << "cannot resize an image region to " << out_height << "x" << out_width;
  return {};  // not reached
}

Datum ReadImageToEncodedDatum(const std::string& path, int label, int new_height, int new_width, ImageColor color,
                              const std::string& format, ImageShape* shape) {
  CREMA_FAIL() << kWithoutOpenCv << "cannot decode '" << path << "'";
  return {};  // not reached
}

bool CanEncodeImageFormat(const std::string& format) { return false; }

std::string EncodeImage(const std::string& extension, const unsigned char* pixels, int height, int width,
                        int channels) {
  CREMA_FAIL() << kWithoutOpenCv << "cannot encode an image as '" << extension << "'";
  return {};  // not reached
}

#endif  // CREMA_USE_OPENCV

}  // namespace crema
