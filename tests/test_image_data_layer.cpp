#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#ifdef CREMA_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

#include "core/context.hpp"
#include "io/image_io.hpp"
#include "layers/data/image_data.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// Every test here writes its images with OpenCV and reads them back through the layer.
#ifdef CREMA_USE_OPENCV

// Channel c (B, G, R) of pixel (h, w) of colour image `id` (2 x 3 pixels).
int Pixel(int id, int c, int h, int w) { return id * 40 + c * 12 + h * 3 + w; }

// Writes colour images 0 .. count - 1 as img<i>.png (2 x 3, values Pixel) and a list naming them relative to
// the directory, label 100 + i.
std::string WriteColorImages(const test::TempDir& dir, int count) {
  std::ofstream list(dir.file("list.txt"));
  for (int id = 0; id < count; ++id) {
    cv::Mat image(2, 3, CV_8UC3);
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 3; ++w)
        for (int c = 0; c < 3; ++c) image.at<cv::Vec3b>(h, w)[c] = static_cast<unsigned char>(Pixel(id, c, h, w));
    EXPECT_TRUE(cv::imwrite(dir.file("img" + std::to_string(id) + ".png"), image));
    list << "img" << id << ".png " << 100 + id << "\n";
  }
  return dir.file("list.txt");
}

LayerParameter ImageParam(const test::TempDir& dir, const std::string& source, const std::string& extra,
                          const std::string& rest = "phase: TEST") {
  return test::ParseLayer("name: 'images' type: 'ImageData' " + rest + " image_data_param { source: '" + source +
                          "' root_folder: '" + dir.path() + "/' " + extra + " }");
}

struct Fixture {
  explicit Fixture(const LayerParameter& param, uint64_t seed = Context::kDefaultSeed, int rank = 0, int replicas = 1)
      : layer(param, MakeContext(seed, rank, replicas)) {
    blobs.Add({});
    blobs.Add({});
    layer.SetUp({}, blobs.pointers);
  }
  static std::shared_ptr<Context> MakeContext(uint64_t seed, int rank, int replicas) {
    auto context = std::make_shared<Context>(Device::kCPU, 0, seed);
    context->set_replica(rank, replicas);
    return context;
  }
  // The labels of the next batch.
  std::vector<int> Next() {
    layer.Forward({}, blobs.pointers);
    std::vector<int> labels;
    for (float label : test::DataOf(*blobs.pointers[1])) labels.push_back(static_cast<int>(label));
    return labels;
  }
  std::vector<int> NextLabels(int batches) {
    std::vector<int> labels;
    for (int b = 0; b < batches; ++b) {
      const std::vector<int> batch = Next();
      labels.insert(labels.end(), batch.begin(), batch.end());
    }
    return labels;
  }
  std::vector<float> data() const { return test::DataOf(*blobs.pointers[0]); }
  ImageDataLayer layer;
  test::BlobList blobs;
};

// The 18 values of colour image `id` as the layer lays them out (channel, row, column).
std::vector<float> ColorValues(int id) {
  std::vector<float> values;
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 3; ++w) values.push_back(static_cast<float>(Pixel(id, c, h, w)));
  return values;
}

TEST(ImageDataLayerTest, BatchesHoldTheImagesInListOrderAndWrapAround) {
  test::TempDir dir;
  const std::string list = WriteColorImages(dir, 3);
  Fixture fixture(ImageParam(dir, list, "batch_size: 2"));
  EXPECT_EQ(fixture.blobs.pointers[0]->shape(), (std::vector<int>{2, 3, 2, 3}));
  EXPECT_EQ(fixture.blobs.pointers[1]->shape(), (std::vector<int>{2}));
  for (const std::vector<int>& ids : {std::vector<int>{0, 1}, {2, 0}, {1, 2}}) {
    EXPECT_EQ(fixture.Next(), (std::vector<int>{100 + ids[0], 100 + ids[1]}));
    std::vector<float> expected = ColorValues(ids[0]);
    const std::vector<float> second = ColorValues(ids[1]);
    expected.insert(expected.end(), second.begin(), second.end());
    EXPECT_EQ(fixture.data(), expected);
  }
}

TEST(ImageDataLayerTest, GreyAndColourAsAsked) {
  test::TempDir dir;
  cv::Mat grey(2, 2, CV_8UC1);
  for (int i = 0; i < 4; ++i) grey.at<unsigned char>(i / 2, i % 2) = static_cast<unsigned char>(10 + i);
  ASSERT_TRUE(cv::imwrite(dir.file("grey.png"), grey));
  std::ofstream(dir.file("list.txt")) << "grey.png 7\n";

  Fixture colour(ImageParam(dir, dir.file("list.txt"), "batch_size: 1"));  // is_color defaults to true
  colour.Next();
  EXPECT_EQ(colour.blobs.pointers[0]->shape(), (std::vector<int>{1, 3, 2, 2}));
  EXPECT_EQ(colour.data(), (std::vector<float>{10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13}));
  Fixture single(ImageParam(dir, dir.file("list.txt"), "batch_size: 1 is_color: false"));
  EXPECT_EQ(single.Next(), std::vector<int>{7});
  EXPECT_EQ(single.blobs.pointers[0]->shape(), (std::vector<int>{1, 1, 2, 2}));
  EXPECT_EQ(single.data(), (std::vector<float>{10, 11, 12, 13}));
}

TEST(ImageDataLayerTest, ResizesToNewHeightAndWidth) {
  test::TempDir dir;
  const std::string list = WriteColorImages(dir, 1);
  Fixture fixture(ImageParam(dir, list, "batch_size: 1 new_height: 4 new_width: 5"));
  EXPECT_EQ(fixture.blobs.pointers[0]->shape(), (std::vector<int>{1, 3, 4, 5}));
  fixture.Next();
  cv::Mat resized;
  cv::resize(cv::imread(dir.file("img0.png"), cv::IMREAD_COLOR), resized, cv::Size(5, 4), 0, 0, cv::INTER_LINEAR);
  std::vector<float> expected;
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 5; ++w) expected.push_back(resized.at<cv::Vec3b>(h, w)[c]);
  EXPECT_EQ(fixture.data(), expected);
  // Bilinear: the corners keep the original's corner values.
  EXPECT_EQ(expected[0], Pixel(0, 0, 0, 0));
  EXPECT_EQ(expected[4 * 5 - 1], Pixel(0, 0, 1, 2));
}

TEST(ImageDataLayerTest, AppliesTheTransformation) {
  test::TempDir dir;
  const std::string list = WriteColorImages(dir, 2);
  // TEST: centre crop 2 x 2 at rows 0, columns (3 - 2) / 2 = 0; then (x - 1) * 0.5.
  Fixture fixture(ImageParam(dir, list, "batch_size: 1",
                             "phase: TEST transform_param { crop_size: 2 mean_value: 1 "
                             "scale: 0.5 mirror: true }"));
  EXPECT_EQ(fixture.blobs.pointers[0]->shape(), (std::vector<int>{1, 3, 2, 2}));
  fixture.Next();
  std::vector<float> expected;
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 2; ++w) expected.push_back((Pixel(0, c, h, w) - 1) * 0.5f);
  EXPECT_EQ(fixture.data(), expected);

  // TRAIN: a random 2 x 2 crop, mirrored at random: every output is a crop of the right image, mirrored or not, and
  // both kinds occur.
  Fixture train(ImageParam(dir, list, "batch_size: 1", "phase: TRAIN transform_param { crop_size: 2 mirror: true }"));
  int mirrored = 0, plain = 0;
  for (int b = 0; b < 40; ++b) {
    const int id = train.Next()[0] - 100;
    const std::vector<float> out = train.data();
    bool found = false;
    for (int column = 0; column < 2 && !found; ++column) {
      for (bool mirror : {false, true}) {
        std::vector<float> candidate;
        for (int c = 0; c < 3; ++c)
          for (int h = 0; h < 2; ++h)
            for (int w = 0; w < 2; ++w) candidate.push_back(Pixel(id, c, h, column + (mirror ? 1 - w : w)));
        if (candidate == out) {
          found = true;
          (mirror ? mirrored : plain)++;
          break;
        }
      }
    }
    EXPECT_TRUE(found) << "batch " << b << " is no crop of image " << id;
  }
  EXPECT_GT(mirrored, 0);
  EXPECT_GT(plain, 0);
}

TEST(ImageDataLayerTest, ShuffleIsReproducibleFromTheSeed) {
  test::TempDir dir;
  const std::string list = WriteColorImages(dir, 6);
  Fixture first(ImageParam(dir, list, "batch_size: 3 shuffle: true"), 5);
  const std::vector<int> pass1 = first.NextLabels(2), pass2 = first.NextLabels(2);
  std::vector<int> in_order(6);
  std::iota(in_order.begin(), in_order.end(), 100);
  for (const std::vector<int>* pass : {&pass1, &pass2}) {
    std::vector<int> sorted = *pass;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, in_order);
  }
  EXPECT_NE(pass1, in_order);
  EXPECT_NE(pass1, pass2);
  Fixture same(ImageParam(dir, list, "batch_size: 3 shuffle: true"), 5);
  EXPECT_EQ(same.NextLabels(2), pass1);
  EXPECT_EQ(same.NextLabels(2), pass2);
  Fixture other(ImageParam(dir, list, "batch_size: 3 shuffle: true"), 6);
  EXPECT_NE(other.NextLabels(2), pass1);
}

TEST(ImageDataLayerTest, RandSkipStartsLaterAndKeepsTheOrder) {
  test::TempDir dir;
  const std::string list = WriteColorImages(dir, 5);
  bool skipped = false;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    Fixture fixture(ImageParam(dir, list, "batch_size: 5 rand_skip: 4"), seed);
    const std::vector<int> labels = fixture.Next();
    const int start = labels[0] - 100;
    EXPECT_LT(start, 4);
    skipped = skipped || start > 0;
    for (int i = 0; i < 5; ++i) EXPECT_EQ(labels[i], 100 + (start + i) % 5);
  }
  EXPECT_TRUE(skipped);
}

TEST(ImageDataLayerTest, RestoredLayerContinuesExactly) {
  test::TempDir dir;
  const std::string list = WriteColorImages(dir, 5);
  const std::string extra = "batch_size: 2 shuffle: true";
  const std::string rest = "phase: TRAIN transform_param { crop_size: 1 mirror: true }";
  Fixture original(ImageParam(dir, list, extra, rest));
  original.NextLabels(3);
  LayerRuntimeState saved;
  original.layer.SaveRuntimeState(&saved);
  EXPECT_EQ(saved.records_read(), 6u);
  std::vector<std::vector<float>> expected;
  for (int b = 0; b < 6; ++b) {
    original.Next();
    std::vector<float> values = original.data();
    for (float label : test::DataOf(*original.blobs.pointers[1])) values.push_back(label);
    expected.push_back(values);
  }
  Fixture resumed(ImageParam(dir, list, extra, rest));
  LayerRuntimeState parsed;
  ASSERT_TRUE(parsed.ParseFromString(saved.SerializeAsString()));
  resumed.layer.RestoreRuntimeState(parsed);
  for (int b = 0; b < 6; ++b) {
    resumed.Next();
    std::vector<float> values = resumed.data();
    for (float label : test::DataOf(*resumed.blobs.pointers[1])) values.push_back(label);
    EXPECT_EQ(values, expected[b]) << "batch " << b;
  }
  LayerRuntimeState state;
  state.set_cursor_key("order=0,1,2;position=0");
  test::ExpectErrorContaining([&] { resumed.layer.RestoreRuntimeState(state); }, {"'images'", "line order", list});
  state.set_cursor_key("nonsense");
  test::ExpectErrorContaining([&] { resumed.layer.RestoreRuntimeState(state); }, {"cannot parse"});
}

TEST(ImageDataLayerTest, ReplicasReadTheirShareOfEachGlobalBatch) {
  test::TempDir dir;
  const std::string list = WriteColorImages(dir, 5);
  Fixture whole(ImageParam(dir, list, "batch_size: 2"));
  Fixture part0(ImageParam(dir, list, "batch_size: 1"), Context::kDefaultSeed, 0, 2);
  Fixture part1(ImageParam(dir, list, "batch_size: 1"), Context::kDefaultSeed, 1, 2);
  for (int b = 0; b < 4; ++b) {
    const std::vector<int> global = whole.Next();
    EXPECT_EQ(part0.Next(), std::vector<int>{global[0]});
    EXPECT_EQ(part1.Next(), std::vector<int>{global[1]});
  }
}

TEST(ImageDataLayerTest, ErrorsNameTheFileAndTheLine) {
  test::TempDir dir;
  WriteColorImages(dir, 2);
  auto with_list = [&](const std::string& text, const std::string& extra = "batch_size: 2") {
    std::ofstream(dir.file("bad.txt")) << text;
    Fixture fixture(ImageParam(dir, dir.file("bad.txt"), extra));
    fixture.Next();
  };
  test::ExpectErrorContaining([&] { Fixture f(ImageParam(dir, dir.file("none.txt"), "")); },
                              {"'images' (ImageData)", dir.file("none.txt")});
  test::ExpectErrorContaining([&] { with_list("img0.png one\n"); }, {"line 1", "label 'one'"});
  test::ExpectErrorContaining([&] { with_list("\n"); }, {"names no images"});
  test::ExpectErrorContaining([&] { with_list("img0.png 1\ngone.png 2\n"); },
                              {"'images'", dir.path() + "/gone.png", "line 2", "bad.txt"});
  test::ExpectErrorContaining([&] { with_list("img0.png 1\n", "new_height: 4"); }, {"new_height", "new_width"});
  cv::Mat big(3, 3, CV_8UC3, cv::Scalar(1, 2, 3));
  ASSERT_TRUE(cv::imwrite(dir.file("big.png"), big));
  test::ExpectErrorContaining([&] { with_list("img0.png 1\nbig.png 2\n"); },
                              {"big.png", "line 2", "3 3 3 (27)", "3 2 3 (18)", "same size"});
  // As in Caffe, a line without a label gets 0 and "3.7" reads as 3, with a warning each.
  {
    test::LoggedWarnings warnings;
    std::ofstream(dir.file("loose.txt")) << "img0.png 3.7\nimg1.png\n";
    Fixture loose(ImageParam(dir, dir.file("loose.txt"), "batch_size: 2"));
    EXPECT_EQ(loose.Next(), (std::vector<int>{3, 0}));
    ASSERT_EQ(warnings.lines().size(), 2u);
    EXPECT_NE(warnings.lines()[0].find("read as 3"), std::string::npos) << warnings.lines()[0];
    EXPECT_NE(warnings.lines()[1].find("no label"), std::string::npos) << warnings.lines()[1];
  }
  // A path with a space: everything before the last field.
  ASSERT_TRUE(cv::imwrite(dir.file("with space.png"), big));
  std::ofstream(dir.file("space.txt")) << "with space.png 5\n";
  Fixture spaced(ImageParam(dir, dir.file("space.txt"), "batch_size: 1"));
  EXPECT_EQ(spaced.Next(), std::vector<int>{5});
  EXPECT_EQ(spaced.data(),
            std::vector<float>({1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3}));
}

#else  // !CREMA_USE_OPENCV

TEST(ImageDataLayerTest, NeedsOpenCv) {
  GTEST_SKIP() << "built without OpenCV (CREMA_USE_OPENCV=OFF): the ImageData layer cannot read images";
}

// What such a build can check: reading an image fails saying why, naming the file.
TEST(ImageDataLayerTest, WithoutOpenCvReadingAnImageSaysWhy) {
  EXPECT_FALSE(ImageCodecsAvailable());
  test::ExpectErrorContaining([] { ReadImageToDatum("/tmp/image.png", 0, 0, 0, ImageColor::kColor); },
                              {"built without OpenCV", "/tmp/image.png"});
}

#endif  // CREMA_USE_OPENCV

}  // namespace
}  // namespace crema
