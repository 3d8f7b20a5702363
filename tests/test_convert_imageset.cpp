// convert_imageset: image files written here with OpenCV (PNG and JPEG, colour and grey, of several sizes) are
// converted, and every record is checked against the image decoded here, independently: its key and place,
// label, shape and pixels; with --gray, --resize, --encoded (the stored bytes decode to the same image),
// --shuffle (a reproducible permutation), --check_size, both backends; unreadable files skipped and counted;
// the errors of bad lists and flags. The tool itself runs where its command line matters. Last, the issue's
// acceptance: generated images of three classes -> convert_imageset -> compute_image_mean -> crema train of
// examples/images/train_val.prototxt reaches a test accuracy far above chance, and so does an ImageData net
// reading the list directly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#ifdef CREMA_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

#include "core/random.hpp"
#include "io/db.hpp"
#include "io/image_io.hpp"
#include "io/image_set.hpp"
#include "io/proto_io.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

const std::string kTool = test::ToolsDir() + "/convert_imageset";

using test::WriteText;

// Every record of a database, in key order.
std::vector<std::pair<std::string, Datum>> Records(const std::string& path,
                                                   DataParameter::DB backend = DataParameter::LMDB) {
  std::vector<std::pair<std::string, Datum>> records;
  std::unique_ptr<DbReader> reader = OpenDbReader(backend, path);
  for (; reader->Valid(); reader->Next()) {
    Datum datum;
    EXPECT_TRUE(datum.ParseFromString(reader->value())) << reader->key();
    records.emplace_back(reader->key(), datum);
  }
  return records;
}

// The list parser needs no image codec.

TEST(ReadImageListTest, PathsMayHoldSpacesAndTheLabelIsTheLastField) {
  test::TempDir dir;
  WriteText(dir.file("list.txt"),
            "a.jpg 0\n"
            "\n"
            "sub dir/b c.png\t7\r\n"
            "  d.png   -2  \n"
            "   \n"
            "e.JPEG 12");  // no final newline
  const std::vector<ImageListEntry> entries = ReadImageList(dir.file("list.txt"));
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].path, "a.jpg");
  EXPECT_EQ(entries[0].label, 0);
  EXPECT_EQ(entries[0].line, 1);
  EXPECT_EQ(entries[1].path, "sub dir/b c.png");
  EXPECT_EQ(entries[1].label, 7);
  EXPECT_EQ(entries[1].line, 3);
  EXPECT_EQ(entries[2].path, "d.png");
  EXPECT_EQ(entries[2].label, -2);
  EXPECT_EQ(entries[2].line, 4);
  EXPECT_EQ(entries[3].path, "e.JPEG");
  EXPECT_EQ(entries[3].label, 12);
  EXPECT_EQ(entries[3].line, 6);
}

TEST(ReadImageListTest, BadListsNameTheFileAndTheLine) {
  test::TempDir dir;
  test::ExpectErrorContaining([&] { ReadImageList(dir.file("missing.txt")); },
                              {"cannot open", dir.file("missing.txt")});
  WriteText(dir.file("empty.txt"), "\n  \n");
  test::ExpectErrorContaining([&] { ReadImageList(dir.file("empty.txt")); }, {dir.file("empty.txt"), "no images"});
  WriteText(dir.file("word.txt"), "a.png 1\n\nmy cat.png cat\n");
  test::ExpectErrorContaining([&] { ReadImageList(dir.file("word.txt")); },
                              {"line 3", dir.file("word.txt"), "'cat'", "not an integer"});
  WriteText(dir.file("sign.txt"), "a.png -\n");
  test::ExpectErrorContaining([&] { ReadImageList(dir.file("sign.txt")); }, {"line 1", "'-'", "not an integer"});
  WriteText(dir.file("huge.txt"), "a.png 99999999999\n");
  test::ExpectErrorContaining([&] { ReadImageList(dir.file("huge.txt")); }, {"line 1", "an int holds"});
}

// As Caffe reads a list (the label with atoi): a line without a label gets 0, and a label that is not a whole
// number its leading integer, each named in one warning per file.
TEST(ReadImageListTest, MissingAndFractionalLabelsReadAsCaffeDoes) {
  test::TempDir dir;
  WriteText(dir.file("list.txt"), "a.png 1\nb.png\nc d.png 3.7\ne.png 3.0\nf.png\ng.png 2x\n");
  test::LoggedWarnings warnings;
  const std::vector<ImageListEntry> entries = ReadImageList(dir.file("list.txt"));
  ASSERT_EQ(entries.size(), 6u);
  const char* paths[] = {"a.png", "b.png", "c d.png", "e.png", "f.png", "g.png"};
  const int labels[] = {1, 0, 3, 3, 0, 2};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(entries[i].path, paths[i]);
    EXPECT_EQ(entries[i].label, labels[i]) << i;
    EXPECT_EQ(entries[i].line, i + 1);
  }
  ASSERT_EQ(warnings.lines().size(), 2u);
  for (const char* part : {"line 2", "list.txt", "b.png", "no label", "label 0", "as Caffe does"})
    EXPECT_NE(warnings.lines()[0].find(part), std::string::npos) << warnings.lines()[0];
  for (const char* part : {"line 3", "list.txt", "'3.7'", "read as 3", "as Caffe does"})
    EXPECT_NE(warnings.lines()[1].find(part), std::string::npos) << warnings.lines()[1];
  // Another file warns again.
  WriteText(dir.file("other.txt"), "b.png\n");
  EXPECT_EQ(ReadImageList(dir.file("other.txt"))[0].label, 0);
  EXPECT_EQ(warnings.lines().size(), 3u);
}

TEST(ReadImageListTest, ShuffleIsAReproduciblePermutation) {
  std::vector<ImageListEntry> entries(50);
  for (int i = 0; i < 50; ++i) entries[i] = {"img" + std::to_string(i), i, i + 1};
  std::vector<ImageListEntry> first = entries, again = entries, other = entries;
  ShuffleImageList(1701, &first);
  ShuffleImageList(1701, &again);
  ShuffleImageList(1702, &other);
  auto paths = [](const std::vector<ImageListEntry>& list) {
    std::vector<std::string> result;
    for (const auto& entry : list) result.push_back(entry.path);
    return result;
  };
  EXPECT_EQ(paths(first), paths(again));
  EXPECT_NE(paths(first), paths(entries));
  EXPECT_NE(paths(first), paths(other));
  std::vector<std::string> sorted = paths(first), original = paths(entries);
  std::sort(sorted.begin(), sorted.end());
  std::sort(original.begin(), original.end());
  EXPECT_EQ(sorted, original);
  for (const auto& entry : first) EXPECT_EQ(entry.path, "img" + std::to_string(entry.label));  // labels travel along
}

TEST(ImageSetKeyTest, IsCaffesKey) {
  EXPECT_EQ(ImageSetKey(0, "a/b.jpg"), "00000000_a/b.jpg");
  EXPECT_EQ(ImageSetKey(1234, "x y.png"), "00001234_x y.png");
}

#ifdef CREMA_USE_OPENCV

// An image as written to a file, with its label.
struct TestImage {
  std::string path;  // relative to the folder
  cv::Mat pixels;    // as written: B G R or grey
  int label = 0;
};

cv::Mat RandomImage(RandomStream* random, int height, int width, int channels) {
  cv::Mat image(height, width, CV_8UC(channels));
  for (int h = 0; h < height; ++h) {
    unsigned char* row = image.ptr<unsigned char>(h);
    for (int i = 0; i < width * channels; ++i) row[i] = static_cast<unsigned char>(random->UniformInt(256));
  }
  return image;
}

// A folder of images and a list naming them.
class ImageFolder {
 public:
  std::string root() const { return dir_.path() + "/"; }
  std::string file(const std::string& name) const { return dir_.file(name); }

  void Add(const std::string& path, const cv::Mat& pixels, int label) {
    EXPECT_TRUE(cv::imwrite(dir_.file(path), pixels)) << path;
    images_.push_back({path, pixels, label});
  }
  // Random images: PNG and JPEG, colour and grey, of several sizes (a 'sub dir/' and a space in some names).
  void AddMixed(int count, uint64_t seed) {
    RandomStream random(seed);
    std::filesystem::create_directories(dir_.file("sub dir"));
    for (int i = 0; i < count; ++i) {
      const int channels = i % 3 == 2 ? 1 : 3;
      const char* extension = i % 2 == 0 ? ".png" : ".jpg";
      const std::string name = (i % 4 == 3 ? "sub dir/image " : "image") + std::to_string(i) + extension;
      Add(name, RandomImage(&random, 5 + i % 4, 6 + (i * 3) % 5, channels), i % 5);
    }
  }
  const std::vector<TestImage>& images() const { return images_; }

  // Writes the list of every image added, in order, and returns its path.
  std::string WriteList(const std::string& name = "list.txt") const {
    std::string text;
    for (const TestImage& image : images_) text += image.path + " " + std::to_string(image.label) + "\n";
    WriteText(dir_.file(name), text);
    return dir_.file(name);
  }

 private:
  test::TempDir dir_;
  std::vector<TestImage> images_;
};

// A decoded image's bytes as a raw Datum holds them: channel by channel, row by row.
std::string ChannelMajor(const cv::Mat& image) {
  const int channels = image.channels();
  std::string bytes(static_cast<size_t>(image.total()) * channels, '\0');
  for (int h = 0; h < image.rows; ++h)
    for (int w = 0; w < image.cols; ++w)
      for (int c = 0; c < channels; ++c)
        bytes[(static_cast<size_t>(c) * image.rows + h) * image.cols + w] =
            static_cast<char>(image.ptr<unsigned char>(h)[w * channels + c]);
  return bytes;
}

// The image convert_imageset should store for `file`, decoded here with OpenCV alone.
cv::Mat Reference(const std::string& file, bool gray, int height = 0, int width = 0) {
  cv::Mat image = cv::imread(file, gray ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR);
  EXPECT_FALSE(image.empty()) << file;
  if (height > 0) cv::resize(image, image, cv::Size(width, height), 0, 0, cv::INTER_LINEAR);
  return image;
}

void ExpectRawDatumIs(const Datum& datum, const cv::Mat& image, const std::string& what) {
  EXPECT_FALSE(datum.encoded()) << what;
  EXPECT_EQ(datum.channels(), image.channels()) << what;
  EXPECT_EQ(datum.height(), image.rows) << what;
  EXPECT_EQ(datum.width(), image.cols) << what;
  EXPECT_TRUE(datum.data() == ChannelMajor(image)) << what << ": the pixels differ";
}

TEST(ConvertImageSetTest, EveryImageBecomesARecordInListOrder) {
  ImageFolder folder;
  folder.AddMixed(12, 3);
  const std::string list = folder.WriteList();
  const ImageSetResult result = ConvertImageSet(folder.root(), list, folder.file("db"), {});
  EXPECT_EQ(result.listed, 12);
  EXPECT_EQ(result.records, 12);
  EXPECT_TRUE(result.skipped.empty());
  EXPECT_EQ(DetectDbBackend(folder.file("db")), DataParameter::LMDB);
  const auto records = Records(folder.file("db"));
  ASSERT_EQ(records.size(), 12u);
  for (size_t i = 0; i < records.size(); ++i) {
    const TestImage& image = folder.images()[i];
    const Datum& datum = records[i].second;
    EXPECT_EQ(records[i].first, ImageSetKey(static_cast<int64_t>(i), image.path));
    EXPECT_EQ(datum.label(), image.label) << image.path;
    // Three channels also for a grey file (Caffe's is_color).
    ExpectRawDatumIs(datum, Reference(folder.file(image.path), false), image.path);
    // A PNG holds exactly what was written.
    if (image.path.find(".png") != std::string::npos) {
      cv::Mat written = image.pixels;
      if (written.channels() == 1) cv::cvtColor(written, written, cv::COLOR_GRAY2BGR);
      EXPECT_TRUE(datum.data() == ChannelMajor(written)) << image.path;
    }
  }
}

TEST(ConvertImageSetTest, GrayGivesOneChannel) {
  ImageFolder folder;
  folder.AddMixed(6, 4);
  ImageSetOptions options;
  options.gray = true;
  ConvertImageSet(folder.root(), folder.WriteList(), folder.file("db"), options);
  const auto records = Records(folder.file("db"));
  ASSERT_EQ(records.size(), 6u);
  for (size_t i = 0; i < records.size(); ++i) {
    const TestImage& image = folder.images()[i];
    const Datum& datum = records[i].second;
    ExpectRawDatumIs(datum, Reference(folder.file(image.path), true), image.path);
    if (image.path.find(".png") == std::string::npos) continue;
    // A PNG's grey values are its weighted B, G, R (grey files: as written), within rounding.
    for (int h = 0; h < image.pixels.rows; ++h) {
      for (int w = 0; w < image.pixels.cols; ++w) {
        const unsigned char* pixel = image.pixels.ptr<unsigned char>(h) + w * image.pixels.channels();
        const double expected =
            image.pixels.channels() == 1 ? pixel[0] : 0.114 * pixel[0] + 0.587 * pixel[1] + 0.299 * pixel[2];
        EXPECT_NEAR(static_cast<uint8_t>(datum.data()[h * image.pixels.cols + w]), expected, 1.0) << image.path;
      }
    }
  }
}

TEST(ConvertImageSetTest, ResizeGivesOneSizeThatCheckSizeAccepts) {
  ImageFolder folder;
  folder.AddMixed(8, 5);
  ImageSetOptions options;
  options.resize_height = 7;
  options.resize_width = 4;
  options.check_size = true;
  ConvertImageSet(folder.root(), folder.WriteList(), folder.file("db"), options);
  const auto records = Records(folder.file("db"));
  ASSERT_EQ(records.size(), 8u);
  for (size_t i = 0; i < records.size(); ++i) {
    const TestImage& image = folder.images()[i];
    ExpectRawDatumIs(records[i].second, Reference(folder.file(image.path), false, 7, 4), image.path);
  }
}

TEST(ConvertImageSetTest, CheckSizeNamesTheFileAndBothSizes) {
  ImageFolder folder;
  RandomStream random(6);
  folder.Add("first.png", RandomImage(&random, 4, 5, 3), 0);
  folder.Add("same.png", RandomImage(&random, 4, 5, 3), 1);
  folder.Add("taller.png", RandomImage(&random, 6, 5, 3), 2);
  const std::string list = folder.WriteList();
  ImageSetOptions options;
  options.check_size = true;
  test::ExpectErrorContaining(
      [&] { ConvertImageSet(folder.root(), list, folder.file("db"), options); },
      {folder.file("taller.png"), "line 3", "3 x 6 x 5", folder.file("first.png"), "3 x 4 x 5"});
  // A failed conversion leaves no database behind.
  EXPECT_FALSE(FileExists(folder.file("db")));
  // Without the check, the sizes are kept as they are.
  ConvertImageSet(folder.root(), list, folder.file("db"), {});
  const auto records = Records(folder.file("db"));
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[2].second.height(), 6);

  std::string output;
  EXPECT_EQ(test::RunCommand(kTool + " --check_size " + folder.root() + " " + list + " " + folder.file("db2"), &output),
            1);
  EXPECT_CONTAINS(output, "convert_imageset: error: ");
  EXPECT_CONTAINS(output, "3 x 6 x 5");
  EXPECT_FALSE(FileExists(folder.file("db2")));
}

TEST(ConvertImageSetTest, ShuffleWritesAReproduciblePermutation) {
  ImageFolder folder;
  folder.AddMixed(20, 7);
  const std::string list = folder.WriteList();
  std::map<std::string, int> labels;
  for (const TestImage& image : folder.images()) labels[image.path] = image.label;
  std::string output;
  auto keys = [&](const std::string& db, const std::string& flags) {
    EXPECT_EQ(
        test::RunCommand(kTool + " " + flags + " '" + folder.root() + "' " + list + " " + folder.file(db), &output), 0)
        << output;
    EXPECT_CONTAINS(output, "Shuffling data");
    std::vector<std::string> result;
    for (const auto& [key, datum] : Records(folder.file(db))) {
      // The key's index counts the records in their shuffled order; the label is the path's.
      EXPECT_EQ(key.substr(0, 9), ImageSetKey(static_cast<int64_t>(result.size()), ""));
      const std::string path = key.substr(9);
      EXPECT_EQ(datum.label(), labels.at(path)) << path;
      ExpectRawDatumIs(datum, Reference(folder.file(path), false), path);
      result.push_back(path);
    }
    return result;
  };
  const std::vector<std::string> shuffled = keys("a", "--shuffle");
  EXPECT_EQ(keys("b", "--shuffle"), shuffled);
  EXPECT_NE(keys("c", "--shuffle --shuffle_seed=99"), shuffled);
  std::vector<std::string> in_order;
  for (const TestImage& image : folder.images()) in_order.push_back(image.path);
  EXPECT_NE(shuffled, in_order);
  std::vector<std::string> sorted = shuffled;
  std::sort(sorted.begin(), sorted.end());
  std::sort(in_order.begin(), in_order.end());
  EXPECT_EQ(sorted, in_order);
}

// --encoded keeps each file's bytes where nothing changes them; they decode to the image the raw conversion
// stores.
TEST(ConvertImageSetTest, EncodedKeepsTheFilesBytes) {
  ImageFolder folder;
  folder.AddMixed(8, 8);
  const std::string list = folder.WriteList();
  ConvertImageSet(folder.root(), list, folder.file("raw"), {});
  ImageSetOptions options;
  options.encoded = true;
  ConvertImageSet(folder.root(), list, folder.file("encoded"), options);
  const auto raw = Records(folder.file("raw")), encoded = Records(folder.file("encoded"));
  ASSERT_EQ(encoded.size(), 8u);
  ASSERT_EQ(raw.size(), 8u);
  for (size_t i = 0; i < encoded.size(); ++i) {
    const TestImage& image = folder.images()[i];
    const Datum& datum = encoded[i].second;
    EXPECT_EQ(encoded[i].first, raw[i].first);
    EXPECT_TRUE(datum.encoded()) << image.path;
    EXPECT_EQ(datum.label(), image.label) << image.path;
    if (image.pixels.channels() == 3) {
      EXPECT_TRUE(datum.data() == test::FileBytes(folder.file(image.path))) << image.path << ": not the file's bytes";
    }
    // A grey file, where three channels are asked for, is re-encoded in its own format; a PNG then decodes exactly
    // to the raw record, a JPEG nearly.
    const Datum decoded = DecodeDatum(datum, ImageColor::kAsStored);
    ASSERT_EQ(decoded.channels(), 3) << image.path;
    ASSERT_EQ(decoded.data().size(), raw[i].second.data().size()) << image.path;
    const bool exact = image.pixels.channels() == 3 || image.path.find(".png") != std::string::npos;
    if (exact) {
      EXPECT_TRUE(decoded.data() == raw[i].second.data()) << image.path;
    } else {
      EXPECT_EQ(datum.data().substr(0, 2), "\xff\xd8") << image.path << ": not re-encoded as a JPEG";
      for (size_t p = 0; p < decoded.data().size(); ++p) {
        EXPECT_NEAR(static_cast<uint8_t>(decoded.data()[p]), static_cast<uint8_t>(raw[i].second.data()[p]), 24)
            << image.path;
      }
    }
  }
}

// --encode_type re-encodes every image (it implies --encoded); with --resize or --gray the files are re-encoded
// too. PNG is lossless: the records decode exactly to the raw conversion's.
// A damaged header that claims gigapixels is refused before OpenCV allocates and decodes them (found by the datum
// fuzzer: 393 bytes of JPEG claiming 63802 x 12079); a large image that compresses well still decodes.
TEST(DecodeDatumTest, AHeaderClaimingMorePixelsThanItsBytesHoldIsRefused) {
  const std::vector<unsigned char> flat(2048 * 2048 * 3, 200);
  for (const char* format : {".png", ".jpg"}) {
    Datum large;
    large.set_encoded(true);
    large.set_data(EncodeImage(format, flat.data(), 2048, 2048, 3));
    const Datum decoded = DecodeDatum(large, ImageColor::kAsStored);
    EXPECT_EQ(decoded.height(), 2048) << format << ", " << large.data().size() << " bytes";
    EXPECT_EQ(decoded.width(), 2048) << format;
  }
  const std::vector<unsigned char> small(8 * 8, 7);
  for (const char* format : {".png", ".jpg"}) {
    std::string bytes = EncodeImage(format, small.data(), 8, 8, 1);
    // Claim 32512 x 63802 (height x width): PNG's IHDR holds width then height (4 bytes each, from byte 16), a
    // JPEG's first frame header height then width (2 bytes each, 5 bytes past its marker).
    if (std::string(format) == ".png") {
      bytes.replace(16, 8, std::string("\x00\x00\xf9\x3a\x00\x00\x7f\x00", 8));
    } else {
      const size_t frame = bytes.find("\xff\xc0");
      ASSERT_NE(frame, std::string::npos);
      bytes.replace(frame + 5, 4, std::string("\x7f\x00\xf9\x3a", 4));
    }
    Datum damaged;
    damaged.set_encoded(true);
    damaged.set_data(bytes);
    test::ExpectErrorContaining(
        [&] { DecodeDatum(damaged, ImageColor::kAsStored); },
        {"claims an image of 32512 x 63802 pixels", "more than so few compressed bytes can hold"});
  }
}

TEST(ConvertImageSetTest, EncodeTypeResizeAndGrayReencode) {
  ImageFolder folder;
  folder.AddMixed(8, 9);
  const std::string list = folder.WriteList();
  struct Case {
    const char* name;
    bool gray;
    int height, width;
  };
  for (const Case& c : {Case{"png", false, 0, 0}, Case{"png_gray", true, 0, 0}, Case{"png_resized", false, 5, 9}}) {
    ImageSetOptions raw_options, options;
    raw_options.gray = options.gray = c.gray;
    raw_options.resize_height = options.resize_height = c.height;
    raw_options.resize_width = options.resize_width = c.width;
    options.encode_type = "png";
    ConvertImageSet(folder.root(), list, folder.file(std::string(c.name) + "_raw"), raw_options);
    ConvertImageSet(folder.root(), list, folder.file(c.name), options);
    const auto raw = Records(folder.file(std::string(c.name) + "_raw")), encoded = Records(folder.file(c.name));
    ASSERT_EQ(encoded.size(), raw.size()) << c.name;
    for (size_t i = 0; i < encoded.size(); ++i) {
      const std::string what = std::string(c.name) + " " + folder.images()[i].path;
      const Datum& datum = encoded[i].second;
      EXPECT_TRUE(datum.encoded()) << what;
      EXPECT_EQ(datum.data().substr(0, 4), "\x89PNG") << what;
      const Datum decoded = DecodeDatum(datum, ImageColor::kAsStored);
      EXPECT_EQ(decoded.channels(), c.gray ? 1 : 3) << what;
      EXPECT_EQ(decoded.label(), raw[i].second.label()) << what;
      ExpectRawDatumIs(raw[i].second, Reference(folder.file(folder.images()[i].path), c.gray, c.height, c.width), what);
      EXPECT_EQ(decoded.height(), raw[i].second.height()) << what;
      EXPECT_EQ(decoded.width(), raw[i].second.width()) << what;
      EXPECT_TRUE(decoded.data() == raw[i].second.data()) << what;
    }
  }
  // A resized JPEG is re-encoded as a JPEG (the file's own format), through the tool.
  std::string output;
  ASSERT_EQ(test::RunCommand(kTool + " --encoded --resize_height=6 --resize_width=6 --check_size " + folder.root() +
                                 " " + list + " " + folder.file("jpg_resized"),
                             &output),
            0)
      << output;
  const auto records = Records(folder.file("jpg_resized"));
  ASSERT_EQ(records.size(), 8u);
  for (size_t i = 0; i < records.size(); ++i) {
    const bool png = folder.images()[i].path.find(".png") != std::string::npos;
    EXPECT_EQ(records[i].second.data().substr(0, 2), png ? "\x89P" : "\xff\xd8") << folder.images()[i].path;
    const Datum decoded = DecodeDatum(records[i].second, ImageColor::kAsStored);
    EXPECT_EQ(decoded.height(), 6);
    EXPECT_EQ(decoded.width(), 6);
  }
}

TEST(ConvertImageSetTest, LevelDbHoldsTheSameRecords) {
  ImageFolder folder;
  folder.AddMixed(7, 10);
  const std::string list = folder.WriteList();
  std::string output;
  ASSERT_EQ(
      test::RunCommand(kTool + " --backend=leveldb " + folder.root() + " " + list + " " + folder.file("ldb"), &output),
      0)
      << output;
  ASSERT_EQ(test::RunCommand(kTool + " " + folder.root() + " " + list + " " + folder.file("lmdb"), &output), 0)
      << output;
  EXPECT_EQ(DetectDbBackend(folder.file("ldb")), DataParameter::LEVELDB);
  const auto leveldb = Records(folder.file("ldb"), DataParameter::LEVELDB), lmdb = Records(folder.file("lmdb"));
  ASSERT_EQ(leveldb.size(), 7u);
  ASSERT_EQ(lmdb.size(), 7u);
  for (size_t i = 0; i < leveldb.size(); ++i) {
    EXPECT_EQ(leveldb[i].first, lmdb[i].first);
    EXPECT_EQ(leveldb[i].second.SerializeAsString(), lmdb[i].second.SerializeAsString()) << leveldb[i].first;
  }
}

// Files that are missing, empty, truncated or no images at all are named with their list line, skipped (their
// index left unused), and counted at the end.
TEST(ConvertImageSetTest, UnreadableImagesAreSkippedAndCounted) {
  ImageFolder folder;
  RandomStream random(11);
  folder.Add("good.png", RandomImage(&random, 4, 4, 3), 0);
  folder.Add("good.jpg", RandomImage(&random, 4, 4, 3), 1);
  WriteText(folder.file("text.jpg"), "this is not an image\n");
  WriteText(folder.file("empty.png"), "");
  const std::string png = test::FileBytes(folder.file("good.png"));
  WriteText(folder.file("truncated.png"), png.substr(0, png.size() / 2));
  WriteText(folder.file("list.txt"),
            "good.png 0\nmissing.png 1\ntext.jpg 2\nempty.png 3\ntruncated.png 4\ngood.jpg 5\n");
  for (const bool encoded : {false, true}) {
    const std::string db = folder.file(encoded ? "encoded" : "raw");
    ImageSetOptions options;
    options.encoded = encoded;
    const ImageSetResult result = ConvertImageSet(folder.root(), folder.file("list.txt"), db, options);
    EXPECT_EQ(result.listed, 6);
    EXPECT_EQ(result.records, 2);
    ASSERT_EQ(result.skipped.size(), 4u);
    const std::vector<std::string> skipped = {"missing.png", "text.jpg", "empty.png", "truncated.png"};
    for (size_t i = 0; i < skipped.size(); ++i) {
      EXPECT_EQ(result.skipped[i].entry.path, skipped[i]);
      EXPECT_EQ(result.skipped[i].entry.line, static_cast<int>(i) + 2);
      EXPECT_CONTAINS(result.skipped[i].reason, folder.file(skipped[i]));
    }
    const auto records = Records(db);
    ASSERT_EQ(records.size(), 2u);
    EXPECT_EQ(records[0].first, "00000000_good.png");
    EXPECT_EQ(records[1].first, "00000005_good.jpg");
    EXPECT_EQ(records[1].second.label(), 5);
  }

  std::string output;
  ASSERT_EQ(test::RunCommand(kTool + " " + folder.root() + " " + folder.file("list.txt") + " " + folder.file("tool"),
                             &output),
            0)
      << output;
  for (int line = 2; line <= 5; ++line) {
    EXPECT_CONTAINS(output, "line " + std::to_string(line) + " of '" + folder.file("list.txt") + "'");
  }
  for (const char* name : {"missing.png", "text.jpg", "empty.png", "truncated.png"}) {
    EXPECT_CONTAINS(output, folder.file(name));
  }
  EXPECT_CONTAINS(output, "Processed 2 files.");
  EXPECT_CONTAINS(output, "Skipped 4 of 6 files");

  // When no image can be read at all, nothing is written; the message points at a root folder without its '/'.
  WriteText(folder.file("none.txt"), "missing.png 1\ntext.jpg 2\n");
  EXPECT_EQ(test::RunCommand(kTool + " " + folder.root().substr(0, folder.root().size() - 1) + " " +
                                 folder.file("none.txt") + " " + folder.file("none"),
                             &output),
            1);
  EXPECT_CONTAINS(output, "convert_imageset: error: none of the 2 images");
  EXPECT_CONTAINS(output, "did you mean");
  EXPECT_FALSE(FileExists(folder.file("none")));
}

// Records go in transactions of 1000, each followed by Caffe's "Processed N files." line.
TEST(ConvertImageSetTest, LogsEveryThousandFiles) {
  ImageFolder folder;
  RandomStream random(12);
  folder.Add("one.png", RandomImage(&random, 2, 2, 3), 0);
  std::string list;
  for (int i = 0; i < 2500; ++i) list += "one.png " + std::to_string(i % 3) + "\n";
  WriteText(folder.file("list.txt"), list);
  std::string output;
  ASSERT_EQ(
      test::RunCommand(kTool + " " + folder.root() + " " + folder.file("list.txt") + " " + folder.file("db"), &output),
      0)
      << output;
  EXPECT_CONTAINS(output, "A total of 2500 images.");
  const size_t first = output.find("Processed 1000 files."), second = output.find("Processed 2000 files."),
               last = output.find("Processed 2500 files.");
  ASSERT_NE(first, std::string::npos) << output;
  ASSERT_NE(second, std::string::npos) << output;
  ASSERT_NE(last, std::string::npos) << output;
  EXPECT_LT(first, second);
  EXPECT_LT(second, last);
  EXPECT_CONTAINS(output, "Skipped 0 of 2500 files");
  const auto records = Records(folder.file("db"));
  ASSERT_EQ(records.size(), 2500u);
  EXPECT_EQ(records[2499].first, "00002499_one.png");
  EXPECT_EQ(records[2499].second.label(), 2499 % 3);
}

TEST(ConvertImageSetTest, CommandLineErrors) {
  ImageFolder folder;
  RandomStream random(13);
  folder.Add("a.png", RandomImage(&random, 3, 3, 3), 0);
  const std::string list = folder.WriteList();
  const std::string root = folder.root();
  std::string output;
  // Usage.
  EXPECT_EQ(test::RunCommand(kTool + " " + root + " " + list, &output), 1);
  EXPECT_CONTAINS(output, "convert_imageset [FLAGS] ROOTFOLDER/ LISTFILE DB_NAME");
  // An existing database is neither overwritten nor removed.
  std::filesystem::create_directories(folder.file("exists"));
  WriteText(folder.file("exists/keep"), "x");
  EXPECT_EQ(test::RunCommand(kTool + " " + root + " " + list + " " + folder.file("exists"), &output), 1);
  EXPECT_CONTAINS(output, "convert_imageset: error: ");
  EXPECT_CONTAINS(output, folder.file("exists"));
  EXPECT_CONTAINS(output, "already exists");
  EXPECT_EQ(test::FileBytes(folder.file("exists/keep")), "x");
  // Bad lists: the file and the line; no database is created.
  auto expect_list_error = [&](const std::string& list_text, const std::vector<std::string>& parts) {
    WriteText(folder.file("bad.txt"), list_text);
    EXPECT_EQ(
        test::RunCommand(kTool + " " + root + " " + folder.file("bad.txt") + " " + folder.file("bad_db"), &output), 1);
    EXPECT_CONTAINS(output, "convert_imageset: error: ");
    EXPECT_CONTAINS(output, folder.file("bad.txt"));
    for (const std::string& part : parts) EXPECT_CONTAINS(output, part);
    EXPECT_FALSE(FileExists(folder.file("bad_db")));
  };
  expect_list_error("", {"no images"});
  expect_list_error("a.png zero\n", {"line 1", "'zero'", "not an integer"});
  EXPECT_EQ(test::RunCommand(kTool + " " + root + " " + folder.file("nope.txt") + " " + folder.file("db"), &output), 1);
  EXPECT_CONTAINS(output, folder.file("nope.txt"));
  // Bad flags.
  auto expect_flag_error = [&](const std::string& flags, const std::vector<std::string>& parts) {
    EXPECT_EQ(test::RunCommand(kTool + " " + flags + " " + root + " " + list + " " + folder.file("db"), &output), 1)
        << flags;
    EXPECT_CONTAINS(output, "convert_imageset: error: ");
    for (const std::string& part : parts) EXPECT_CONTAINS(output, part);
    EXPECT_FALSE(FileExists(folder.file("db")));
  };
  expect_flag_error("--resize_height=-8 --resize_width=8", {"resize_height (-8)", "must both be positive"});
  // A resize on one side only is dropped, as Caffe drops it, with a warning.
  ASSERT_EQ(test::RunCommand(kTool + " --resize_height=8 " + root + " " + list + " " + folder.file("db"), &output), 0)
      << output;
  EXPECT_CONTAINS(output, "resize_height (8) and resize_width (0) are not both set: the images keep their own sizes");
  std::filesystem::remove_all(folder.file("db"));
  expect_flag_error("--encode_type=nope", {"'nope'"});
  expect_flag_error("--backend=sqlite", {"'sqlite'", "lmdb or leveldb"});
  // --encode_type alone implies --encoded.
  ASSERT_EQ(test::RunCommand(kTool + " --encode_type=jpg " + root + " " + list + " " + folder.file("db"), &output), 0)
      << output;
  const auto records = Records(folder.file("db"));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(records[0].second.encoded());
  EXPECT_EQ(records[0].second.data().substr(0, 2), "\xff\xd8");
}

// ---- the acceptance: train on converted images -------------------------------------------------------------

// An image of class 0, 1 or 2: a red square, a green disc or a blue triangle of random size and place on a
// noisy grey ground; size random too (convert_imageset resizes them).
cv::Mat ShapeImage(int label, RandomStream* random) {
  const int height = 20 + static_cast<int>(random->UniformInt(13)),
            width = 20 + static_cast<int>(random->UniformInt(13));
  cv::Mat image(height, width, CV_8UC3);
  for (int h = 0; h < height; ++h)
    for (int w = 0; w < width; ++w) {
      const int ground = 70 + static_cast<int>(random->UniformInt(60));
      for (int c = 0; c < 3; ++c) {
        image.at<cv::Vec3b>(h, w)[c] = cv::saturate_cast<unsigned char>(ground + random->Gaussian(0.f, 12.f));
      }
    }
  auto jitter = [&](int value) { return value + static_cast<int>(random->UniformInt(50)) - 25; };
  const cv::Scalar colours[3] = {cv::Scalar(jitter(40), jitter(40), jitter(215)),
                                 cv::Scalar(jitter(40), jitter(200), jitter(40)),
                                 cv::Scalar(jitter(215), jitter(70), jitter(40))};
  const int size = std::min(height, width) * (40 + static_cast<int>(random->UniformInt(25))) / 100;
  const int x = static_cast<int>(random->UniformInt(width - size)),
            y = static_cast<int>(random->UniformInt(height - size));
  if (label == 0) {
    cv::rectangle(image, cv::Rect(x, y, size, size), colours[0], cv::FILLED);
  } else if (label == 1) {
    cv::circle(image, cv::Point(x + size / 2, y + size / 2), size / 2, colours[1], cv::FILLED);
  } else {
    const cv::Point corners[3] = {cv::Point(x + size / 2, y), cv::Point(x, y + size), cv::Point(x + size, y + size)};
    cv::fillConvexPoly(image, corners, 3, colours[2]);
  }
  return image;
}

// A folder of `per_class` images of each of the three classes (JPEG and PNG), listed as train.txt or val.txt.
void WriteShapeSet(const std::string& folder, const std::string& split, int per_class, uint64_t seed) {
  RandomStream random(seed);
  std::string list;
  for (int i = 0; i < 3 * per_class; ++i) {
    const int label = i % 3;
    const std::string name = split + "_" + std::to_string(i) + (i % 2 == 0 ? ".png" : ".jpg");
    EXPECT_TRUE(cv::imwrite(folder + "/" + name, ShapeImage(label, &random))) << name;
    list += name + " " + std::to_string(label) + "\n";
  }
  WriteText(folder + "/" + split + ".txt", list);
}

// The last "Test net output #k: accuracy = X" of a training log (-1 when there is none).
double LastTestAccuracy(const std::string& log) {
  const std::regex line("Test net output #[0-9]+: accuracy = ([0-9.e+-]+)");
  double accuracy = -1;
  for (auto match = std::sregex_iterator(log.begin(), log.end(), line); match != std::sregex_iterator(); ++match) {
    accuracy = std::stod((*match)[1]);
  }
  return accuracy;
}

constexpr int kTrainPerClass = 60, kValPerClass = 25, kSide = 24;

class ImageSetTrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(images());
    WriteShapeSet(images(), "train", kTrainPerClass, 21);
    WriteShapeSet(images(), "val", kValPerClass, 22);
  }
  std::string images() const { return dir_.file("images"); }

  // examples/images/train_val.prototxt with its data paths under the temporary folder.
  NetParameter ExampleNet() const {
    std::string text = ReadFileToString(test::SourceDir() + "/examples/images/train_val.prototxt");
    text = std::regex_replace(text, std::regex("data/images/"), dir_.path() + "/");
    NetParameter net;
    ReadProtoFromText(text, "examples/images/train_val.prototxt", &net);
    return net;
  }

  // Trains `net` with examples/images/solver.prototxt, shortened, through `crema train`; returns the log.
  std::string Train(const NetParameter& net, const std::string& name) {
    WriteProtoToTextFile(net, dir_.file(name + "_net.prototxt"));
    SolverParameter solver;
    ReadProtoFromTextFile(test::SourceDir() + "/examples/images/solver.prototxt", &solver);
    solver.set_net(dir_.file(name + "_net.prototxt"));
    solver.clear_test_iter();
    solver.add_test_iter(3 * kValPerClass / 25);
    solver.set_max_iter(60);
    solver.set_test_interval(60);
    solver.set_snapshot(0);
    solver.set_snapshot_prefix(dir_.file(name));
    WriteProtoToTextFile(solver, dir_.file(name + "_solver.prototxt"));
    std::string log;
    EXPECT_EQ(
        test::RunCommand(test::ToolsDir() + "/crema train --solver=" + dir_.file(name + "_solver.prototxt"), &log), 0)
        << log;
    return log;
  }

  test::TempDir dir_;
};

TEST_F(ImageSetTrainingTest, ConvertedImagesTrainANetFarAboveChance) {
  std::string output;
  const std::string tool = kTool + " --resize_height=" + std::to_string(kSide) +
                           " --resize_width=" + std::to_string(kSide) + " --check_size ";
  ASSERT_EQ(test::RunCommand(tool + "--shuffle " + images() + "/ " + images() + "/train.txt " + dir_.file("train_lmdb"),
                             &output),
            0)
      << output;
  EXPECT_CONTAINS(output, "Processed " + std::to_string(3 * kTrainPerClass) + " files.");
  ASSERT_EQ(test::RunCommand(tool + images() + "/ " + images() + "/val.txt " + dir_.file("val_lmdb"), &output), 0)
      << output;
  ASSERT_EQ(test::RunCommand(test::ToolsDir() + "/compute_image_mean " + dir_.file("train_lmdb") + " " +
                                 dir_.file("mean.binaryproto"),
                             &output),
            0)
      << output;
  EXPECT_CONTAINS(output, "Processed " + std::to_string(3 * kTrainPerClass) + " files.");

  const std::string log = Train(ExampleNet(), "data");
  const double accuracy = LastTestAccuracy(log);
  EXPECT_GT(accuracy, 0.9) << log;  // chance: 1/3
}

// The same net reading the lists directly through ImageData layers (resizing as they read), with the mean image
// of the converted training set.
TEST_F(ImageSetTrainingTest, AnImageDataNetOnTheListsTrainsToo) {
  std::string output;
  ASSERT_EQ(test::RunCommand(kTool + " --resize_height=" + std::to_string(kSide) +
                                 " --resize_width=" + std::to_string(kSide) + " " + images() + "/ " + images() +
                                 "/train.txt " + dir_.file("train_lmdb"),
                             &output),
            0)
      << output;
  ASSERT_EQ(test::RunCommand(test::ToolsDir() + "/compute_image_mean " + dir_.file("train_lmdb") + " " +
                                 dir_.file("mean.binaryproto"),
                             &output),
            0)
      << output;
  NetParameter net = ExampleNet();
  for (int i = 0; i < 2; ++i) {
    LayerParameter* layer = net.mutable_layer(i);
    ASSERT_EQ(layer->type(), "Data");
    const bool train = layer->include(0).phase() == TRAIN;
    const int batch_size = static_cast<int>(layer->data_param().batch_size());
    layer->set_type("ImageData");
    layer->clear_data_param();
    ImageDataParameter* images_param = layer->mutable_image_data_param();
    images_param->set_source(images() + (train ? "/train.txt" : "/val.txt"));
    images_param->set_root_folder(images() + "/");
    images_param->set_batch_size(batch_size);
    images_param->set_new_height(kSide);
    images_param->set_new_width(kSide);
    images_param->set_shuffle(train);
  }
  const std::string log = Train(net, "image_data");
  EXPECT_GT(LastTestAccuracy(log), 0.9) << log;
}

// examples/images/create_imageset.sh makes both databases and the mean image from a folder with the two lists.
TEST_F(ImageSetTrainingTest, TheExampleScriptMakesTheDatabasesAndTheMean) {
  const std::string build = test::ToolsDir().substr(0, test::ToolsDir().rfind('/'));
  std::string output;
  const std::string command = "OUTPUT_DIR=" + dir_.file("out") + " CREMA_BUILD_DIR=" + build + " RESIZE_HEIGHT=12 " +
                              "RESIZE_WIDTH=10 " + test::SourceDir() + "/examples/images/create_imageset.sh " +
                              images();
  ASSERT_EQ(test::RunCommand(command, &output), 0) << output;
  const auto train = Records(dir_.file("out/train_lmdb")), val = Records(dir_.file("out/val_lmdb"));
  EXPECT_EQ(train.size(), static_cast<size_t>(3 * kTrainPerClass));
  ASSERT_EQ(val.size(), static_cast<size_t>(3 * kValPerClass));
  EXPECT_EQ(val[0].first, "00000000_val_0.png");
  EXPECT_EQ(val[0].second.height(), 12);
  EXPECT_EQ(val[0].second.width(), 10);
  std::vector<std::string> in_order, written;
  for (int i = 0; i < 3 * kTrainPerClass; ++i)
    in_order.push_back(ImageSetKey(i, "train_" + std::to_string(i) + ".png"));
  for (const auto& record : train) written.push_back(record.first);
  EXPECT_NE(written, in_order);  // shuffled
  BlobProto mean;
  ReadProtoFromBinaryFile(dir_.file("out/mean.binaryproto"), &mean);
  EXPECT_EQ(mean.channels(), 3);
  EXPECT_EQ(mean.height(), 12);
  EXPECT_EQ(mean.width(), 10);
  // A second run keeps what is there.
  ASSERT_EQ(test::RunCommand(command, &output), 0) << output;
  EXPECT_CONTAINS(output, "exists; keeping it");
}

#else  // !CREMA_USE_OPENCV

TEST(ConvertImageSetTest, ABuildWithoutOpenCvSaysSo) {
  test::TempDir dir;
  WriteText(dir.file("list.txt"), "a.png 0\n");
  test::ExpectErrorContaining([&] { ConvertImageSet(dir.path() + "/", dir.file("list.txt"), dir.file("db"), {}); },
                              {"without OpenCV"});
  EXPECT_FALSE(FileExists(dir.file("db")));
}

#endif  // CREMA_USE_OPENCV

}  // namespace
}  // namespace crema
