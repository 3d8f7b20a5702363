#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#ifdef CREMA_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

#include "core/context.hpp"
#include "io/image_io.hpp"
#include "io/proto_io.hpp"
#include "layers/data/window_data.hpp"
#include "layers/layer_registry.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// Every test here writes its images with OpenCV and reads them back through the layer.
#ifdef CREMA_USE_OPENCV

constexpr int kHeight = 8, kWidth = 10;

// Channel c (B, G, R) of pixel (h, w) of image `id` (kHeight x kWidth).
int Pixel(int id, int c, int h, int w) { return id * 5 + c * 60 + h * 10 + w * 3; }

cv::Mat MakeImage(int id) {
  cv::Mat image(kHeight, kWidth, CV_8UC3);
  for (int h = 0; h < kHeight; ++h)
    for (int w = 0; w < kWidth; ++w)
      for (int c = 0; c < 3; ++c) image.at<cv::Vec3b>(h, w)[c] = static_cast<unsigned char>(Pixel(id, c, h, w));
  return image;
}

// Writes img0.png and img1.png (kHeight x kWidth) into `dir`.
void WriteImages(const test::TempDir& dir) {
  for (int id = 0; id < 2; ++id) EXPECT_TRUE(cv::imwrite(dir.file("img" + std::to_string(id) + ".png"), MakeImage(id)));
}

// A block of the window file: image `path` with the given window lines.
std::string Block(int index, const std::string& path, const std::vector<std::string>& windows) {
  std::string text = "# " + std::to_string(index) + "\n" + path + "\n3\n" + std::to_string(kHeight) + "\n" +
                     std::to_string(kWidth) + "\n" + std::to_string(windows.size()) + "\n";
  for (const std::string& window : windows) text += window + "\n";
  return text;
}

std::string WriteFile(const test::TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir.file(name)) << text;
  return dir.file(name);
}

// Two images: foreground windows of classes 1, 2 and 3, background windows, and one of neither set.
std::string WriteWindowFile(const test::TempDir& dir) {
  return WriteFile(dir, "windows.txt",
                   Block(0, "img0.png", {"1 0.9 2 1 6 5", "2 0.8 0 0 3 3", "0 0.1 4 2 9 7", "5 0.4 1 1 2 2"}) + "\n" +
                       Block(1, "img1.png", {"3 0.7 1 2 8 7", "4 0.2 0 0 9 7"}));
}

LayerParameter WindowParam(const test::TempDir& dir, const std::string& source, const std::string& extra,
                           const std::string& rest = "phase: TEST") {
  return test::ParseLayer("name: 'windows' type: 'WindowData' " + rest + " window_data_param { source: '" + source +
                          "' root_folder: '" + dir.path() + "/' " + extra + " }");
}

struct Fixture {
  explicit Fixture(const LayerParameter& param, uint64_t seed = Context::kDefaultSeed)
      : layer(param, std::make_shared<Context>(Device::kCPU, 0, seed)) {
    blobs.Add({});
    blobs.Add({});
    layer.SetUp({}, blobs.pointers);
  }
  std::vector<int> Next() {
    layer.Forward({}, blobs.pointers);
    std::vector<int> labels;
    for (float label : test::DataOf(*blobs.pointers[1])) labels.push_back(static_cast<int>(label));
    return labels;
  }
  std::vector<float> data() const { return test::DataOf(*blobs.pointers[0]); }
  WindowDataLayer layer;
  test::BlobList blobs;
};

// The channels x crop x crop output expected for: the region x1..x2, y1..y2 of image `id` resized (OpenCV,
// bilinear) to out_h x out_w, mirrored or not, placed at (top, left); everything else 0. Mean `mean(c, h, w)`
// is subtracted and the result scaled.
std::vector<float> Expected(int id, int x1, int y1, int x2, int y2, int out_h, int out_w, int top, int left, int crop,
                            bool mirror, const std::function<float(int, int, int)>& mean = nullptr, float scale = 1.f) {
  cv::Mat region = MakeImage(id)(cv::Rect(x1, y1, x2 - x1 + 1, y2 - y1 + 1)).clone(), resized;
  cv::resize(region, resized, cv::Size(out_w, out_h), 0, 0, cv::INTER_LINEAR);
  if (mirror) cv::flip(resized, resized, 1);
  std::vector<float> values(3 * crop * crop, 0.f);
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < out_h; ++h)
      for (int w = 0; w < out_w; ++w) {
        const int row = top + h, column = left + w;
        const float m = mean ? mean(c, row, column) : 0.f;
        values[(c * crop + row) * crop + column] = (resized.at<cv::Vec3b>(h, w)[c] - m) * scale;
      }
  return values;
}

TEST(WindowDataLayerTest, SortsWindowsAndFillsEachBatchWithForegroundThenBackground) {
  test::TempDir dir;
  WriteImages(dir);
  const std::string source = WriteWindowFile(dir);
  // Defaults: fg_threshold 0.5, bg_threshold 0.5, fg_fraction 0.25; the 0.4 window is background.
  Fixture f(WindowParam(dir, source, "batch_size: 8 crop_size: 4"));
  EXPECT_EQ(f.layer.num_foreground(), 3u);
  EXPECT_EQ(f.layer.num_background(), 3u);
  EXPECT_EQ(f.blobs.pointers[0]->shape(), (std::vector<int>{8, 3, 4, 4}));
  EXPECT_EQ(f.blobs.pointers[1]->shape(), (std::vector<int>{8}));
  std::set<int> classes;
  for (int batch = 0; batch < 20; ++batch) {
    const std::vector<int> labels = f.Next();
    // int(0.25 * 8) = 2 foreground windows, last; 6 background first.
    for (int i = 0; i < 6; ++i) EXPECT_EQ(labels[i], 0) << i;
    for (int i = 6; i < 8; ++i) {
      EXPECT_TRUE(labels[i] >= 1 && labels[i] <= 3) << labels[i];
      classes.insert(labels[i]);
    }
  }
  EXPECT_EQ(classes, (std::set<int>{1, 2, 3}));

  // bg_threshold 0.3 leaves the 0.4 window out; int(0.5 * 5) = 2 foreground (truncated, as in Caffe).
  Fixture g(WindowParam(dir, source, "batch_size: 5 crop_size: 4 bg_threshold: 0.3 fg_fraction: 0.5"));
  EXPECT_EQ(g.layer.num_foreground(), 3u);
  EXPECT_EQ(g.layer.num_background(), 2u);
  const std::vector<int> labels = g.Next();
  EXPECT_EQ(std::count(labels.begin(), labels.end(), 0), 3);
}

TEST(WindowDataLayerTest, WarpStretchesTheWindowToTheCrop) {
  test::TempDir dir;
  WriteImages(dir);
  const std::string source = WriteFile(dir, "w.txt", Block(0, "img0.png", {"1 0.9 2 1 6 5"}));
  Fixture f(WindowParam(dir, source, "batch_size: 2 crop_size: 7 fg_fraction: 1"));
  f.Next();
  const std::vector<float> expected = Expected(0, 2, 1, 6, 5, 7, 7, 0, 0, 7, false);
  const std::vector<float> data = f.data();
  for (int item = 0; item < 2; ++item)
    EXPECT_EQ(std::vector<float>(data.begin() + item * expected.size(), data.begin() + (item + 1) * expected.size()),
              expected);
}

// The window x 0..3, y 0..1 of the 8 x 10 image, square, crop_size 8, context_pad 2, by hand: context scale
// 8 / (8 - 4) = 2; half sizes (2, 1) squared to (2, 2); centre (2, 1); enlarged x -2..6, y -3..5 (9 x 9),
// clipped to x 0..6, y 0..5, beyond the image 2 on the left and 3 on top. Scale 8 / 9: the clipped region is
// resized to round(7 * 8/9) = 6 wide and round(6 * 8/9) = 5 high, placed after round(2 * 8/9) = 2 columns and
// round(3 * 8/9) = 3 rows of zeros. Mirrored, the padding on the right (none) comes first: columns 0..5.
constexpr const char* kCornerWindow = "1 0.9 0 0 3 1";

TEST(WindowDataLayerTest, SquareCropWithContextPadAtTheBorder) {
  test::TempDir dir;
  WriteImages(dir);
  const std::string source = WriteFile(dir, "w.txt", Block(0, "img0.png", {kCornerWindow}));
  Fixture f(WindowParam(dir, source, "batch_size: 1 crop_size: 8 fg_fraction: 1 context_pad: 2 crop_mode: 'square'"));
  f.Next();
  EXPECT_EQ(f.data(), Expected(0, 0, 0, 6, 5, 5, 6, 3, 2, 8, false));
}

TEST(WindowDataLayerTest, MirrorsAtRandomOnlyInTrain) {
  test::TempDir dir;
  WriteImages(dir);
  const std::string source = WriteFile(dir, "w.txt", Block(0, "img0.png", {kCornerWindow}));
  const std::string extra = "batch_size: 1 crop_size: 8 fg_fraction: 1 context_pad: 2 crop_mode: 'square'";
  const std::vector<float> plain = Expected(0, 0, 0, 6, 5, 5, 6, 3, 2, 8, false);
  const std::vector<float> mirrored = Expected(0, 0, 0, 6, 5, 5, 6, 3, 0, 8, true);
  ASSERT_NE(plain, mirrored);
  Fixture train(WindowParam(dir, source, extra, "phase: TRAIN transform_param { mirror: true }"));
  int mirrors = 0;
  for (int i = 0; i < 20; ++i) {
    train.Next();
    const std::vector<float> data = train.data();
    EXPECT_TRUE(data == plain || data == mirrored);
    mirrors += data == mirrored;
  }
  EXPECT_GT(mirrors, 0);
  EXPECT_LT(mirrors, 20);
  // The deprecated window_data_param.mirror works too; in TEST nothing is mirrored.
  Fixture test(WindowParam(dir, source, extra + " mirror: true", "phase: TEST"));
  for (int i = 0; i < 10; ++i) {
    test.Next();
    EXPECT_EQ(test.data(), plain);
  }
}

TEST(WindowDataLayerTest, SubtractsTheMeanAndScales) {
  test::TempDir dir;
  WriteImages(dir);
  const std::string source = WriteFile(dir, "w.txt", Block(0, "img0.png", {kCornerWindow}));
  const std::string extra = "batch_size: 1 crop_size: 8 fg_fraction: 1 context_pad: 2 crop_mode: 'square'";

  Fixture values(WindowParam(dir, source, extra,
                             "transform_param { mean_value: 10 mean_value: 20 mean_value: 30 "
                             "scale: 0.5 }"));
  values.Next();
  const float channel_means[3] = {10.f, 20.f, 30.f};
  EXPECT_EQ(values.data(),
            Expected(
                0, 0, 0, 6, 5, 5, 6, 3, 2, 8, false, [&](int c, int, int) { return channel_means[c]; }, 0.5f));

  // A 1x3x10x12 mean file: its centre 8 x 8 (rows 1..8, columns 2..9) is subtracted; deprecated scale.
  BlobProto mean;
  for (int d : {1, 3, 10, 12}) mean.mutable_shape()->add_dim(d);
  auto mean_at = [](int c, int h, int w) { return 0.25f * (c * 120 + h * 12 + w); };
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < 10; ++h)
      for (int w = 0; w < 12; ++w) mean.add_data(mean_at(c, h, w));
  WriteProtoToBinaryFile(mean, dir.file("mean.binaryproto"));
  Fixture file(WindowParam(dir, source, extra + " scale: 2 mean_file: '" + dir.file("mean.binaryproto") + "'"));
  file.Next();
  EXPECT_EQ(file.data(), Expected(
                             0, 0, 0, 6, 5, 5, 6, 3, 2, 8, false,
                             [&](int c, int h, int w) { return mean_at(c, h + 1, w + 2); }, 2.f));
}

TEST(WindowDataLayerTest, CachedImagesGiveTheSameBatches) {
  test::TempDir dir;
  WriteImages(dir);
  const std::string source = WriteWindowFile(dir);
  Fixture plain(WindowParam(dir, source, "batch_size: 6 crop_size: 5 context_pad: 1"));
  Fixture cached(WindowParam(dir, source, "batch_size: 6 crop_size: 5 context_pad: 1 cache_images: true"));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(plain.Next(), cached.Next());
    EXPECT_EQ(plain.data(), cached.data());
  }
}

TEST(WindowDataLayerTest, ReproducibleFromTheSeedAndContinuesExactlyAfterRestore) {
  test::TempDir dir;
  WriteImages(dir);
  const std::string source = WriteWindowFile(dir);
  const LayerParameter param = WindowParam(dir, source, "batch_size: 6 crop_size: 6 fg_fraction: 0.5 context_pad: 1",
                                           "phase: TRAIN transform_param { mirror: true }");
  Fixture a(param, 7), b(param, 7), other(param, 8);
  bool differs = false;
  for (int i = 0; i < 3; ++i) {
    const std::vector<int> labels = a.Next();
    EXPECT_EQ(labels, b.Next());
    EXPECT_EQ(a.data(), b.data());
    const std::vector<int> other_labels = other.Next();
    differs = differs || labels != other_labels || a.data() != other.data();
  }
  EXPECT_TRUE(differs);

  LayerRuntimeState state;
  a.layer.SaveRuntimeState(&state);
  EXPECT_EQ(state.layer(), "windows");
  EXPECT_EQ(state.records_read(), 18u);
  std::vector<std::vector<int>> labels;
  std::vector<std::vector<float>> data;
  for (int i = 0; i < 3; ++i) {
    labels.push_back(a.Next());
    data.push_back(a.data());
  }
  Fixture resumed(param, 99);
  resumed.layer.RestoreRuntimeState(state);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(resumed.Next(), labels[i]) << i;
    EXPECT_EQ(resumed.data(), data[i]) << i;
  }
  LayerRuntimeState saved;
  resumed.layer.SaveRuntimeState(&saved);
  EXPECT_EQ(saved.records_read(), 36u);

  state.set_layer("other");
  test::ExpectErrorContaining([&] { resumed.layer.RestoreRuntimeState(state); }, {"'windows'", "'other'"});
  test::ExpectErrorContaining([&] { resumed.layer.RestoreRuntimeState(LayerRuntimeState()); }, {"random stream"});
}

TEST(WindowDataLayerTest, IsRegisteredAsWindowData) {
  test::TempDir dir;
  WriteImages(dir);
  const LayerParameter param = WindowParam(dir, WriteWindowFile(dir), "batch_size: 2 crop_size: 4");
  auto layer = LayerRegistry::Global().Create(param, {}, std::make_shared<Context>(Device::kCPU, 0, 1));
  EXPECT_STREQ(layer->type(), "WindowData");
  EXPECT_EQ(LayerRegistry::Global().Engines("WindowData"), (std::vector<std::string>{"native"}));
}

TEST(WindowDataLayerTest, ErrorsNameTheFileTheLineAndTheImage) {
  test::TempDir dir;
  WriteImages(dir);
  auto with_file = [&](const std::string& text, const std::string& extra = "batch_size: 4 crop_size: 4") {
    Fixture f(WindowParam(dir, WriteFile(dir, "bad.txt", text), extra));
    f.Next();
  };
  test::ExpectErrorContaining([&] { Fixture f(WindowParam(dir, dir.file("none.txt"), "batch_size: 1 crop_size: 4")); },
                              {"'windows'", "none.txt"});
  const std::string good = Block(0, "img0.png", {"1 0.9 2 1 6 5", "0 0.1 4 2 9 7"});
  // Line 3 (the channels) is not a number.
  test::ExpectErrorContaining([&] { with_file("# 0\nimg0.png\nthree\n8\n10\n0\n"); },
                              {"line 3", "bad.txt", "number of channels"});
  // Line 8 is a window with five fields; line 7 one outside the image; line 1 not "# index".
  test::ExpectErrorContaining([&] { with_file("# 0\nimg0.png\n3\n8\n10\n2\n1 0.9 2 1 6 5\n0 0.1 4 2 9\n"); },
                              {"line 8", "class_index overlap x1 y1 x2 y2"});
  test::ExpectErrorContaining([&] { with_file("# 0\nimg0.png\n3\n8\n10\n1\n1 0.9 2 1 10 5\n"); },
                              {"line 7", "leaves image 0"});
  test::ExpectErrorContaining([&] { with_file("0\nimg0.png\n"); }, {"line 1", "# <image_index>"});
  test::ExpectErrorContaining([&] { with_file(good + "# 5\n"); }, {"line 9", "image index 5"});
  test::ExpectErrorContaining([&] { with_file("# 0\nimg0.png\n3\n8\n10\n2\n1 0.9 2 1 6 5\n"); },
                              {"ends where window 1 of image 0"});
  test::ExpectErrorContaining([&] { with_file("# 0\nimg0.png\n3\n8\n10\n1\n0 0.9 2 1 6 5\n"); },
                              {"line 7", "positive class"});
  test::ExpectErrorContaining([&] { with_file(""); }, {"lists no images"});
  // A missing image is named when a window of it is read, or at set-up with cache_images.
  const std::string missing = Block(0, "gone.png", {"1 0.9 2 1 6 5", "0 0.1 4 2 9 7"});
  test::ExpectErrorContaining([&] { with_file(missing); }, {"gone.png", "line 2"});
  test::ExpectErrorContaining([&] { with_file(missing, "batch_size: 4 crop_size: 4 cache_images: true"); },
                              {"gone.png", "line 2"});
  // A batch that needs foreground (or background) windows where there are none.
  test::ExpectErrorContaining([&] { with_file(Block(0, "img0.png", {"0 0.1 4 2 9 7"})); },
                              {"1 foreground windows", "fg_threshold"});
  test::ExpectErrorContaining([&] { with_file(Block(0, "img0.png", {"1 0.9 2 1 6 5"})); },
                              {"3 background windows", "bg_threshold"});
  // Either is fine when the batch does not need it.
  with_file(Block(0, "img0.png", {"0 0.1 4 2 9 7"}), "batch_size: 3 crop_size: 4");
  with_file(Block(0, "img0.png", {"1 0.9 2 1 6 5"}), "batch_size: 3 crop_size: 4 fg_fraction: 1");
  // Parameters.
  test::ExpectErrorContaining([&] { with_file(good, "batch_size: 4"); }, {"crop_size"});
  test::ExpectErrorContaining([&] { with_file(good, "batch_size: 4 crop_size: 4 context_pad: 2"); }, {"context_pad"});
  test::ExpectErrorContaining([&] { with_file(good, "batch_size: 4 crop_size: 4 crop_mode: 'round'"); }, {"crop_mode"});
  test::ExpectErrorContaining([&] { with_file(good, "crop_size: 4"); }, {"batch_size"});
}

#else  // !CREMA_USE_OPENCV

TEST(WindowDataLayerTest, NeedsOpenCv) {
  GTEST_SKIP() << "built without OpenCV (CREMA_USE_OPENCV=OFF): the WindowData layer cannot read images";
}

// What such a build can check: resizing a window (OpenCV's bilinear resize) fails saying why.
TEST(WindowDataLayerTest, WithoutOpenCvResizingAWindowSaysWhy) {
  EXPECT_FALSE(ImageCodecsAvailable());
  Datum image;
  image.set_channels(1);
  image.set_height(2);
  image.set_width(2);
  image.set_data(std::string(4, '\0'));
  test::ExpectErrorContaining([&] { CropResizeDatum(image, 0, 0, 1, 1, 3, 3, false); },
                              {"built without OpenCV", "3x3"});
}

#endif  // CREMA_USE_OPENCV

}  // namespace
}  // namespace crema
