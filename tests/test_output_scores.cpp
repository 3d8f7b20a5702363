#include <gtest/gtest.h>

#include <cmath>

#include "io/proto_io.hpp"
#include "net/output_scores.hpp"

namespace crema {
namespace {

TEST(OutputScoresTest, MeansEveryOutputElementOverPasses) {
  NetParameter param;
  ReadProtoFromText(R"(
    layer { name: 'input' type: 'Input' top: 'pair' top: 'scores' top: 'label'
            input_param { shape { dim: 2 } shape { dim: 2 dim: 3 } shape { dim: 2 } } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'scores' bottom: 'label' top: 'loss' loss_weight: 2 })",
                    "net", &param);
  Net net(param);
  OutputScores scores;
  for (int pass = 0; pass < 2; ++pass) {
    float* pair = net.blob_by_name("pair")->mutable_cpu_data();
    pair[0] = pass == 0 ? 1.f : 3.f;  // mean 2
    pair[1] = pass == 0 ? -4.f : 0.f;  // mean -2
    net.Forward();  // scores are zero: the loss is log(3) in both passes
    scores.Add(net);
  }
  EXPECT_EQ(scores.passes(), 2);
  const auto means = scores.Means();
  ASSERT_EQ(means.size(), 3u);
  EXPECT_EQ(means[0].blob, "pair");
  EXPECT_FLOAT_EQ(means[0].value, 2.f);
  EXPECT_FLOAT_EQ(means[1].value, -2.f);
  EXPECT_EQ(means[2].blob, "loss");
  EXPECT_NEAR(means[2].value, std::log(3.f), 1e-6);
  EXPECT_EQ(OutputScores::Describe(means[0]), "pair = 2");
  EXPECT_EQ(OutputScores::Describe({"loss", 0.5f, 2.f}), "loss = 0.5 (* 2 = 1 loss)");
}

}  // namespace
}  // namespace crema
