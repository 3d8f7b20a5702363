#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/db.hpp"
#include "io/lmdb.hpp"
#include "io/proto_io.hpp"
#include "test_util.hpp"
#include "tools/lib/mnist.hpp"

namespace crema {
namespace {

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
  test::TempDir dir;
  WritePlain(dir.file("images"), ImagesFile());
  WritePlain(dir.file("labels"), LabelsFile());
  ExpectTinyDataSet(ReadMnistImages(dir.file("images")), ReadMnistLabels(dir.file("labels")));
  WriteGzipped(dir.file("images.gz"), ImagesFile());
  WriteGzipped(dir.file("labels.gz"), LabelsFile());
  ASSERT_NE(ReadFileToString(dir.file("images.gz")), ImagesFile());  // really compressed
  ExpectTinyDataSet(ReadMnistImages(dir.file("images.gz")), ReadMnistLabels(dir.file("labels.gz")));
}

TEST(MnistTest, WrongMagicAndTruncationNameTheFile) {
  test::TempDir dir;
  WritePlain(dir.file("labels"), LabelsFile());
  test::ExpectErrorContaining([&] { ReadMnistImages(dir.file("labels")); },
                              {"'" + dir.file("labels") + "'", "2049", "expected 2051", "label file"});
  test::ExpectErrorContaining([&] { ReadMnistLabels(dir.file("missing")); }, {dir.file("missing"), "No such file"});

  const std::string images = ImagesFile();
  WritePlain(dir.file("short_pixels"), images.substr(0, images.size() - 1));
  test::ExpectErrorContaining([&] { ReadMnistImages(dir.file("short_pixels")); },
                              {dir.file("short_pixels"), "truncated", "18 bytes", "only 17"});
  WritePlain(dir.file("short_header"), images.substr(0, 10));
  test::ExpectErrorContaining([&] { ReadMnistImages(dir.file("short_header")); },
                              {dir.file("short_header"), "truncated", "header"});
  WriteGzipped(dir.file("short_labels.gz"), LabelsFile().substr(0, 9));
  test::ExpectErrorContaining([&] { ReadMnistLabels(dir.file("short_labels.gz")); },
                              {dir.file("short_labels.gz"), "truncated"});

  // A gzip stream cut short: zlib reports it, or the data come out short; either way the file is named.
  WriteGzipped(dir.file("cut.gz"), ImagesFile());
  const std::string compressed = ReadFileToString(dir.file("cut.gz"));
  WritePlain(dir.file("cut.gz"), compressed.substr(0, compressed.size() / 2));
  test::ExpectErrorContaining([&] { ReadMnistImages(dir.file("cut.gz")); }, {dir.file("cut.gz")});
}

TEST(MnistTest, ConvertsToLmdbWithCaffeKeys) {
  test::TempDir dir;
  WriteGzipped(dir.file("images.gz"), ImagesFile());
  WriteGzipped(dir.file("labels.gz"), LabelsFile());
  const std::string db = dir.file("db");
  EXPECT_EQ(ConvertMnistToLmdb(dir.file("images.gz"), dir.file("labels.gz"), db), 3);

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
  test::ExpectErrorContaining([&] { ConvertMnistToLmdb(dir.file("images.gz"), dir.file("labels.gz"), db); },
                              {db, "already exists"});
}

TEST(MnistTest, ConvertsASliceUnderKeysFromZero) {
  test::TempDir dir;
  WriteGzipped(dir.file("images.gz"), ImagesFile());
  WriteGzipped(dir.file("labels.gz"), LabelsFile());
  EXPECT_EQ(ConvertMnistToLmdb(dir.file("images.gz"), dir.file("labels.gz"), dir.file("db"), 1, 2), 2);
  LmdbReader reader(dir.file("db"));
  EXPECT_EQ(reader.size(), 2u);
  for (int i = 0; i < 2; ++i, reader.Next()) {
    ASSERT_TRUE(reader.Valid());
    EXPECT_EQ(reader.key(), RecordKey(i));
    Datum datum;
    ASSERT_TRUE(datum.ParseFromString(reader.value()));
    EXPECT_EQ(datum.label(), (std::vector<int>{0, 9})[i]);
    EXPECT_EQ(datum.data(), ImagesFile().substr(16 + 6 * (i + 1), 6));
  }
  test::ExpectErrorContaining(
      [&] { ConvertMnistToLmdb(dir.file("images.gz"), dir.file("labels.gz"), dir.file("db2"), 2, 2); },
      {"records 2 to 3", dir.file("images.gz"), "3 images"});
  EXPECT_EQ(RecordKey(42), "00000042");
}

TEST(MnistTest, CountMismatchNamesBothFiles) {
  test::TempDir dir;
  WritePlain(dir.file("images"), ImagesFile());
  WritePlain(dir.file("labels"), BigEndian(2049) + BigEndian(2) + std::string("\x01\x02", 2));
  test::ExpectErrorContaining([&] { ConvertMnistToLmdb(dir.file("images"), dir.file("labels"), dir.file("db")); },
                              {dir.file("images"), "3 images", dir.file("labels"), "2 labels"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("db")));  // checked before anything is written
}

// The records of a converted data set, key and Datum, in key order.
std::vector<std::pair<std::string, std::string>> ReadRecords(DataParameter::DB backend, const std::string& path) {
  std::vector<std::pair<std::string, std::string>> records;
  const std::unique_ptr<DbReader> reader = OpenDbReader(backend, path);
  for (; reader->Valid(); reader->Next()) records.emplace_back(reader->key(), reader->value());
  return records;
}

TEST(MnistTest, ConvertsToLevelDbTheRecordsItWritesToLmdb) {
  test::TempDir dir;
  WriteGzipped(dir.file("images.gz"), ImagesFile());
  WriteGzipped(dir.file("labels.gz"), LabelsFile());
  EXPECT_EQ(ConvertMnist(dir.file("images.gz"), dir.file("labels.gz"), dir.file("lmdb"), DataParameter::LMDB), 3);
  EXPECT_EQ(ConvertMnist(dir.file("images.gz"), dir.file("labels.gz"), dir.file("leveldb"), DataParameter::LEVELDB), 3);
  EXPECT_EQ(DetectDbBackend(dir.file("leveldb")), DataParameter::LEVELDB);
  const auto records = ReadRecords(DataParameter::LEVELDB, dir.file("leveldb"));
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[2].first, "00000002");
  EXPECT_EQ(records, ReadRecords(DataParameter::LMDB, dir.file("lmdb")));
  test::ExpectErrorContaining(
      [&] { ConvertMnist(dir.file("images.gz"), dir.file("labels.gz"), dir.file("leveldb"), DataParameter::LEVELDB); },
      {dir.file("leveldb"), "already exists"});
}

// The command-line converter: --backend picks the store, lmdb when not given.
TEST(MnistTest, ConvertMnistToolWritesTheBackendItIsGiven) {
  test::TempDir dir;
  WriteGzipped(dir.file("images.gz"), ImagesFile());
  WriteGzipped(dir.file("labels.gz"), LabelsFile());
  const std::string tool =
      test::ToolsDir() + "/convert_mnist " + dir.file("images.gz") + " " + dir.file("labels.gz") + " ";
  std::string output;
  ASSERT_EQ(test::RunCommand(tool + dir.file("default"), &output), 0) << output;
  EXPECT_NE(output.find("wrote 3 records to LMDB"), std::string::npos) << output;
  EXPECT_EQ(DetectDbBackend(dir.file("default")), DataParameter::LMDB);
  ASSERT_EQ(test::RunCommand(tool + dir.file("leveldb") + " --backend=leveldb", &output), 0) << output;
  EXPECT_NE(output.find("wrote 3 records to LevelDB"), std::string::npos) << output;
  EXPECT_EQ(ReadRecords(DataParameter::LEVELDB, dir.file("leveldb")).size(), 3u);
  ASSERT_EQ(test::RunCommand(tool + dir.file("lmdb") + " --backend=lmdb", &output), 0) << output;
  EXPECT_EQ(DetectDbBackend(dir.file("lmdb")), DataParameter::LMDB);
  EXPECT_EQ(test::RunCommand(tool + dir.file("other") + " --backend=rocksdb", &output), 1);
  EXPECT_NE(output.find("unknown database backend 'rocksdb'; use lmdb or leveldb"), std::string::npos) << output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("other")));
}

// A label map keeps only the images of the labels it names, relabelled, under consecutive keys; a limit stops early.
TEST(MnistTest, LabelMapSelectsAndRelabelsImagesAndLimitStopsEarly) {
  test::TempDir dir;
  WriteGzipped(dir.file("images.gz"), ImagesFile());  // labels 7, 0, 9
  WriteGzipped(dir.file("labels.gz"), LabelsFile());
  MnistSelection selection;
  selection.relabel = ParseLabelMap("9:1,7:0");
  EXPECT_EQ(ConvertMnist(dir.file("images.gz"), dir.file("labels.gz"), dir.file("mapped"), DataParameter::LMDB,
                         selection),
            2);
  const auto records = ReadRecords(DataParameter::LMDB, dir.file("mapped"));
  ASSERT_EQ(records.size(), 2u);
  Datum first, second;
  ASSERT_TRUE(first.ParseFromString(records[0].second));
  ASSERT_TRUE(second.ParseFromString(records[1].second));
  EXPECT_EQ(records[0].first, "00000000");
  EXPECT_EQ(records[1].first, "00000001");
  EXPECT_EQ(first.label(), 0);   // image 0, label 7
  EXPECT_EQ(second.label(), 1);  // image 2, label 9
  EXPECT_EQ(static_cast<unsigned char>(second.data()[0]), 250);
  selection.limit = 1;
  EXPECT_EQ(ConvertMnist(dir.file("images.gz"), dir.file("labels.gz"), dir.file("limited"), DataParameter::LMDB,
                         selection),
            1);
  test::ExpectErrorContaining([] { ParseLabelMap("0:0,x:1"); }, {"'x:1'", "OLD:NEW"});
  test::ExpectErrorContaining([] { ParseLabelMap("3:0,3:1"); }, {"label 3 twice"});
  std::string output;
  const std::string tool = test::ToolsDir() + "/convert_mnist " + dir.file("images.gz") + " " +
                           dir.file("labels.gz") + " " + dir.file("tool") + " --label_map=0:5 --limit=10";
  ASSERT_EQ(test::RunCommand(tool, &output), 0) << output;
  EXPECT_NE(output.find("wrote 1 records"), std::string::npos) << output;
}

}  // namespace
}  // namespace crema
