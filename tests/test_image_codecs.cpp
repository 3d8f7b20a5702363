// OpenCV's image codecs are opened on first use (io/image_codecs_library.hpp): a process that reads no image never
// maps them, one that does decodes through them as through a linked OpenCV, and a missing or foreign library is
// named. This binary does not link libopencv_imgcodecs itself (tests/CMakeLists.txt), so what /proc/self/maps shows
// is crema's doing.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "io/image_codecs_library.hpp"
#include "io/image_io.hpp"
#include "net/net.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

#ifdef CREMA_USE_OPENCV

std::string MappedFiles() {
  std::ifstream maps("/proc/self/maps");
  return std::string((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
}

// First in this file: the process has not touched an image yet (when the binary runs whole, too).
TEST(ImageCodecsTest, AProcessThatReadsNoImageNeverMapsTheCodecs) {
  Net net(test::ParseNet(
      "name: 'plain' layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 } } }"
      " layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip' inner_product_param { num_output: 2 } }"));
  test::FillGaussian(net.blob_by_name("data"));
  net.Forward();
  const std::string mapped = MappedFiles();
  ASSERT_FALSE(mapped.empty());
  EXPECT_EQ(mapped.find("libopencv_imgcodecs"), std::string::npos) << "the codecs were loaded by a run without images";
  EXPECT_EQ(mapped.find("libgdal"), std::string::npos);
  EXPECT_FALSE(ImageCodecsLoaded());
}

TEST(ImageCodecsTest, ImagesEncodeAndDecodeThroughTheOpenedLibrary) {
  // A 3 x 4 colour image with every byte different, through PNG (lossless) and back.
  std::vector<unsigned char> pixels(3 * 4 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<unsigned char>(7 * i + 3);
  ASSERT_TRUE(CanEncodeImageFormat("png"));
  EXPECT_FALSE(CanEncodeImageFormat("no_such_format"));
  Datum encoded;
  encoded.set_encoded(true);
  encoded.set_label(4);
  encoded.set_data(EncodeImage(".png", pixels.data(), 3, 4, 3));
  EXPECT_EQ(encoded.data().compare(1, 3, "PNG"), 0);
  const Datum decoded = DecodeDatum(encoded, ImageColor::kAsStored);
  EXPECT_EQ(decoded.label(), 4);
  ASSERT_EQ(decoded.channels(), 3);
  ASSERT_EQ(decoded.height(), 3);
  ASSERT_EQ(decoded.width(), 4);
  // The Datum is channel-major; the pixels were interleaved.
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < 3; ++h)
      for (int w = 0; w < 4; ++w)
        EXPECT_EQ(static_cast<unsigned char>(decoded.data()[(c * 3 + h) * 4 + w]), pixels[(h * 4 + w) * 3 + c]);
  EXPECT_TRUE(ImageCodecsLoaded());
  EXPECT_NE(MappedFiles().find("libopencv_imgcodecs"), std::string::npos);
  EXPECT_EQ(ImageCodecs().path, ImageCodecsLibraryName());
}

TEST(ImageCodecsTest, AMissingOrForeignLibraryIsNamed) {
  std::string message = test::ErrorMessage([] { LoadImageCodecsLibrary("/nonexistent/" + ImageCodecsLibraryName()); });
  EXPECT_NE(message.find("cannot open OpenCV's image codecs library '/nonexistent/libopencv_imgcodecs.so."),
            std::string::npos)
      << message;
  // A library that opens but is not OpenCV's codecs: the first missing function is named.
  message = test::ErrorMessage([] { LoadImageCodecsLibrary("libz.so.1"); });
  EXPECT_NE(message.find("'libz.so.1' has no cv::imread"), std::string::npos) << message;
  EXPECT_NE(message.find("crema was built against OpenCV " CV_VERSION), std::string::npos) << message;
}

#else

TEST(ImageCodecsTest, BuiltWithoutOpenCv) {
  EXPECT_FALSE(ImageCodecsAvailable());
  GTEST_SKIP() << "this crema was built without OpenCV";
}

#endif

}  // namespace
}  // namespace crema
