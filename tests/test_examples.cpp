// The example nets under examples/ build and run forward and backward in both phases, on data the test makes
// (random images of the example's size in an LMDB standing in for its data set), with a finite loss and finite
// gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/random.hpp"
#include "io/lmdb.hpp"
#include "io/proto_io.hpp"
#include "net/net.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

struct Example {
  const char* prototxt;  // under examples/
  int channels, size, classes;
};

// `count` random channels x size x size Datums with labels in [0, classes).
void WriteImages(const std::string& path, int count, const Example& example) {
  RandomStream random(5);
  LmdbWriter writer(path);
  for (int i = 0; i < count; ++i) {
    Datum datum;
    datum.set_channels(example.channels);
    datum.set_height(example.size);
    datum.set_width(example.size);
    std::string pixels(static_cast<size_t>(example.channels) * example.size * example.size, '\0');
    for (auto& pixel : pixels) pixel = static_cast<char>(random.UniformInt(256));
    datum.set_data(pixels);
    datum.set_label(static_cast<int>(random.UniformInt(example.classes)));
    writer.Put(RecordKey(i), datum.SerializeAsString());
  }
  writer.Commit();
}

class ExamplesTest : public ::testing::TestWithParam<Example> {};

TEST_P(ExamplesTest, BuildsAndRunsForwardAndBackward) {
  test::TempDir dir;
  const std::string db = dir.file("images_lmdb");
  WriteImages(db, 120, GetParam());
  NetParameter param;
  ReadProtoFromTextFile(std::string(CREMA_SOURCE_DIR) + "/examples/" + GetParam().prototxt, &param);
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

INSTANTIATE_TEST_SUITE_P(Caffe, ExamplesTest,
                         ::testing::Values(Example{"fashion_mnist/lenet_train_test.prototxt", 1, 28, 10},
                                           Example{"fashion_mnist/resnet_train_test.prototxt", 1, 28, 10},
                                           Example{"mnist/mnist_autoencoder.prototxt", 1, 28, 10},
                                           Example{"cifar10/cifar10_quick_train_test.prototxt", 3, 32, 10},
                                           Example{"cifar10/cifar10_full_train_test.prototxt", 3, 32, 10},
                                           Example{"siamese/mnist_siamese_train_test.prototxt", 2, 28, 2}));

}  // namespace
}  // namespace crema
