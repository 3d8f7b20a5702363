#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "io/proto_io.hpp"
#include "layers/normalization/batch_norm.hpp"
#include "net/net.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

LayerParameter BatchNormParam(const std::string& bn_param, Phase phase, const std::string& extra = "") {
  LayerParameter param =
      test::ParseLayer("name: 'bn' type: 'BatchNorm' batch_norm_param { " + bn_param + " } " + extra);
  param.set_phase(phase);
  return param;
}

// Per-channel mean and (biased) variance over every axis but 1, in double.
void ChannelStats(const Blob& x, std::vector<double>* mean, std::vector<double>* variance) {
  const int num = x.shape(0), channels = x.shape(1), spatial = x.count(2);
  mean->assign(channels, 0.0);
  variance->assign(channels, 0.0);
  for (int c = 0; c < channels; ++c) {
    for (int n = 0; n < num; ++n)
      for (int i = 0; i < spatial; ++i) (*mean)[c] += x.cpu_data()[(n * channels + c) * spatial + i];
    (*mean)[c] /= num * spatial;
    for (int n = 0; n < num; ++n)
      for (int i = 0; i < spatial; ++i) {
        const double d = x.cpu_data()[(n * channels + c) * spatial + i] - (*mean)[c];
        (*variance)[c] += d * d;
      }
    (*variance)[c] /= num * spatial;
  }
}

void ExpectNormalized(const Blob& x, const Blob& y, const std::vector<double>& mean,
                      const std::vector<double>& variance, double eps) {
  const int num = x.shape(0), channels = x.shape(1), spatial = x.count(2);
  ASSERT_EQ(y.shape(), x.shape());
  for (int n = 0; n < num; ++n)
    for (int c = 0; c < channels; ++c)
      for (int i = 0; i < spatial; ++i) {
        const int j = (n * channels + c) * spatial + i;
        const double expected = (x.cpu_data()[j] - mean[c]) / std::sqrt(variance[c] + eps);
        EXPECT_NEAR(y.cpu_data()[j], expected, 1e-4) << j;
      }
}

TEST(BatchNormLayerTest, TrainNormalisesWithBatchStatisticsAndUpdatesRunningSums) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({3, 2, 2, 3}), 1.5f, 2.f, 11);
  top.Add({});
  BatchNormLayer layer(BatchNormParam("moving_average_fraction: 0.9 eps: 0.001", TRAIN));
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(layer.params().size(), 3u);
  EXPECT_EQ(layer.params()[0]->shape(), std::vector<int>{2});
  EXPECT_EQ(layer.params()[1]->shape(), std::vector<int>{2});
  EXPECT_EQ(layer.params()[2]->shape(), std::vector<int>{1});
  std::vector<double> mean, variance;
  ChannelStats(*bottom.pointers[0], &mean, &variance);
  const double m = 3 * 2 * 3;
  std::vector<double> mean_sum(2, 0.0), variance_sum(2, 0.0);
  double factor = 0;
  for (int iteration = 0; iteration < 3; ++iteration) {
    layer.Forward(bottom.pointers, top.pointers);
    ExpectNormalized(*bottom.pointers[0], *top.pointers[0], mean, variance, 0.001);
    factor = factor * 0.9 + 1;
    for (int c = 0; c < 2; ++c) {
      mean_sum[c] = mean_sum[c] * 0.9 + mean[c];
      variance_sum[c] = variance_sum[c] * 0.9 + variance[c] * m / (m - 1);
      EXPECT_NEAR(layer.params()[0]->cpu_data()[c], mean_sum[c], 1e-4);
      EXPECT_NEAR(layer.params()[1]->cpu_data()[c], variance_sum[c], 1e-4);
    }
    EXPECT_NEAR(layer.params()[2]->cpu_data()[0], factor, 1e-6);
  }
}

TEST(BatchNormLayerTest, TestPhaseUsesTheStoredStatistics) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 2, 2}), 0.f, 1.f, 12);
  top.Add({});
  BatchNormLayer layer(BatchNormParam("", TEST));
  layer.SetUp(bottom.pointers, top.pointers);
  const float sums[2][3] = {{0.5f, -1.f, 2.f}, {4.f, 1.f, 0.25f}};
  for (int c = 0; c < 3; ++c) {
    layer.params()[0]->mutable_cpu_data()[c] = sums[0][c];
    layer.params()[1]->mutable_cpu_data()[c] = sums[1][c];
  }
  layer.params()[2]->mutable_cpu_data()[0] = 2.f;
  layer.Forward(bottom.pointers, top.pointers);
  std::vector<double> mean, variance;
  for (int c = 0; c < 3; ++c) {
    mean.push_back(sums[0][c] / 2.0);
    variance.push_back(sums[1][c] / 2.0);
  }
  ExpectNormalized(*bottom.pointers[0], *top.pointers[0], mean, variance, 1e-5);
  // The statistics are left alone, and a 0 scale factor means 0 mean and variance.
  EXPECT_EQ(layer.params()[2]->cpu_data()[0], 2.f);
  EXPECT_EQ(layer.params()[0]->cpu_data()[1], -1.f);
  layer.params()[2]->mutable_cpu_data()[0] = 0.f;
  layer.Forward(bottom.pointers, top.pointers);
  ExpectNormalized(*bottom.pointers[0], *top.pointers[0], {0, 0, 0}, {0, 0, 0}, 1e-5);
}

TEST(BatchNormLayerTest, UseGlobalStatsOverridesThePhase) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 2, 3}), 0.f, 1.f, 13);
  top.Add({});
  BatchNormLayer train_global(BatchNormParam("use_global_stats: true", TRAIN));
  train_global.SetUp(bottom.pointers, top.pointers);
  train_global.params()[2]->mutable_cpu_data()[0] = 1.f;
  train_global.params()[1]->set_data(1.f);
  train_global.Forward(bottom.pointers, top.pointers);
  ExpectNormalized(*bottom.pointers[0], *top.pointers[0], {0, 0}, {1, 1}, 1e-5);
  EXPECT_EQ(train_global.params()[2]->cpu_data()[0], 1.f);

  BatchNormLayer test_batch(BatchNormParam("use_global_stats: false", TEST));
  test_batch.SetUp(bottom.pointers, top.pointers);
  test_batch.Forward(bottom.pointers, top.pointers);
  std::vector<double> mean, variance;
  ChannelStats(*bottom.pointers[0], &mean, &variance);
  ExpectNormalized(*bottom.pointers[0], *top.pointers[0], mean, variance, 1e-5);
}

TEST(BatchNormLayerTest, GradientsThroughBatchStatistics) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 2, 2}), 0.5f, 1.f, 14);
  top.Add({});
  BatchNormLayer layer(BatchNormParam("", TRAIN));
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker(1e-2f, 1e-2f).CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(BatchNormLayerTest, GradientsWithGlobalStatistics) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 3}), 0.f, 1.f, 15);
  top.Add({});
  BatchNormLayer layer(BatchNormParam("", TEST));
  layer.SetUp(bottom.pointers, top.pointers);
  test::FillUniform(layer.params()[0].get(), -1.f, 1.f, 3);
  test::FillUniform(layer.params()[1].get(), 0.5f, 2.f, 4);
  layer.params()[2]->mutable_cpu_data()[0] = 1.5f;
  test::GradientChecker(1e-2f, 1e-3f).CheckGradient(&layer, bottom.pointers, top.pointers);
}

// The GPU code, rehearsed on the host (Context::set_gpu_code_on_host): in place it gives what it gives out of
// place (the conformance harness checks it out of place against the CPU code), and its gradient through the batch
// statistics is the numeric one.
TEST(BatchNormLayerTest, GpuCodeInPlaceMatchesOutOfPlaceAndItsGradients) {
  auto context = std::make_shared<Context>();
  context->set_gpu_code_on_host(true);
  const std::vector<int> shape = {2, 3, 2, 2};
  Blob x(shape), dy(shape);
  test::FillGaussian(&x, 0.f, 1.f, 21);
  test::FillGaussian(&dy, 0.f, 1.f, 22);
  for (Phase phase : {TRAIN, TEST}) {
    SCOPED_TRACE(phase == TRAIN ? "TRAIN" : "TEST");
    // Out of place, then in place: the top, the bottom's gradient and the running sums.
    std::vector<float> y[2], dx[2], sums[2];
    for (int in_place = 0; in_place < 2; ++in_place) {
      BatchNormLayer layer(BatchNormParam("", phase), context);
      test::BlobList bottom, top;
      Blob* input = bottom.Add(shape);
      std::copy(x.cpu_data(), x.cpu_data() + x.count(), input->mutable_cpu_data());
      if (!in_place) top.Add({});
      const std::vector<Blob*>& output = in_place ? bottom.pointers : top.pointers;
      layer.SetUp(bottom.pointers, output);
      test::FillUniform(layer.params()[0].get(), -1.f, 1.f, 3);
      test::FillUniform(layer.params()[1].get(), 0.5f, 2.f, 4);
      layer.params()[2]->mutable_cpu_data()[0] = 1.5f;
      layer.Forward(bottom.pointers, output);
      y[in_place] = test::DataOf(*output[0]);
      std::copy(dy.cpu_data(), dy.cpu_data() + dy.count(), output[0]->mutable_cpu_diff());
      layer.Backward(output, {true}, bottom.pointers);
      dx[in_place] = test::DiffOf(*input);
      for (int b = 0; b < 3; ++b) {
        const std::vector<float> values = test::DataOf(*layer.params()[b]);
        sums[in_place].insert(sums[in_place].end(), values.begin(), values.end());
      }
    }
    EXPECT_EQ(y[0], y[1]);
    EXPECT_EQ(dx[0], dx[1]);
    EXPECT_EQ(sums[0], sums[1]);
  }
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 2, 2}), 0.5f, 1.f, 14);
  top.Add({});
  BatchNormLayer layer(BatchNormParam("", TRAIN), context);
  layer.SetUp(bottom.pointers, top.pointers);
  test::GradientChecker(1e-2f, 1e-2f).CheckGradient(&layer, bottom.pointers, top.pointers);
}

TEST(BatchNormLayerTest, StoredBlobsLoadIncludingLegacyFourDShapes) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 2, 2}), 0.f, 1.f, 16);
  top.Add({});
  LayerParameter param = BatchNormParam("", TEST);
  const std::vector<std::vector<int>> stored = {{1, 1, 1, 3}, {3}, {1}};
  for (size_t b = 0; b < stored.size(); ++b) {
    Blob blob(stored[b]);
    for (int i = 0; i < blob.count(); ++i) blob.mutable_cpu_data()[i] = b == 2 ? 4.f : 1.f + i + b;
    blob.ToProto(param.add_blobs());
  }
  BatchNormLayer layer(param);
  layer.SetUp(bottom.pointers, top.pointers);
  ASSERT_EQ(layer.params()[0]->shape(), std::vector<int>{3});
  layer.Forward(bottom.pointers, top.pointers);
  ExpectNormalized(*bottom.pointers[0], *top.pointers[0], {0.25, 0.5, 0.75}, {0.5, 0.75, 1.0}, 1e-5);

  LayerParameter wrong = BatchNormParam("", TEST);
  Blob({4}).ToProto(wrong.add_blobs());
  Blob({3}).ToProto(wrong.add_blobs());
  Blob({1}).ToProto(wrong.add_blobs());
  test::ExpectErrorContaining(
      [&] {
        BatchNormLayer bad(wrong);
        bad.SetUp(bottom.pointers, top.pointers);
      },
      {"layer 'bn' (BatchNorm)", "running mean sum", "4 (4)"});
  LayerParameter two = BatchNormParam("", TEST);
  Blob({3}).ToProto(two.add_blobs());
  Blob({3}).ToProto(two.add_blobs());
  test::ExpectErrorContaining(
      [&] {
        BatchNormLayer bad(two);
        bad.SetUp(bottom.pointers, top.pointers);
      },
      {"layer 'bn' (BatchNorm)", "2 blob(s)", "3"});
}

TEST(BatchNormLayerTest, RejectsBadParametersAndShapes) {
  test::BlobList bottom, top;
  test::FillGaussian(bottom.Add({2, 3, 2}));
  top.Add({});
  const auto expect_error = [&](const LayerParameter& param, const std::vector<std::string>& parts) {
    test::ExpectErrorContaining(
        [&] {
          BatchNormLayer layer(param);
          layer.SetUp(bottom.pointers, top.pointers);
        },
        parts);
  };
  expect_error(BatchNormParam("moving_average_fraction: 1.5", TRAIN),
               {"layer 'bn' (BatchNorm)", "moving_average_fraction"});
  expect_error(BatchNormParam("eps: -1", TRAIN), {"layer 'bn' (BatchNorm)", "eps"});
  expect_error(BatchNormParam("", TRAIN, "param { lr_mult: 0 } param { lr_mult: 1 }"),
               {"layer 'bn' (BatchNorm)", "param 1", "lr_mult 1"});
  // The channel count is fixed by the statistics.
  BatchNormLayer layer(BatchNormParam("", TRAIN));
  layer.SetUp(bottom.pointers, top.pointers);
  bottom.pointers[0]->Reshape({2, 4, 2});
  test::ExpectErrorContaining([&] { layer.Reshape(bottom.pointers, top.pointers); },
                              {"layer 'bn' (BatchNorm)", "2 4 2 (16)", "4 channel(s)", "3 (3)"});
}

// In a net and under a solver, the statistics are parameters with lr_mult 0 and no gradient: training changes
// them only through forward, however the solver regularises.
const char kBatchNormNet[] = R"(
  layer { name: 'input' type: 'Input' top: 'data' top: 'label'
          input_param { shape { dim: 4 dim: 2 dim: 3 } shape { dim: 4 } } }
  layer { name: 'bn' type: 'BatchNorm' bottom: 'data' top: 'data' batch_norm_param { moving_average_fraction: 0.5 } }
  layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip'
          inner_product_param { num_output: 2 weight_filler { type: 'gaussian' } } }
  layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }
)";

TEST(BatchNormLayerTest, SolverLeavesTheStatisticsToForward) {
  SolverParameter param;
  ReadProtoFromText("base_lr: 0.5 lr_policy: 'fixed' momentum: 0.9 weight_decay: 0.1", "solver", &param);
  ReadProtoFromText(kBatchNormNet, "net", param.mutable_net_param());
  auto solver = CreateSolver(param);
  Net* net = solver->net();
  Layer* bn = net->layer_by_name("bn");
  ASSERT_NE(bn, nullptr);
  ASSERT_EQ(net->learnable_params().size(), 5u);  // 3 statistics, weights, bias
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(net->params_lr()[i], 0.f);
    EXPECT_EQ(net->params_weight_decay()[i], 0.f);
    EXPECT_FALSE(bn->param_propagate_down(i));
  }
  Blob* data = net->blob_by_name("data");
  test::FillGaussian(data, 1.f, 2.f, 17);
  Blob input(data->shape());
  std::copy(data->cpu_data(), data->cpu_data() + data->count(), input.mutable_cpu_data());
  Blob* label = net->blob_by_name("label");
  for (int i = 0; i < 4; ++i) label->mutable_cpu_data()[i] = static_cast<float>(i % 2);
  std::vector<double> mean, variance;
  ChannelStats(input, &mean, &variance);
  const std::vector<float> weights_before = test::DataOf(*net->learnable_params()[3]);
  double factor = 0;
  std::vector<double> mean_sum(2, 0.0), variance_sum(2, 0.0);
  for (int iteration = 0; iteration < 3; ++iteration) {
    std::copy(input.cpu_data(), input.cpu_data() + input.count(), data->mutable_cpu_data());  // in place
    solver->Step(1);
    factor = factor * 0.5 + 1;
    for (int c = 0; c < 2; ++c) {
      mean_sum[c] = mean_sum[c] * 0.5 + mean[c];
      variance_sum[c] = variance_sum[c] * 0.5 + variance[c] * 12.0 / 11.0;
      EXPECT_NEAR(bn->params()[0]->cpu_data()[c], mean_sum[c], 1e-4);
      EXPECT_NEAR(bn->params()[1]->cpu_data()[c], variance_sum[c], 1e-4);
    }
    EXPECT_NEAR(bn->params()[2]->cpu_data()[0], factor, 1e-6);
  }
  EXPECT_NE(test::DataOf(*net->learnable_params()[3]), weights_before);  // the solver did train
  // The ParamSpecs the layer added are written with it, as Caffe writes them.
  LayerParameter written;
  bn->ToProto(&written);
  ASSERT_EQ(written.param_size(), 3);
  EXPECT_EQ(written.param(2).lr_mult(), 0.f);
}

}  // namespace
}  // namespace crema
