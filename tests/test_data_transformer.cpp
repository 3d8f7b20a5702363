#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "io/data_transformer.hpp"
#include "io/image_io.hpp"
#include "io/proto_io.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// A C x H x W byte datum whose pixel at flat index i is first + i.
Datum MakeDatum(int channels, int height, int width, int first = 0) {
  Datum datum;
  datum.set_channels(channels);
  datum.set_height(height);
  datum.set_width(width);
  std::string bytes;
  for (int i = 0; i < channels * height * width; ++i) bytes += static_cast<char>(first + i);
  datum.set_data(bytes);
  datum.set_label(3);
  return datum;
}

TransformationParameter ParseTransform(const std::string& text) {
  TransformationParameter param;
  ReadProtoFromText(text, "test", &param);
  return param;
}

std::vector<float> TransformToVector(const DataTransformer& transformer, const Datum& datum,
                                     RandomStream* random = nullptr) {
  const std::vector<int> shape = transformer.InferBlobShape(datum);
  std::vector<float> out(shape[0] * shape[1] * shape[2], -999.f);
  transformer.Transform(datum, out.data(), random);
  return out;
}

// The pixels of a `crop` x `crop` window of a 1-channel byte datum at (row, column), optionally mirrored.
std::vector<float> Window(const Datum& datum, int crop, int row, int column, bool mirror) {
  std::vector<float> out;
  for (int h = 0; h < crop; ++h) {
    for (int w = 0; w < crop; ++w) {
      const int source_column = column + (mirror ? crop - 1 - w : w);
      out.push_back(static_cast<uint8_t>(datum.data()[(row + h) * datum.width() + source_column]));
    }
  }
  return out;
}

TEST(DataTransformerTest, IdentityKeepsBytesAsFloats) {
  DataTransformer transformer(TransformationParameter(), TEST);
  Datum datum = MakeDatum(2, 2, 3, 250);  // 250..255 then wraps to 0..5: bytes read as unsigned
  EXPECT_EQ(transformer.InferBlobShape(datum), (std::vector<int>{2, 2, 3}));
  const std::vector<float> out = TransformToVector(transformer, datum);
  const std::vector<float> expected = {250, 251, 252, 253, 254, 255, 0, 1, 2, 3, 4, 5};
  EXPECT_EQ(out, expected);
}

TEST(DataTransformerTest, ScaleAndSingleMeanValue) {
  DataTransformer transformer(ParseTransform("scale: 0.5 mean_value: 2"), TRAIN);
  const std::vector<float> out = TransformToVector(transformer, MakeDatum(1, 2, 2, 10));
  EXPECT_EQ(out, (std::vector<float>{4, 4.5, 5, 5.5}));  // (10..13 - 2) * 0.5
}

TEST(DataTransformerTest, MeanValuePerChannel) {
  DataTransformer transformer(ParseTransform("mean_value: 1 mean_value: 10 mean_value: 100"), TEST);
  const std::vector<float> out = TransformToVector(transformer, MakeDatum(3, 1, 2, 200));
  EXPECT_EQ(out, (std::vector<float>{199, 200, 192, 193, 104, 105}));
  // Two values for three channels fits neither rule.
  DataTransformer two(ParseTransform("mean_value: 1 mean_value: 2"), TEST);
  test::ExpectErrorContaining([&] { two.InferBlobShape(MakeDatum(3, 1, 2)); }, {"mean_value", "2 times", "3 channel"});
}

TEST(DataTransformerTest, MeanFileIsSubtractedAndChecked) {
  test::TempDir dir;
  const std::string mean_path = dir.file("mean.binaryproto");
  BlobProto mean;
  for (int dim : {1, 1, 3, 3}) mean.mutable_shape()->add_dim(dim);
  for (int i = 0; i < 9; ++i) mean.add_data(0.5f * i);
  WriteProtoToBinaryFile(mean, mean_path);

  DataTransformer transformer(ParseTransform("mean_file: '" + mean_path + "' scale: 2"), TEST);
  const std::vector<float> out = TransformToVector(transformer, MakeDatum(1, 3, 3, 20));
  for (int i = 0; i < 9; ++i) EXPECT_FLOAT_EQ(out[i], (20 + i - 0.5f * i) * 2) << i;

  // With a centre crop, the mean is taken at the crop's own place in the full image.
  DataTransformer cropped(ParseTransform("mean_file: '" + mean_path + "' crop_size: 1"), TEST);
  EXPECT_EQ(TransformToVector(cropped, MakeDatum(1, 3, 3, 20)), (std::vector<float>{24 - 2.f}));

  // A datum of another shape: the error names the file and both shapes.
  test::ExpectErrorContaining([&] { transformer.InferBlobShape(MakeDatum(2, 3, 3)); },
                              {mean_path, "1x1x3x3", "1x2x3x3"});
  test::ExpectErrorContaining(
      [&] { DataTransformer t(ParseTransform("mean_file: '" + mean_path + "' mean_value: 1"), TEST); },
      {"mean_file", "mean_value", "not both"});
  test::ExpectErrorContaining([&] { DataTransformer t(ParseTransform("mean_file: '" + dir.file("none") + "'"), TEST); },
                              {dir.file("none")});
}

TEST(DataTransformerTest, CentreCropInTest) {
  DataTransformer transformer(ParseTransform("crop_size: 2 mirror: true"), TEST);
  const Datum datum = MakeDatum(1, 4, 5);  // rows 0..4, 5..9, 10..14, 15..19
  EXPECT_EQ(transformer.InferBlobShape(datum), (std::vector<int>{1, 2, 2}));
  // Offsets (4-2)/2 = 1 and (5-2)/2 = 1; TEST never mirrors, and needs no random stream.
  for (int repeat = 0; repeat < 5; ++repeat)
    EXPECT_EQ(TransformToVector(transformer, datum), (std::vector<float>{6, 7, 11, 12}));
}

TEST(DataTransformerTest, RandomCropAndMirrorInTrainFollowTheStream) {
  DataTransformer transformer(ParseTransform("crop_size: 2 mirror: true"), TRAIN);
  const Datum datum = MakeDatum(1, 4, 5);
  RandomStream random(42);
  RandomStream replay(42);
  std::set<std::vector<int>> seen;
  for (int repeat = 0; repeat < 200; ++repeat) {
    // The documented order of draws: rows offset, columns offset, mirror coin.
    const int row = static_cast<int>(replay.UniformInt(3));
    const int column = static_cast<int>(replay.UniformInt(4));
    const bool mirror = replay.UniformInt(2) == 1;
    ASSERT_EQ(TransformToVector(transformer, datum, &random), Window(datum, 2, row, column, mirror));
    seen.insert({row, column, mirror});
  }
  EXPECT_EQ(seen.size(), 3u * 4u * 2u);  // every window, both ways round
}

TEST(DataTransformerTest, MirrorOnlyWhenAsked) {
  const Datum datum = MakeDatum(2, 1, 3);
  RandomStream random(7);
  DataTransformer plain(ParseTransform("scale: 1"), TRAIN);
  DataTransformer mirroring(ParseTransform("mirror: true"), TRAIN);
  const std::vector<float> as_is = {0, 1, 2, 3, 4, 5};
  const std::vector<float> mirrored = {2, 1, 0, 5, 4, 3};  // each channel's rows reversed
  int flips = 0;
  for (int repeat = 0; repeat < 100; ++repeat) {
    EXPECT_EQ(TransformToVector(plain, datum, &random), as_is);
    const std::vector<float> out = TransformToVector(mirroring, datum, &random);
    EXPECT_TRUE(out == as_is || out == mirrored);
    flips += out == mirrored;
  }
  EXPECT_GT(flips, 25);
  EXPECT_LT(flips, 75);
}

TEST(DataTransformerTest, FloatDataAndBlobOutput) {
  Datum datum;
  datum.set_channels(1);
  datum.set_height(1);
  datum.set_width(3);
  for (float value : {-1.5f, 0.25f, 300.f}) datum.add_float_data(value);
  DataTransformer transformer(ParseTransform("mean_value: 0.5 scale: 2"), TEST);
  Blob blob({1, 1, 1, 3});
  transformer.Transform(datum, &blob, nullptr);
  EXPECT_FLOAT_EQ(blob.cpu_data()[0], -4.f);
  EXPECT_FLOAT_EQ(blob.cpu_data()[1], -0.5f);
  EXPECT_FLOAT_EQ(blob.cpu_data()[2], 599.f);
  Blob wrong({1, 3});
  test::ExpectErrorContaining([&] { transformer.Transform(datum, &wrong, nullptr); }, {"1 3", "1x1x3"});
}

TEST(DataTransformerTest, BadDatumsAndCropsAreErrors) {
  DataTransformer transformer(ParseTransform("crop_size: 5"), TEST);
  test::ExpectErrorContaining([&] { transformer.InferBlobShape(MakeDatum(1, 4, 6)); }, {"crop_size 5", "4x6"});
  Datum encoded = MakeDatum(1, 5, 5);
  encoded.set_encoded(true);
  test::ExpectErrorContaining([&] { transformer.InferBlobShape(encoded); },
                              {"encoded datum", ImageCodecsAvailable() ? "not an image" : "without OpenCV"});
  Datum short_data = MakeDatum(1, 5, 5);
  short_data.mutable_data()->resize(24);
  test::ExpectErrorContaining([&] { transformer.InferBlobShape(short_data); }, {"24 bytes", "25"});
  Datum no_shape;
  test::ExpectErrorContaining([&] { transformer.InferBlobShape(no_shape); }, {"0x0x0"});
}

// Encoded Datums: an image file in `data`, decoded as stored or as force_color / force_gray say.
Datum EncodedDatum(int channels) {
  // A 2 x 3 image; channel c of pixel (h, w) is 10 c + 3 h + w (interleaved, as OpenCV holds it).
  std::vector<unsigned char> pixels;
  for (int h = 0; h < 2; ++h)
    for (int w = 0; w < 3; ++w)
      for (int c = 0; c < channels; ++c) pixels.push_back(static_cast<unsigned char>(10 * c + 3 * h + w));
  Datum datum;
  datum.set_data(EncodeImage(".png", pixels.data(), 2, 3, channels));
  datum.set_encoded(true);
  datum.set_label(4);
  return datum;
}

TEST(DataTransformerTest, EncodedDatumsAreDecoded) {
  if (!ImageCodecsAvailable()) GTEST_SKIP() << "built without OpenCV: encoded datums cannot be decoded";
  DataTransformer plain(ParseTransform(""), TEST);
  const Datum colour = EncodedDatum(3);
  EXPECT_EQ(plain.InferBlobShape(colour), (std::vector<int>{3, 2, 3}));
  std::vector<float> out(18);
  plain.Transform(colour, out.data(), nullptr);
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < 6; ++p) EXPECT_EQ(out[c * 6 + p], 10 * c + 3 * (p / 3) + p % 3) << c << " " << p;
  const Datum decoded = plain.Decode(colour);
  EXPECT_FALSE(decoded.encoded());
  EXPECT_EQ(decoded.label(), 4);
  EXPECT_EQ(decoded.channels(), 3);

  const Datum grey = EncodedDatum(1);
  EXPECT_EQ(plain.InferBlobShape(grey), (std::vector<int>{1, 2, 3}));
  DataTransformer to_colour(ParseTransform("force_color: true crop_size: 2"), TEST);
  EXPECT_EQ(to_colour.InferBlobShape(grey), (std::vector<int>{3, 2, 2}));
  std::vector<float> cropped(12);
  to_colour.Transform(grey, cropped.data(), nullptr);
  // Centre crop: rows 0-1, columns 0-1; the three channels are the grey values.
  for (int c = 0; c < 3; ++c)
    EXPECT_EQ(std::vector<float>(cropped.begin() + 4 * c, cropped.begin() + 4 * c + 4),
              (std::vector<float>{0, 1, 3, 4}));
  DataTransformer to_grey(ParseTransform("force_gray: true"), TEST);
  EXPECT_EQ(to_grey.InferBlobShape(colour), (std::vector<int>{1, 2, 3}));
  test::ExpectErrorContaining([] { DataTransformer both(ParseTransform("force_color: true force_gray: true"), TEST); },
                              {"force_color", "force_gray"});
}

}  // namespace
}  // namespace crema
