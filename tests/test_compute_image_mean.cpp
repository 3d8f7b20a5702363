// compute_image_mean: the mean image of a database, against a mean computed here from the records themselves;
// its file read back as a Data layer's mean_file; encoded records; and the errors a person meets (no such
// database, an empty one, records of two sizes), each naming what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/blob.hpp"
#include "io/db.hpp"
#include "io/image_io.hpp"
#include "io/lmdb.hpp"
#include "io/proto_io.hpp"
#include "test_util.hpp"
#include "tools/lib/image_mean.hpp"

namespace crema {
namespace {

const std::string kTool = test::ToolsDir() + "/compute_image_mean";

// The mean of every record's bytes, value by value, read here with the DB reader.
std::vector<double> MeanOfRecords(const std::string& path, int* records) {
  std::unique_ptr<DbReader> reader = OpenDbReader(DataParameter::LMDB, path);
  std::vector<double> sums;
  *records = 0;
  for (; reader->Valid(); reader->Next(), ++*records) {
    Datum datum;
    EXPECT_TRUE(datum.ParseFromString(reader->value()));
    if (sums.empty()) sums.assign(datum.data().size(), 0.0);
    for (size_t i = 0; i < sums.size(); ++i) sums[i] += static_cast<uint8_t>(datum.data()[i]);
  }
  for (double& s : sums) s /= *records;
  return sums;
}

TEST(ComputeImageMeanTest, TheToolWritesTheMeanOfEveryRecord) {
  test::TempDir dir;
  test::WriteRandomDatums(dir.file("db"), 37, 5, 4, 3, 11);
  std::string output;
  ASSERT_EQ(test::RunCommand(kTool + " " + dir.file("db") + " " + dir.file("mean.binaryproto"), &output), 0) << output;
  EXPECT_NE(output.find("Processed 37 files."), std::string::npos) << output;
  EXPECT_NE(output.find("mean_value channel [0]: "), std::string::npos) << output;
  BlobProto mean;
  ReadProtoFromBinaryFile(dir.file("mean.binaryproto"), &mean);
  EXPECT_EQ(mean.num(), 1);
  EXPECT_EQ(mean.channels(), 1);
  EXPECT_EQ(mean.height(), 5);
  EXPECT_EQ(mean.width(), 4);
  int records = 0;
  const std::vector<double> expected = MeanOfRecords(dir.file("db"), &records);
  ASSERT_EQ(records, 37);
  ASSERT_EQ(mean.data_size(), static_cast<int>(expected.size()));
  double overall = 0;
  for (int i = 0; i < mean.data_size(); ++i) {
    EXPECT_NEAR(mean.data(i), expected[i], 1e-4) << i;
    overall += expected[i] / expected.size();
  }
  // The printed channel mean is the mean of the mean image.
  const std::vector<double> channels = ChannelMeans(mean);
  ASSERT_EQ(channels.size(), 1u);
  EXPECT_NEAR(channels[0], overall, 1e-4);
}

// The file is what a Data layer subtracts: its first batch, transformed, is each record minus the mean.
TEST(ComputeImageMeanTest, ADataLayerSubtractsTheMeanFile) {
  test::TempDir dir;
  test::WriteRandomDatums(dir.file("db"), 6, 3, 3, 2, 12);
  const ImageMean result = ComputeImageMean(DataParameter::LMDB, dir.file("db"));
  WriteProtoToBinaryFile(result.mean, dir.file("mean.binaryproto"));
  auto layer = test::MakeLayer("name: 'data' type: 'Data' top: 'data' top: 'label' data_param { source: '" +
                                   dir.file("db") + "' batch_size: 6 backend: LMDB } transform_param { mean_file: '" +
                                   dir.file("mean.binaryproto") + "' }",
                               {});
  test::BlobList bottom, top;
  top.Add({});
  top.Add({});
  layer->SetUp(bottom.pointers, top.pointers);
  layer->Forward(bottom.pointers, top.pointers);
  // The batch's mean over its 6 records (the whole database) is then zero at every position.
  for (int i = 0; i < 9; ++i) {
    double total = 0;
    for (int n = 0; n < 6; ++n) total += top.pointers[0]->cpu_data()[n * 9 + i];
    EXPECT_NEAR(total / 6, 0.0, 1e-4) << i;
  }
}

// Encoded records (PNG) are decoded as stored; three channels give three channel means.
TEST(ComputeImageMeanTest, EncodedColourRecordsAreDecoded) {
  if (!ImageCodecsAvailable()) GTEST_SKIP() << "built without OpenCV: no image can be encoded";
  test::TempDir dir;
  std::vector<std::vector<unsigned char>> images(4, std::vector<unsigned char>(2 * 3 * 3));
  {
    LmdbWriter writer(dir.file("db"));
    RandomStream random(13);
    for (size_t n = 0; n < images.size(); ++n) {
      for (auto& pixel : images[n]) pixel = static_cast<unsigned char>(random.UniformInt(256));
      Datum datum;
      datum.set_encoded(true);
      datum.set_data(EncodeImage(".png", images[n].data(), 2, 3, 3));
      writer.Put("key" + std::to_string(n), datum.SerializeAsString());
    }
    writer.Commit();
  }
  const ImageMean result = ComputeImageMean(DataParameter::LMDB, dir.file("db"));
  EXPECT_EQ(result.records, 4);
  ASSERT_EQ(result.mean.channels(), 3);
  ASSERT_EQ(result.mean.height(), 2);
  ASSERT_EQ(result.mean.width(), 3);
  // EncodeImage takes interleaved pixels (row, column, channel); the mean is channels first.
  for (int c = 0; c < 3; ++c) {
    for (int p = 0; p < 6; ++p) {
      double total = 0;
      for (const auto& image : images) total += image[p * 3 + c];
      EXPECT_NEAR(result.mean.data(c * 6 + p), total / images.size(), 1e-4) << "channel " << c << " pixel " << p;
    }
  }
}

TEST(ComputeImageMeanTest, BadDatabasesAreNamed) {
  test::TempDir dir;
  std::string output;
  EXPECT_EQ(test::RunCommand(kTool + " " + dir.file("missing"), &output), 1);
  EXPECT_NE(output.find("compute_image_mean: error: "), std::string::npos) << output;
  EXPECT_NE(output.find(dir.file("missing")), std::string::npos) << output;

  { LmdbWriter(dir.file("empty")).Commit(); }
  test::ExpectErrorContaining([&] { ComputeImageMean(DataParameter::LMDB, dir.file("empty")); },
                              {dir.file("empty"), "no records"});

  {
    LmdbWriter writer(dir.file("mixed"));
    for (int n = 0; n < 2; ++n) {
      Datum datum;
      datum.set_channels(1);
      datum.set_height(2 + n);
      datum.set_width(2);
      datum.set_data(std::string(static_cast<size_t>(2 * (2 + n)), '\1'));
      writer.Put("record" + std::to_string(n), datum.SerializeAsString());
    }
    writer.Commit();
  }
  test::ExpectErrorContaining([&] { ComputeImageMean(DataParameter::LMDB, dir.file("mixed")); },
                              {"record 'record1'", "1 x 3 x 2", "1 x 2 x 2"});
  EXPECT_EQ(test::RunCommand(kTool + " --backend=leveldb " + dir.file("mixed"), &output), 1);
  EXPECT_NE(output.find("compute_image_mean: error: "), std::string::npos) << output;
}

}  // namespace
}  // namespace crema
