#include <gtest/gtest.h>

#include "core/blob.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

TEST(BlobTest, ReshapeAndCounts) {
  Blob blob({2, 3, 4, 5});
  EXPECT_EQ(blob.count(), 120);
  EXPECT_EQ(blob.count(1), 60);
  EXPECT_EQ(blob.count(1, 3), 12);
  EXPECT_EQ(blob.shape(-1), 5);
  EXPECT_EQ(blob.num(), 2);
  EXPECT_EQ(blob.width(), 5);
  EXPECT_EQ(blob.offset(1, 2, 3, 4), 119);
  EXPECT_THROW(blob.shape(4), Error);
  blob.Reshape({});
  EXPECT_EQ(blob.count(), 1);  // a scalar
}

TEST(BlobTest, ProtoRoundTripKeepsDataAndDiff) {
  Blob blob({3, 1, 2});
  test::FillGaussian(&blob);
  float* diff = blob.mutable_cpu_diff();
  for (int i = 0; i < blob.count(); ++i) diff[i] = 0.5f * i;
  BlobProto proto;
  blob.ToProto(&proto, true);
  std::string bytes;
  ASSERT_TRUE(proto.SerializeToString(&bytes));
  BlobProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  Blob copy;
  copy.FromProto(parsed);
  ASSERT_EQ(copy.shape(), blob.shape());
  for (int i = 0; i < blob.count(); ++i) {
    EXPECT_EQ(copy.cpu_data()[i], blob.cpu_data()[i]);
    EXPECT_EQ(copy.cpu_diff()[i], 0.5f * i);
  }
}

TEST(BlobTest, ReadsLegacyFourDimensionalShape) {
  BlobProto proto;
  proto.set_num(1);
  proto.set_channels(2);
  proto.set_height(1);
  proto.set_width(2);
  for (int i = 0; i < 4; ++i) proto.add_double_data(i * 1.5);
  Blob blob;
  blob.FromProto(proto);
  EXPECT_EQ(blob.shape(), (std::vector<int>{1, 2, 1, 2}));
  EXPECT_FLOAT_EQ(blob.cpu_data()[3], 4.5f);
}

TEST(BlobTest, RejectsWrongValueCountAndShape) {
  BlobProto proto;
  proto.mutable_shape()->add_dim(3);
  proto.add_data(1.f);
  Blob blob;
  EXPECT_THROW(blob.FromProto(proto), Error);
  Blob fixed({2});
  BlobProto two;
  two.mutable_shape()->add_dim(3);
  for (int i = 0; i < 3; ++i) two.add_data(i);
  EXPECT_THROW(fixed.FromProto(two, /*reshape=*/false), Error);
}

TEST(BlobTest, UpdateSubtractsDiff) {
  Blob blob({4});
  for (int i = 0; i < 4; ++i) {
    blob.mutable_cpu_data()[i] = i;
    blob.mutable_cpu_diff()[i] = 0.25f * i;
  }
  blob.Update();
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(blob.cpu_data()[i], 0.75f * i);
  EXPECT_DOUBLE_EQ(blob.asum_data(), 0.75 * 6);
}

}  // namespace
}  // namespace crema
