#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/vision/crop.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

LayerParameter CropParam(const std::string& crop_param) {
  return test::ParseLayer("name: 'crop' type: 'Crop' crop_param { " + crop_param + " }");
}

struct Case {
  std::string param;
  std::vector<int> data, reference, top;
  std::vector<int> offsets;  // per axis of the data
};

const Case kCases[] = {
    {"", {2, 3, 5, 6}, {1, 1, 3, 4}, {2, 3, 3, 4}, {0, 0, 0, 0}},
    {"offset: 1", {2, 3, 5, 6}, {1, 1, 3, 4}, {2, 3, 3, 4}, {0, 0, 1, 1}},
    {"offset: 2 offset: 1", {2, 3, 5, 6}, {9, 9, 3, 4}, {2, 3, 3, 4}, {0, 0, 2, 1}},
    {"axis: 1 offset: 1 offset: 0 offset: 2", {2, 3, 5, 6}, {1, 2, 4, 4}, {2, 2, 4, 4}, {0, 1, 0, 2}},
    {"axis: -1 offset: 3", {2, 3, 5, 6}, {1, 1, 1, 2}, {2, 3, 5, 2}, {0, 0, 0, 3}},
    {"axis: 0 offset: 1", {3, 4}, {2, 2}, {2, 2}, {1, 1}},
};

TEST(CropLayerTest, ForwardCopiesTheWindow) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.param);
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add(c.data), 0.f, 1.f, 91);
    bottom.Add(c.reference);
    top.Add({});
    CropLayer layer(CropParam(c.param));
    layer.SetUp(bottom.pointers, top.pointers);
    layer.Forward(bottom.pointers, top.pointers);
    const Blob& y = *top.pointers[0];
    ASSERT_EQ(y.shape(), c.top);
    // Walk the top with explicit indices, 4-d or 2-d.
    const Blob& x = *bottom.pointers[0];
    std::vector<int> shape = c.top, data = c.data, off = c.offsets;
    while (shape.size() < 4) {
      shape.insert(shape.begin(), 1);
      data.insert(data.begin(), 1);
      off.insert(off.begin(), 0);
    }
    int t = 0;
    for (int a = 0; a < shape[0]; ++a)
      for (int b = 0; b < shape[1]; ++b)
        for (int h = 0; h < shape[2]; ++h)
          for (int w = 0; w < shape[3]; ++w, ++t) {
            const int source = (((a + off[0]) * data[1] + b + off[1]) * data[2] + h + off[2]) * data[3] + w + off[3];
            EXPECT_EQ(y.cpu_data()[t], x.cpu_data()[source]) << t;
          }
  }
}

TEST(CropLayerTest, GradientsGoBackInPlaceAndNotToTheReference) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.param);
    test::BlobList bottom, top;
    test::FillGaussian(bottom.Add(c.data), 0.f, 1.f, 92);
    bottom.Add(c.reference);
    top.Add({});
    CropLayer layer(CropParam(c.param));
    layer.SetUp(bottom.pointers, top.pointers);
    EXPECT_TRUE(layer.AllowForceBackward(0));
    EXPECT_FALSE(layer.AllowForceBackward(1));
    test::GradientChecker(1e-2f, 1e-3f).CheckGradient(&layer, bottom.pointers, top.pointers, 0);
    // Outside the window the gradient is 0, inside it is the top's.
    layer.Forward(bottom.pointers, top.pointers);
    bottom.pointers[0]->set_diff(7.f);
    bottom.pointers[1]->set_diff(5.f);
    top.pointers[0]->set_diff(1.f);
    layer.Backward(top.pointers, {true, true}, bottom.pointers);
    EXPECT_EQ(test::AbsSum(test::DiffOf(*bottom.pointers[0])), top.pointers[0]->count());
    for (float v : test::DiffOf(*bottom.pointers[1])) EXPECT_EQ(v, 5.f);
  }
}

TEST(CropLayerTest, FollowsTheReferenceShape) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({1, 2, 6, 6}));
  bottom.Add({1, 1, 4, 4});
  top.Add({});
  CropLayer layer(CropParam("offset: 1"));
  layer.SetUp(bottom.pointers, top.pointers);
  bottom.pointers[1]->Reshape({1, 1, 2, 5});
  layer.Reshape(bottom.pointers, top.pointers);
  EXPECT_EQ(top.pointers[0]->shape(), (std::vector<int>{1, 2, 2, 5}));
}

TEST(CropLayerTest, RejectsBadParametersAndShapes) {
  const auto expect_error = [](const std::string& param, const std::vector<int>& data,
                               const std::vector<int>& reference, const std::vector<std::string>& parts) {
    test::BlobList bottom, top;
    bottom.Add(data);
    bottom.Add(reference);
    top.Add({});
    test::ExpectErrorContaining(
        [&] {
          CropLayer layer(CropParam(param));
          layer.SetUp(bottom.pointers, top.pointers);
        },
        parts);
  };
  expect_error("axis: 4", {2, 3, 4, 4}, {2, 3, 2, 2}, {"layer 'crop' (Crop)", "crop_param.axis 4", "2 3 4 4 (96)"});
  expect_error("", {2, 3, 4, 4}, {2, 3, 2}, {"layer 'crop' (Crop)", "2 3 4 4 (96)", "2 3 2 (12)", "number of axes"});
  expect_error("offset: 1 offset: 1 offset: 1", {2, 3, 4, 4}, {2, 3, 2, 2},
               {"layer 'crop' (Crop)", "crop_param.offset is given 3 times", "crops 2 axes"});
  expect_error("offset: 3", {2, 3, 4, 4}, {2, 3, 2, 2},
               {"layer 'crop' (Crop)", "axis 2", "crop_param.offset 3", "2 3 4 4 (96)", "2 3 2 2 (24)"});
  expect_error("", {2, 3, 4, 4}, {2, 3, 5, 2}, {"layer 'crop' (Crop)", "axis 2", "size 5", "size 4"});
  expect_error("", {2, 3, 4, 4}, {}, {"layer 'crop' (Crop)"});
}

}  // namespace
}  // namespace crema
