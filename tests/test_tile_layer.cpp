#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/common/tile.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

LayerParameter TileParam(const std::string& tile_param) {
  return test::ParseLayer("name: 'tile' type: 'Tile' " + tile_param);
}

TEST(TileLayerTest, RepeatsAlongTheAxis) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 2}));
  top.Add({});
  TileLayer layer(TileParam("tile_param { tiles: 3 }"));  // axis 1 by default
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 9, 2}));
  layer.Forward(bottom.pointers, top.pointers);
  const Blob& x = *bottom.pointers[0];
  const Blob& y = *top.pointers[0];
  for (int n = 0; n < 2; ++n) {
    for (int c = 0; c < 9; ++c) {
      for (int w = 0; w < 2; ++w) EXPECT_EQ(y.data_at(n, c, w), x.data_at(n, c % 3, w));
    }
  }
}

TEST(TileLayerTest, FirstAndLastAxes) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3}));
  top.Add({});
  TileLayer first(TileParam("tile_param { axis: 0 tiles: 2 }"));
  first.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{4, 3}));
  first.Forward(bottom.pointers, top.pointers);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(top.pointers[0]->cpu_data()[i], bottom.pointers[0]->cpu_data()[i % 6]);
  TileLayer last(TileParam("tile_param { axis: -1 tiles: 2 }"));
  last.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 6}));
  last.Forward(bottom.pointers, top.pointers);
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < 6; ++k)
      EXPECT_EQ(top.pointers[0]->cpu_data()[r * 6 + k], bottom.pointers[0]->cpu_data()[r * 3 + k % 3]);
  }
}

TEST(TileLayerTest, Gradient) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 2, 3}));
  top.Add({});
  TileLayer layer(TileParam("tile_param { axis: 1 tiles: 3 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(TileLayerTest, FollowsAReshapedBottom) {
  test::BlobList bottom, top;
  bottom.Add({2, 3, 2});
  top.Add({});
  TileLayer layer(TileParam("tile_param { axis: -1 tiles: 4 }"));
  layer.SetUp(bottom.pointers, top.pointers);
  bottom.pointers[0]->Reshape({3, 5});
  layer.Reshape(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{3, 20}));
}

TEST(TileLayerTest, RejectsBadParameters) {
  test::BlobList bottom, top;
  bottom.Add({2, 3});
  top.Add({});
  TileLayer missing(TileParam(""));
  test::ExpectErrorContaining([&] { missing.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'tile' (Tile)", "tile_param.tiles", "required"});
  TileLayer zero(TileParam("tile_param { tiles: 0 }"));
  test::ExpectErrorContaining([&] { zero.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'tile' (Tile)", "tile_param.tiles is 0"});
  TileLayer axis(TileParam("tile_param { axis: 2 tiles: 2 }"));
  test::ExpectErrorContaining([&] { axis.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'tile' (Tile)", "tile_param.axis 2", "2 3 (6)"});
}

}  // namespace
}  // namespace crema
