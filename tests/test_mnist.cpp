#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/lmdb.hpp"
#include "io/mnist.hpp"
#include "io/proto_io.hpp"

namespace crema {
namespace {

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/crema_test_mnist_XXXXXX";
    const char* created = mkdtemp(pattern);
    if (created == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = created;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string path(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

template <typename Statement>
void ExpectErrorContaining(Statement statement, const std::vector<std::string>& parts) {
  try {
    statement();
    ADD_FAILURE() << "expected a crema::Error";
  } catch (const Error& error) {
    for (const auto& part : parts)
      EXPECT_NE(std::string(error.what()).find(part), std::string::npos)
          << "the error '" << error.what() << "' does not mention '" << part << "'";
  }
}

std::string BigEndian(uint32_t value) {
  return {static_cast<char>(value >> 24), static_cast<char>(value >> 16), static_cast<char>(value >> 8),
          static_cast<char>(value)};
}

// Three 2x3 images (pixel j of image i is 40*i + j, the last one 250..255) and their labels 7, 0, 9.
std::string ImagesFile() {
  std::string contents = BigEndian(2051) + BigEndian(3) + BigEndian(2) + BigEndian(3);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 6; ++j) contents += static_cast<char>(i == 2 ? 250 + j : 40 * i + j);
  }
  return contents;
}
std::string LabelsFile() { return BigEndian(2049) + BigEndian(3) + std::string("\x07\x00\x09", 3); }

void WritePlain(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary) << contents;
}
void WriteGzipped(const std::string& path, const std::string& contents) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, contents.data(), static_cast<unsigned>(contents.size())), static_cast<int>(contents.size()));
  ASSERT_EQ(gzclose(file), Z_OK);
}

void ExpectTinyDataSet(const MnistImages& images, const std::string& labels) {
  EXPECT_EQ(images.count, 3);
  EXPECT_EQ(images.rows, 2);
  EXPECT_EQ(images.columns, 3);
  ASSERT_EQ(images.pixels.size(), 18u);
  EXPECT_EQ(static_cast<uint8_t>(images.pixels[7]), 41);
  EXPECT_EQ(static_cast<uint8_t>(images.pixels[17]), 255);
  EXPECT_EQ(labels, std::string("\x07\x00\x09", 3));
}

TEST(MnistTest, ReadsPlainAndGzippedFiles) {
  TempDir dir;
  WritePlain(dir.path("images"), ImagesFile());
  WritePlain(dir.path("labels"), LabelsFile());
  ExpectTinyDataSet(ReadMnistImages(dir.path("images")), ReadMnistLabels(dir.path("labels")));
  WriteGzipped(dir.path("images.gz"), ImagesFile());
  WriteGzipped(dir.path("labels.gz"), LabelsFile());
  ASSERT_NE(ReadFileToString(dir.path("images.gz")), ImagesFile());  // really compressed
  ExpectTinyDataSet(ReadMnistImages(dir.path("images.gz")), ReadMnistLabels(dir.path("labels.gz")));
}

TEST(MnistTest, WrongMagicAndTruncationNameTheFile) {
  TempDir dir;
  WritePlain(dir.path("labels"), LabelsFile());
  ExpectErrorContaining([&] { ReadMnistImages(dir.path("labels")); },
                        {"'" + dir.path("labels") + "'", "2049", "expected 2051", "label file"});
  ExpectErrorContaining([&] { ReadMnistLabels(dir.path("missing")); }, {dir.path("missing"), "No such file"});

  const std::string images = ImagesFile();
  WritePlain(dir.path("short_pixels"), images.substr(0, images.size() - 1));
  ExpectErrorContaining([&] { ReadMnistImages(dir.path("short_pixels")); },
                        {dir.path("short_pixels"), "truncated", "18 bytes", "only 17"});
  WritePlain(dir.path("short_header"), images.substr(0, 10));
  ExpectErrorContaining([&] { ReadMnistImages(dir.path("short_header")); },
                        {dir.path("short_header"), "truncated", "header"});
  WriteGzipped(dir.path("short_labels.gz"), LabelsFile().substr(0, 9));
  ExpectErrorContaining([&] { ReadMnistLabels(dir.path("short_labels.gz")); },
                        {dir.path("short_labels.gz"), "truncated"});

  // A gzip stream cut short: zlib reports it, or the data come out short; either way the file is named.
  WriteGzipped(dir.path("cut.gz"), ImagesFile());
  const std::string compressed = ReadFileToString(dir.path("cut.gz"));
  WritePlain(dir.path("cut.gz"), compressed.substr(0, compressed.size() / 2));
  ExpectErrorContaining([&] { ReadMnistImages(dir.path("cut.gz")); }, {dir.path("cut.gz")});
}

TEST(MnistTest, ConvertsToLmdbWithCaffeKeys) {
  TempDir dir;
  WriteGzipped(dir.path("images.gz"), ImagesFile());
  WriteGzipped(dir.path("labels.gz"), LabelsFile());
  const std::string db = dir.path("db");
  EXPECT_EQ(ConvertMnistToLmdb(dir.path("images.gz"), dir.path("labels.gz"), db), 3);

  LmdbReader reader(db);
  EXPECT_EQ(reader.size(), 3u);
  const std::vector<std::string> keys = {"00000000", "00000001", "00000002"};
  const std::vector<int> labels = {7, 0, 9};
  for (int i = 0; i < 3; ++i, reader.Next()) {
    ASSERT_TRUE(reader.Valid());
    EXPECT_EQ(reader.key(), keys[i]);
    Datum datum;
    ASSERT_TRUE(datum.ParseFromString(reader.value()));
    EXPECT_EQ(datum.channels(), 1);
    EXPECT_EQ(datum.height(), 2);
    EXPECT_EQ(datum.width(), 3);
    EXPECT_EQ(datum.label(), labels[i]);
    EXPECT_FALSE(datum.encoded());
    EXPECT_EQ(datum.data(), ImagesFile().substr(16 + 6 * i, 6));
  }
  EXPECT_FALSE(reader.Valid());

  // Never over an existing data set.
  ExpectErrorContaining([&] { ConvertMnistToLmdb(dir.path("images.gz"), dir.path("labels.gz"), db); },
                        {db, "already exists"});
}

TEST(MnistTest, CountMismatchNamesBothFiles) {
  TempDir dir;
  WritePlain(dir.path("images"), ImagesFile());
  WritePlain(dir.path("labels"), BigEndian(2049) + BigEndian(2) + std::string("\x01\x02", 2));
  ExpectErrorContaining([&] { ConvertMnistToLmdb(dir.path("images"), dir.path("labels"), dir.path("db")); },
                        {dir.path("images"), "3 images", dir.path("labels"), "2 labels"});
  EXPECT_FALSE(std::filesystem::exists(dir.path("db")));  // checked before anything is written
}

}  // namespace
}  // namespace crema
