#include <gtest/gtest.h>

#include <vector>

#include "layers/common/parameter.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

TEST(ParameterLayerTest, TheTopIsTheLearnedBlobAndItsGradientAccumulates) {
  test::BlobList bottom, top;
  top.Add({});
  ParameterLayer layer(test::ParseLayer("name: 'p' type: 'Parameter' parameter_param { shape { dim: 2 dim: 3 } }"));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(layer.params().size(), 1u);
  EXPECT_EQ(layer.params()[0]->shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(test::AbsSum(test::DataOf(*layer.params()[0])), 0.0);  // no filler in Caffe: zeros
  test::FillGaussian(layer.params()[0].get(), 0.f, 1.f, 4);
  layer.Forward(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(test::DataOf(*top.pointers[0]), test::DataOf(*layer.params()[0]));
  test::GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(ParameterLayerTest, StoredValuesLoadAndAMissingShapeIsNamed) {
  LayerParameter param = test::ParseLayer("name: 'p' type: 'Parameter' parameter_param { shape { dim: 4 } }");
  Blob stored({4});
  test::FillGaussian(&stored, 0.f, 1.f, 5);
  stored.ToProto(param.add_blobs());
  test::BlobList bottom, top;
  top.Add({});
  ParameterLayer layer(param);
  layer.SetUp(bottom.pointers, top.pointers);
  EXPECT_EQ(test::DataOf(*layer.params()[0]), test::DataOf(stored));

  ParameterLayer shapeless(test::ParseLayer("name: 'p' type: 'Parameter'"));
  test::ExpectErrorContaining([&] { shapeless.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'p' (Parameter)", "parameter_param.shape"});
  ParameterLayer negative(test::ParseLayer("name: 'p' type: 'Parameter' parameter_param { shape { dim: -2 } }"));
  test::ExpectErrorContaining([&] { negative.SetUp(bottom.pointers, top.pointers); },
                              {"layer 'p' (Parameter)", "parameter_param.shape"});
}

}  // namespace
}  // namespace crema
