// The example nets under examples/ build and run forward and backward in both phases, on data the test makes
// (random 28 x 28 images in an LMDB standing in for Fashion-MNIST), with a finite loss and finite gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "io/proto_io.hpp"
#include "net/net.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

class ExamplesTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ExamplesTest, BuildsAndRunsForwardAndBackward) {
  test::TempDir dir;
  const std::string db = dir.file("images_lmdb");
  test::WriteRandomDatums(db, 120, 28, 28, 10, 5);
  NetParameter param;
  ReadProtoFromTextFile(std::string(CREMA_SOURCE_DIR) + "/examples/" + GetParam(), &param);
  for (LayerParameter& layer : *param.mutable_layer())
    if (layer.has_data_param()) layer.mutable_data_param()->set_source(db);
  for (Phase phase : {TRAIN, TEST}) {
    SCOPED_TRACE(phase == TRAIN ? "TRAIN" : "TEST");
    param.mutable_state()->set_phase(phase);
    Net net(param);
    const float loss = net.Forward();
    EXPECT_TRUE(std::isfinite(loss)) << loss;
    EXPECT_GT(loss, 0.f);
    net.Backward();
    for (size_t p = 0; p < net.learnable_params().size(); ++p) {
      const double size = test::AbsSum(test::DiffOf(*net.learnable_params()[p]));
      EXPECT_TRUE(std::isfinite(size)) << "parameter " << p;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(FashionMnist, ExamplesTest,
                         ::testing::Values("fashion_mnist/lenet_train_test.prototxt",
                                           "fashion_mnist/resnet_train_test.prototxt"));

}  // namespace
}  // namespace crema
