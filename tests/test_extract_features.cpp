// extract_features: the values it saves for 2 mini-batches, in an LMDB, a LevelDB and an HDF5 file, against the
// blobs of a Net built here (plain layouts, the same weights) and run forward twice; Caffe's keys and Datum shapes;
// the reordering of blobs the plan keeps in another layout; and the errors a person meets.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/blob.hpp"
#include "core/layout.hpp"
#include "io/db.hpp"
#include "io/hdf5.hpp"
#include "io/proto_io.hpp"
#include "net/net.hpp"
#include "test_util.hpp"
#include "tools/lib/feature_extractor.hpp"

namespace crema {
namespace {

const std::string kTool = test::ToolsDir() + "/extract_features";

class ExtractFeaturesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::WriteRandomDatums(dir_.file("data_lmdb"), 11, 28, 28, 3, 31);
    net_path_ = dir_.file("net.prototxt");
    std::ofstream(net_path_) << R"(
      name: 'features'
      layer { name: 'data' type: 'Data' top: 'data' top: 'label' include { phase: TEST }
              data_param { source: ')"
                             << dir_.file("data_lmdb") << R"(' batch_size: 4 backend: LMDB }
              transform_param { scale: 0.00390625 } }
      layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'
              convolution_param { num_output: 16 kernel_size: 3 weight_filler { type: 'xavier' }
                                  bias_filler { type: 'gaussian' std: 0.1 } } }
      layer { name: 'relu' type: 'ReLU' bottom: 'conv' top: 'conv' }
      layer { name: 'pool' type: 'Pooling' bottom: 'conv' top: 'pool' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
      layer { name: 'ip' type: 'InnerProduct' bottom: 'pool' top: 'ip'
              inner_product_param { num_output: 5 weight_filler { type: 'gaussian' std: 0.3 } } }
    )";
    // Weights from the fillers of one build, written as a .caffemodel.
    Net net(net_path_, TEST);
    NetParameter trained;
    net.ToProto(&trained);
    weights_path_ = dir_.file("features.caffemodel");
    WriteProtoToBinaryFile(trained, weights_path_);
  }

  // Each blob's values over two forward passes of a net built here in plain layouts with the same weights.
  std::map<std::string, std::vector<std::vector<float>>> ReferenceBatches(const std::vector<std::string>& blobs) {
    setenv("CREMA_LAYOUTS", "plain", 1);
    Net net(net_path_, TEST);
    unsetenv("CREMA_LAYOUTS");
    net.CopyTrainedLayersFrom(weights_path_);
    std::map<std::string, std::vector<std::vector<float>>> batches;
    for (int batch = 0; batch < 2; ++batch) {
      net.Forward();
      for (const auto& name : blobs) {
        const Blob& blob = *net.blob_by_name(name);
        EXPECT_EQ(blob.layout(), Layout::kPlain);
        batches[name].push_back(test::DataOf(blob));
        shapes_[name] = blob.shape();
      }
    }
    return batches;
  }

  std::string Run(const std::string& args, int expected_status) {
    std::string output;
    EXPECT_EQ(test::RunCommand(kTool + " " + args, &output), expected_status) << args << "\n" << output;
    return output;
  }

  test::TempDir dir_;
  std::string net_path_, weights_path_;
  std::map<std::string, std::vector<int>> shapes_;
  bool reordered_ = false;
};

TEST_F(ExtractFeaturesTest, DatabasesHoldTheBlobsOfEachItem) {
  const auto reference = ReferenceBatches({"conv", "ip"});
  for (const std::string backend : {"lmdb", "leveldb"}) {
    SCOPED_TRACE(backend);
    const std::string conv_db = dir_.file("conv_" + backend), ip_db = dir_.file("ip_" + backend);
    const std::string output =
        Run(weights_path_ + " " + net_path_ + " conv,ip " + conv_db + "," + ip_db + " 2 " + backend, 0);
    EXPECT_CONTAINS(output, "Extracted features of 8 query images for feature blob conv");
    EXPECT_CONTAINS(output, "Extracted features of 8 query images for feature blob ip");
    // Where oneDNN runs the convolution and the pooling, 'conv' is kept in its channel blocks between them (the
    // reference above is plain): the values compared below are then reordered ones.
    if (output.find("'conv' stays in") != std::string::npos) reordered_ = true;
    for (const std::string blob : {"conv", "ip"}) {
      SCOPED_TRACE(blob);
      const std::vector<int>& shape = shapes_[blob];
      const int item_size = static_cast<int>(reference.at(blob)[0].size()) / 4;
      std::unique_ptr<DbReader> reader = OpenDbReader(ParseDbBackend(backend), blob == "conv" ? conv_db : ip_db);
      ASSERT_EQ(reader->size(), 8u);
      for (int item = 0; item < 8; ++item, reader->Next()) {
        ASSERT_TRUE(reader->Valid());
        EXPECT_EQ(reader->key(), FeatureKey(item));
        Datum datum;
        ASSERT_TRUE(datum.ParseFromString(reader->value()));
        // Caffe's legacy shape: C x H x W of a 4-d blob, D x 1 x 1 of an N x D one.
        EXPECT_EQ(datum.channels(), shape[1]);
        EXPECT_EQ(datum.height(), shape.size() > 2 ? shape[2] : 1);
        EXPECT_EQ(datum.width(), shape.size() > 3 ? shape[3] : 1);
        EXPECT_FALSE(datum.has_label());
        ASSERT_EQ(datum.float_data_size(), item_size);
        const std::vector<float>& batch = reference.at(blob)[item / 4];
        for (int i = 0; i < item_size; ++i)
          ASSERT_NEAR(datum.float_data(i), batch[(item % 4) * item_size + i], 1e-5f)
              << "item " << item << ", value " << i;
      }
    }
  }
  EXPECT_EQ(FeatureKey(42), "0000000042");
  if (!reordered_) std::printf("note: 'conv' stayed plain in this build; PlainValuesTest covers the reordering\n");
}

TEST_F(ExtractFeaturesTest, AnHdf5FileHoldsADatasetPerBlobAndTheLabels) {
  const auto reference = ReferenceBatches({"conv", "ip", "label"});
  const std::string file = dir_.file("features.h5");
  Run(weights_path_ + " " + net_path_ + " conv,ip " + file + "," + file + " 2 hdf5", 0);
  Hdf5File h5(file, Hdf5File::Mode::kRead);
  for (const std::string blob : {"conv", "ip", "label"}) {
    SCOPED_TRACE(blob);
    std::vector<int64_t> expected_shape(shapes_[blob].begin(), shapes_[blob].end());
    expected_shape[0] = 8;
    EXPECT_EQ(h5.DatasetShape(blob), expected_shape);
    std::vector<float> expected = reference.at(blob)[0];
    expected.insert(expected.end(), reference.at(blob)[1].begin(), reference.at(blob)[1].end());
    const std::vector<float> values = h5.ReadFloats(blob);
    ASSERT_EQ(values.size(), expected.size());
    for (size_t i = 0; i < values.size(); ++i) ASSERT_NEAR(values[i], expected[i], 1e-5f) << i;
  }
  // The labels are the records' own: 8 of them, in [0, 3).
  for (float label : h5.ReadFloats("label")) EXPECT_TRUE(label == 0.f || label == 1.f || label == 2.f) << label;
}

// Blobs in another layout come out in plain order: channels-last 1 x 2 x 1 x 3, and 16-channel blocks.
TEST(PlainValuesTest, ReordersBlobsKeptInAnotherLayout) {
  Blob last({1, 2, 1, 3});
  last.set_layout(Layout::kChannelsLast);
  for (int i = 0; i < 6; ++i) last.mutable_cpu_data()[i] = static_cast<float>(i);
  // Stored position by position: (s0 c0, s0 c1, s1 c0, s1 c1, s2 c0, s2 c1).
  EXPECT_EQ(PlainValues(last), (std::vector<float>{0, 2, 4, 1, 3, 5}));

  Blob blocked({2, 16, 1, 2});
  blocked.set_layout(Layout::kChannelBlocks16);
  float* data = blocked.mutable_cpu_data();
  for (int n = 0; n < 2; ++n)
    for (int s = 0; s < 2; ++s)
      for (int c = 0; c < 16; ++c) data[(n * 2 + s) * 16 + c] = n * 1000 + c * 10 + s;
  const std::vector<float> plain = PlainValues(blocked);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 16; ++c)
      for (int s = 0; s < 2; ++s) EXPECT_EQ(plain[(n * 16 + c) * 2 + s], n * 1000 + c * 10 + s);
}

TEST_F(ExtractFeaturesTest, BadArgumentsAreNamed) {
  const std::string net_weights = weights_path_ + " " + net_path_ + " ";
  EXPECT_CONTAINS(Run(net_weights + "conv,nope " + dir_.file("a") + "," + dir_.file("b") + " 1", 1),
                  "net 'features' has no blob 'nope'");
  EXPECT_CONTAINS(Run(net_weights + "conv,ip " + dir_.file("a") + " 1", 1), "2 blob name(s) but 1 output(s)");
  EXPECT_CONTAINS(Run(net_weights + "conv " + dir_.file("a") + " zero", 1), "NUM_MINI_BATCHES 'zero'");
  EXPECT_CONTAINS(Run(net_weights + "conv " + dir_.file("a") + " 1 rocksdb", 1), "unknown feature format 'rocksdb'");
  EXPECT_CONTAINS(Run(net_weights + "conv " + dir_.file("data_lmdb") + " 1", 1),
                  "'" + dir_.file("data_lmdb") + "' exists already");
  EXPECT_CONTAINS(Run(net_weights + "conv,ip " + dir_.file("a") + "," + dir_.file("a") + " 1 leveldb", 1),
                  "two blobs are named for one LevelDB database");
  EXPECT_CONTAINS(Run("/no/such.caffemodel " + net_path_ + " conv " + dir_.file("a") + " 1", 1), "/no/such.caffemodel");
  EXPECT_CONTAINS(Run(net_weights + "conv " + dir_.file("a") + " 1 lmdb CPU extra", 1), "unexpected argument 'extra'");
  EXPECT_CONTAINS(Run(net_weights + "conv " + dir_.file("a"), 1), "usage: extract_features");
  EXPECT_FALSE(FileExists(dir_.file("a")));  // nothing was created by a failed run

  // A deploy net: its input has nothing to fill it. (Its layer has no parameters, so that weights matching none
  // of its layers are no error of their own.)
  std::ofstream(dir_.file("deploy.prototxt"))
      << "name: 'deploy' layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 } } }\n"
         "layer { name: 'fc' type: 'ReLU' bottom: 'data' top: 'fc' }\n";
  EXPECT_CONTAINS(Run(weights_path_ + " " + dir_.file("deploy.prototxt") + " fc " + dir_.file("a") + " 1", 1),
                  "has the input 'data', which extract_features cannot fill");
}

}  // namespace
}  // namespace crema
