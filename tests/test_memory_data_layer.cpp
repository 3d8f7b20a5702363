#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "layers/data/memory_data.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

LayerParameter MemoryParam(const std::string& extra = "batch_size: 2 channels: 1 height: 1 width: 3") {
  return test::ParseLayer("name: 'mem' type: 'MemoryData' memory_data_param { " + extra + " }");
}

// Item i of the arrays below: values 10 i, 10 i + 1, 10 i + 2 and label 100 + i.
struct Items {
  explicit Items(int n) {
    for (int i = 0; i < n; ++i) {
      for (int v = 0; v < 3; ++v) data.push_back(10.f * i + v);
      labels.push_back(100.f + i);
    }
  }
  std::vector<float> data, labels;
};

struct Fixture {
  explicit Fixture(const LayerParameter& param) : layer(param) {
    blobs.Add({});
    blobs.Add({});
    layer.SetUp({}, blobs.pointers);
  }
  // The labels of the next batch (the data is checked against them).
  std::vector<float> Next() {
    layer.Forward({}, blobs.pointers);
    const Blob& data = *blobs.pointers[0];
    const Blob& label = *blobs.pointers[1];
    std::vector<float> labels = test::DataOf(label);
    const std::vector<float> values = test::DataOf(data);
    for (size_t i = 0; i < labels.size(); ++i) {
      const float item = labels[i] - 100.f;
      for (int v = 0; v < 3; ++v) EXPECT_EQ(values[i * 3 + v], 10.f * item + v) << "item " << i;
    }
    return labels;
  }
  MemoryDataLayer layer;
  test::BlobList blobs;
};

TEST(MemoryDataLayerTest, TopsHaveTheParameterShapes) {
  Fixture fixture(MemoryParam("batch_size: 4 channels: 3 height: 5 width: 2"));
  EXPECT_EQ(fixture.blobs.pointers[0]->shape(), (std::vector<int>{4, 3, 5, 2}));
  EXPECT_EQ(fixture.blobs.pointers[1]->shape(), (std::vector<int>{4}));
}

TEST(MemoryDataLayerTest, BatchesFollowTheItemsAndWrapAround) {
  Fixture fixture(MemoryParam());
  Items items(6);
  fixture.layer.Reset(items.data.data(), items.labels.data(), 6);
  items.data.assign(items.data.size(), -1.f);  // the layer holds its own copy
  EXPECT_EQ(fixture.Next(), (std::vector<float>{100, 101}));
  EXPECT_EQ(fixture.Next(), (std::vector<float>{102, 103}));
  EXPECT_EQ(fixture.Next(), (std::vector<float>{104, 105}));
  EXPECT_EQ(fixture.Next(), (std::vector<float>{100, 101}));
  EXPECT_EQ(fixture.blobs.pointers[0]->shape(), (std::vector<int>{2, 1, 1, 3}));
}

TEST(MemoryDataLayerTest, ResetStartsAgainAndSetBatchSizeReshapes) {
  Fixture fixture(MemoryParam());
  Items items(4);
  fixture.layer.Reset(items.data.data(), items.labels.data(), 4);
  EXPECT_EQ(fixture.Next(), (std::vector<float>{100, 101}));
  fixture.layer.Reset(items.data.data() + 6, items.labels.data() + 2, 2);
  EXPECT_EQ(fixture.Next(), (std::vector<float>{102, 103}));
  EXPECT_EQ(fixture.Next(), (std::vector<float>{102, 103}));
  fixture.layer.Reset(items.data.data(), items.labels.data(), 4);
  fixture.layer.set_batch_size(4);
  EXPECT_EQ(fixture.Next(), (std::vector<float>{100, 101, 102, 103}));
  EXPECT_EQ(fixture.blobs.pointers[0]->shape(), (std::vector<int>{4, 1, 1, 3}));
  test::ExpectErrorContaining([&] { fixture.layer.set_batch_size(3); }, {"'mem'", "4 items", "batch size 3"});
}

TEST(MemoryDataLayerTest, RestoredStateContinuesExactly) {
  Items items(6);
  Fixture original(MemoryParam());
  original.layer.Reset(items.data.data(), items.labels.data(), 6);
  original.Next();
  original.Next();
  LayerRuntimeState state;
  original.layer.SaveRuntimeState(&state);
  EXPECT_EQ(state.records_read(), 4u);
  const std::vector<float> expected1 = original.Next(), expected2 = original.Next();

  Fixture resumed(MemoryParam());
  resumed.layer.Reset(items.data.data(), items.labels.data(), 6);
  resumed.layer.RestoreRuntimeState(state);
  EXPECT_EQ(resumed.Next(), expected1);
  EXPECT_EQ(resumed.Next(), expected2);

  Items fewer(2);
  resumed.layer.Reset(fewer.data.data(), fewer.labels.data(), 2);
  test::ExpectErrorContaining([&] { resumed.layer.RestoreRuntimeState(state); }, {"'mem'", "item 4", "2 items"});
}

TEST(MemoryDataLayerTest, ErrorsNameTheProblem) {
  test::ExpectErrorContaining([] { Fixture f(MemoryParam("channels: 1 height: 1 width: 3")); },
                              {"'mem' (MemoryData)", "memory_data_param.batch_size", "not set"});
  test::ExpectErrorContaining([] { Fixture f(MemoryParam("batch_size: 2 channels: 0 height: 1 width: 3")); },
                              {"memory_data_param.channels", "positive"});
  Fixture fixture(MemoryParam());
  test::ExpectErrorContaining([&] { fixture.layer.Forward({}, fixture.blobs.pointers); }, {"'mem'", "Reset"});
  Items items(3);
  test::ExpectErrorContaining([&] { fixture.layer.Reset(items.data.data(), items.labels.data(), 3); },
                              {"'mem'", "3 items", "multiple of the batch size 2"});
  test::ExpectErrorContaining([&] { fixture.layer.Reset(nullptr, items.labels.data(), 2); }, {"'mem'", "Reset"});
}

}  // namespace
}  // namespace crema
