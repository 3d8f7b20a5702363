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

// A view sees (and writes) another blob's memory, may shrink within it, and refuses to grow past it; the owner
// still grows freely, into storage of its own.
TEST(BlobTest, ViewsShareMemoryAndRefuseToGrow) {
  Blob owner({2, 3});
  for (int i = 0; i < 6; ++i) owner.mutable_cpu_data()[i] = static_cast<float>(i);
  Blob view;
  view.ViewOf(owner, /*with_diff=*/true);
  EXPECT_EQ(view.shape(), owner.shape());
  EXPECT_TRUE(view.data_is_view());
  EXPECT_EQ(view.cpu_data(), owner.cpu_data());
  view.Reshape({6});
  view.mutable_cpu_diff()[5] = 7.f;
  EXPECT_EQ(owner.cpu_diff()[5], 7.f);
  view.Reshape({2});  // shrinking within the view is fine
  test::ExpectErrorContaining([&] { view.Reshape({7}); }, {"cannot reshape", "view of 6 values"});
  EXPECT_EQ(view.shape(), std::vector<int>{2});  // a refused reshape changes nothing
  owner.Reshape({4, 4});
  EXPECT_NE(owner.data(), view.data());  // the owner got new storage; the view keeps the old

  // A view of part of a larger buffer, from an offset.
  Blob part;
  part.ViewData(owner.data(), 10, {2, 3});
  owner.mutable_cpu_data()[12] = 42.f;
  EXPECT_EQ(part.cpu_data()[2], 42.f);
  EXPECT_EQ(part.data_offset(), 10u);
  test::ExpectErrorContaining([&] { part.ViewData(owner.data(), 12, {5}); }, {"does not fit", "16 values"});

  // Sharing needs the sharer's count to fit.
  Blob big({20});
  test::ExpectErrorContaining([&] { big.ShareData(part); }, {"cannot share data", "20"});
}

// The data's version changes on every request for a mutable pointer (through the blob or a view of the same
// storage), not on reads, and never repeats across storages: what the oneDNN engines' weight caches rely on.
TEST(BlobTest, DataVersionChangesOnWritesOnly) {
  Blob blob({3});
  const uint64_t fresh = blob.data_version();
  EXPECT_NE(fresh, 0u);
  blob.cpu_data();
  EXPECT_EQ(blob.data_version(), fresh);
  blob.mutable_cpu_data()[0] = 1.f;
  const uint64_t written = blob.data_version();
  EXPECT_NE(written, fresh);
  blob.mutable_cpu_diff()[0] = 2.f;  // the diff is other storage
  EXPECT_EQ(blob.data_version(), written);
  Blob view;
  view.ViewOf(blob, /*with_diff=*/false);
  EXPECT_EQ(view.data_version(), written);
  view.mutable_cpu_data()[1] = 3.f;
  EXPECT_NE(blob.data_version(), written);
  EXPECT_EQ(blob.data_version(), view.data_version());
  Blob other({3});
  EXPECT_NE(other.data_version(), blob.data_version());
  other.mutable_cpu_data();
  EXPECT_NE(other.data_version(), blob.data_version());
}

}  // namespace
}  // namespace crema
