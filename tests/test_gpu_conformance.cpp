// One conformance harness for the GPU (after ggml's test-backend-ops): every case below runs forward and
// backward on random inputs, once on the CPU (the engine a CPU net would choose: the reference) and once on the
// GPU with each GPU engine of its type in turn (cuDNN's, the CUDA kernels), and every top, bottom gradient and
// parameter gradient must agree within the case's tolerance. A type without a GPU engine runs on the host of a
// GPU net (LayerRegistry's fallback), and its cases check that path instead.
//
// Adding a layer or an engine is one line in Cases(): a layer's text, its bottoms, and a tolerance when the
// default does not fit. A host test (it runs everywhere) fails when a type with a GPU engine has no line, so no
// GPU engine goes unchecked. The GPU tests skip with a message where no device exists.
#include <gtest/gtest.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/blob.hpp"
#include "core/context.hpp"
#include "core/random.hpp"
#include "core/threads.hpp"
#include "layers/layer_registry.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// What a bottom holds: Gaussian values, positive values (Log, stochastic pooling), or class labels in
// [0, classes).
struct Bottom {
  std::vector<int> shape;
  int classes = 0;  // > 0: labels
  bool positive = false;
};
Bottom Values(std::vector<int> shape) { return {std::move(shape)}; }
Bottom Positive(std::vector<int> shape) { return {std::move(shape), 0, true}; }
Bottom Labels(std::vector<int> shape, int classes) { return {std::move(shape), classes}; }

struct Case {
  std::string layer;  // the layer's text without name and blob names; `type` first
  std::vector<Bottom> bottoms;
  float tolerance = 1e-4f;  // relative, with an absolute floor of the same size
  int tops = 1;
  bool backward = true;  // false for layers without a gradient (Threshold, Accuracy)
};

// Filler text for learned parameters: random, so that every weight and bias matters.
#define RANDOM_FILLERS "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 }"

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      // Vision
      {"type: 'Convolution' convolution_param { num_output: 4 kernel_size: 3 " RANDOM_FILLERS " }",
       {Values({2, 3, 7, 6})}},
      {"type: 'Convolution' convolution_param { num_output: 6 kernel_size: 3 pad: 1 stride: 2 group: 3 " RANDOM_FILLERS
       " }",
       {Values({2, 3, 9, 8})}},
      {"type: 'Convolution' convolution_param { num_output: 4 kernel_h: 3 kernel_w: 2 dilation: 2 pad: "
       "2 " RANDOM_FILLERS " }",
       {Values({1, 2, 8, 9})}},
      {"type: 'Convolution' convolution_param { num_output: 5 kernel_size: 1 " RANDOM_FILLERS " }",
       {Values({3, 4, 5, 5})}},
      {"type: 'Convolution' convolution_param { num_output: 3 kernel_size: 2 kernel_size: 3 kernel_size: "
       "2 " RANDOM_FILLERS " }",
       {Values({2, 2, 4, 5, 4})}},
      {"type: 'Deconvolution' convolution_param { num_output: 3 kernel_size: 4 stride: 2 pad: 1 " RANDOM_FILLERS " }",
       {Values({2, 4, 5, 5})}},
      {"type: 'Pooling' pooling_param { pool: MAX kernel_size: 3 stride: 2 }", {Values({2, 3, 9, 8})}},
      {"type: 'Pooling' pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 }", {Values({2, 3, 8, 8})}, 1e-4f, 2},
      {"type: 'Pooling' pooling_param { pool: MAX kernel_size: 2 stride: 2 }", {Values({2, 4, 6, 6})}},
      {"type: 'Pooling' pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 }", {Values({2, 3, 9, 8})}},
      {"type: 'Pooling' pooling_param { pool: AVE global_pooling: true }", {Values({2, 5, 4, 6})}},
      {"type: 'Pooling' pooling_param { pool: STOCHASTIC kernel_size: 2 stride: 2 } phase: TEST",
       {Positive({2, 3, 6, 6})}},
      {"type: 'LRN' lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 }", {Values({2, 5, 4, 4})}},
      // -- more vision cases (issue 13) --
      {"type: 'LRN' lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 norm_region: WITHIN_CHANNEL }",
       {Values({2, 3, 5, 4})}},
      {"type: 'LRN' lrn_param { local_size: 5 alpha: 0.3 beta: 0.6 k: 2 }", {Values({2, 7, 3, 2})}},
      {"type: 'BatchNorm' batch_norm_param { use_global_stats: true eps: 0.001 } blobs { shape { dim: 3 } data: [0.5, "
       "-1, 2] } blobs { shape { dim: 3 } data: [4, 1, 0.5] } blobs { shape { dim: 1 } data: 2 }",
       {Values({2, 3, 4, 3})}},
      {"type: 'BatchNorm' phase: TEST", {Values({2, 3, 2, 2})}},
      {"type: 'BatchNorm' phase: TRAIN batch_norm_param { moving_average_fraction: 0.9 }", {Values({8, 5})}, 1e-3f},
      {"type: 'BatchNorm' phase: TRAIN", {Values({1, 3, 4, 5})}, 1e-3f},
      {"type: 'Scale' scale_param { axis: 1 }", {Values({2, 3, 4, 5}), Values({3, 4})}},
      {"type: 'Scale' scale_param { axis: 0 bias_term: true bias_filler { type: 'gaussian' } }",
       {Values({4, 3, 2}), Values({4, 3})}},
      {"type: 'Scale' scale_param { axis: 0 num_axes: 2 bias_term: true filler { type: 'gaussian' } bias_filler { "
       "type: 'gaussian' } }",
       {Values({2, 3, 4})}},
      {"type: 'Scale' scale_param { num_axes: 0 filler { type: 'gaussian' } }", {Values({2, 3, 4})}},
      {"type: 'Scale' scale_param { axis: -1 filler { type: 'gaussian' } }", {Values({3, 4, 5})}},
      {"type: 'Bias' bias_param { filler { type: 'gaussian' } }", {Values({2, 3, 4, 5})}},
      {"type: 'Bias' bias_param { axis: -2 }", {Values({2, 3, 4, 5}), Values({4, 5})}},
      {"type: 'Bias' bias_param { num_axes: 0 filler { type: 'gaussian' } }", {Values({2, 3, 4})}},
      {"type: 'Bias' bias_param { axis: -1 filler { type: 'gaussian' } }", {Values({3, 4, 5})}},
      {"type: 'PReLU' prelu_param { channel_shared: true filler { type: 'uniform' min: 0.1 max: 0.9 } }",
       {Values({2, 3, 4, 4})}},
      {"type: 'PReLU' prelu_param { filler { type: 'gaussian' std: 0.5 } }", {Values({5, 4})}},
      {"type: 'Crop' crop_param { axis: 2 offset: 1 offset: 2 }", {Values({2, 3, 7, 8}), Values({2, 3, 4, 5})}},
      {"type: 'Crop' crop_param { axis: 0 offset: 1 }", {Values({4, 5, 6}), Values({2, 3, 4})}},
      {"type: 'Crop' crop_param { axis: 1 }", {Values({2, 4, 3, 3}), Values({1, 2, 3, 2})}},
      {"type: 'SPP' spp_param { pyramid_height: 3 pool: MAX }", {Values({2, 3, 9, 8})}},
      {"type: 'SPP' spp_param { pyramid_height: 2 pool: AVE }", {Values({2, 3, 5, 7})}},
      {"type: 'SPP' spp_param { pyramid_height: 1 }", {Values({2, 4, 3, 3})}},
      {"type: 'SPP' phase: TRAIN spp_param { pyramid_height: 2 pool: STOCHASTIC }", {Positive({2, 3, 6, 6})}},
      {"type: 'Im2col' convolution_param { kernel_size: 3 stride: 2 pad: 1 }", {Values({2, 3, 7, 6})}},
      {"type: 'Im2col' convolution_param { kernel_size: 2 dilation: 2 force_nd_im2col: true }", {Values({2, 2, 5, 4})}},
      {"type: 'Im2col' convolution_param { kernel_size: 2 kernel_size: 3 kernel_size: 2 pad: 1 stride: 2 }",
       {Values({2, 2, 4, 5, 3})}},
      {"type: 'Im2col' convolution_param { axis: 2 kernel_size: 3 }", {Values({2, 2, 3, 9})}},
      {"type: 'Pooling' pooling_param { pool: STOCHASTIC kernel_size: 3 stride: 2 } phase: TRAIN",
       {Positive({2, 3, 9, 8})}},
      {"type: 'Pooling' pooling_param { pool: STOCHASTIC kernel_size: 3 stride: 2 pad: 1 } phase: TRAIN",
       {Positive({2, 2, 6, 7})}},
      {"type: 'Pooling' pooling_param { pool: STOCHASTIC kernel_size: 3 stride: 2 pad: 1 } phase: TEST",
       {Positive({2, 2, 7, 6})}},
      // Neurons
      {"type: 'ReLU'", {Values({2, 3, 4, 5})}},
      {"type: 'ReLU' relu_param { negative_slope: 0.1 }", {Values({2, 3, 4, 5})}},
      {"type: 'Dropout' phase: TRAIN dropout_param { dropout_ratio: 0.3 }", {Values({4, 50})}},
      {"type: 'Dropout' phase: TEST", {Values({4, 50})}},
      {"type: 'Sigmoid'", {Values({3, 40})}},
      {"type: 'TanH'", {Values({3, 40})}},
      {"type: 'ELU' elu_param { alpha: 0.7 }", {Values({3, 40})}},
      {"type: 'AbsVal'", {Values({3, 40})}},
      {"type: 'BNLL'", {Values({3, 40})}},
      {"type: 'Power' power_param { power: 2 scale: 0.5 shift: 1 }", {Values({3, 40})}},
      {"type: 'Exp' exp_param { base: 2 scale: 0.5 }", {Values({3, 40})}},
      {"type: 'Log' log_param { scale: 2 shift: 1 }", {Positive({3, 40})}},
      {"type: 'Threshold' threshold_param { threshold: 0.2 }", {Values({3, 40})}, 1e-4f, 1, false},
      {"type: 'Clip' clip_param { min: -0.5 max: 0.7 }", {Values({3, 40})}},
      {"type: 'Swish' swish_param { beta: 1.5 }", {Values({3, 40})}},
      // Expression: a kept costly value (sigmoid), a broadcast bottom, two tops (one a mean), a bottom read only
      // through what forward kept (tanh(b) is top 0), and one that backward does not read at all (c: d/dc = 1).
      {"type: 'Expression' expression_param { formula: 'tanh(b)' formula: 'mean(a * sigmoid(a) * w + tanh(b) + c)' "
       "bottom_name: 'a' bottom_name: 'b' bottom_name: 'c' bottom_name: 'w' }",
       {Values({3, 40}), Values({3, 40}), Values({3, 40}), Values({1})},
       1e-4f,
       2},
      {"type: 'PReLU'", {Values({2, 3, 4, 4})}},
      // Common
      {"type: 'InnerProduct' inner_product_param { num_output: 7 " RANDOM_FILLERS " }", {Values({4, 3, 2, 5})}},
      {"type: 'InnerProduct' inner_product_param { num_output: 5 transpose: true axis: 2 " RANDOM_FILLERS " }",
       {Values({2, 3, 6})}},
      {"type: 'InnerProduct' inner_product_param { num_output: 4 bias_term: false " RANDOM_FILLERS " }",
       {Values({3, 10})}},
      {"type: 'Flatten'", {Values({2, 3, 4, 5})}},
      {"type: 'Split'", {Values({2, 3, 4})}, 1e-4f, 3},
      {"type: 'Softmax'", {Values({4, 10})}},
      {"type: 'Softmax' softmax_param { axis: 1 }", {Values({2, 5, 3, 4})}},
      {"type: 'Softmax' softmax_param { axis: -1 }", {Values({2, 3, 7})}},
      {"type: 'Concat'", {Values({2, 3, 4}), Values({2, 5, 4})}},
      {"type: 'Eltwise' eltwise_param { operation: SUM coeff: 0.5 coeff: -2 }", {Values({2, 3, 4}), Values({2, 3, 4})}},
      {"type: 'BatchNorm' phase: TRAIN", {Values({4, 3, 2, 2})}, 1e-3f},
      {"type: 'Scale' scale_param { bias_term: true filler { type: 'gaussian' } bias_filler { type: 'gaussian' } }",
       {Values({2, 3, 4})}},
      // -- more common cases (issue 13) --
      {"type: 'Concat' concat_param { axis: 0 }", {Values({2, 3, 4}), Values({3, 3, 4})}},
      {"type: 'Concat' concat_param { axis: 2 }", {Values({2, 3, 4}), Values({2, 3, 1}), Values({2, 3, 5})}},
      {"type: 'Concat'", {Values({2, 3, 4, 5}), Values({2, 2, 4, 5})}},
      {"type: 'Concat' concat_param { axis: -1 }",
       {Values({2, 3, 1}), Values({2, 3, 2}), Values({2, 3, 3}), Values({2, 3, 1}), Values({2, 3, 2}),
        Values({2, 3, 3}), Values({2, 3, 1}), Values({2, 3, 2}), Values({2, 3, 3}), Values({2, 3, 4})}},
      {"type: 'Slice' slice_param { slice_point: 1 slice_point: 4 }", {Values({2, 6, 3})}, 1e-4f, 3},
      {"type: 'Slice' slice_param { axis: 0 }", {Values({4, 3, 2})}, 1e-4f, 2},
      {"type: 'Slice' slice_param { axis: -1 }", {Values({2, 3, 10})}, 1e-4f, 10},
      {"type: 'Eltwise' eltwise_param { operation: PROD }", {Values({2, 3, 4}), Values({2, 3, 4}), Values({2, 3, 4})}},
      {"type: 'Eltwise' eltwise_param { operation: PROD stable_prod_grad: false }",
       {Positive({2, 3, 4}), Positive({2, 3, 4})}},
      {"type: 'Eltwise' eltwise_param { operation: MAX }", {Values({2, 3, 4}), Values({2, 3, 4}), Values({2, 3, 4})}},
      {"type: 'Eltwise' eltwise_param { operation: SUM coeff: 1 coeff: -0.5 coeff: 2 }",
       {Values({2, 3, 4, 5}), Values({2, 3, 4, 5}), Values({2, 3, 4, 5})}},
      {"type: 'Eltwise' eltwise_param { operation: PROD }", std::vector<Bottom>(10, Values({2, 5}))},
      {"type: 'Eltwise' eltwise_param { operation: MAX }", std::vector<Bottom>(10, Values({2, 5}))},
      {"type: 'Tile' tile_param { tiles: 3 }", {Values({2, 3, 4})}},
      {"type: 'Tile' tile_param { axis: 0 tiles: 2 }", {Values({3, 2})}},
      {"type: 'Tile' tile_param { axis: -1 tiles: 4 }", {Values({2, 3, 5})}},
      {"type: 'Reshape' reshape_param { shape { dim: 0 dim: -1 } }", {Values({2, 3, 4})}},
      {"type: 'Silence'", {Values({2, 3}), Values({4})}, 1e-4f, 0},
      {"type: 'Reduction'", {Values({3, 4})}},
      {"type: 'Reduction' reduction_param { operation: ASUM axis: 1 }", {Values({2, 3, 4})}},
      {"type: 'Reduction' reduction_param { operation: SUMSQ axis: 2 coeff: -0.5 }", {Values({2, 3, 4, 5})}},
      {"type: 'Reduction' reduction_param { operation: MEAN axis: -1 coeff: 2 }", {Values({2, 3, 6})}},
      {"type: 'ArgMax'", {Values({4, 10})}, 1e-4f, 1, false},
      {"type: 'ArgMax' argmax_param { top_k: 3 out_max_val: true }", {Values({3, 2, 5})}, 1e-4f, 1, false},
      {"type: 'ArgMax' argmax_param { axis: 1 top_k: 2 }", {Values({2, 6, 3, 2})}, 1e-4f, 1, false},
      {"type: 'ArgMax' argmax_param { axis: -1 top_k: 2 out_max_val: true }", {Values({2, 3, 7})}, 1e-4f, 1, false},
      {"type: 'ArgMax' argmax_param { top_k: 4 }", {Labels({3, 12}, 3)}, 1e-4f, 1, false},  // ties
      {"type: 'BatchReindex'", {Values({4, 3, 2}), Labels({6}, 4)}},
      {"type: 'Filter'", {Values({6, 3, 2}), Values({6, 4}), Labels({6}, 2)}, 1e-4f, 2},
      {"type: 'Embed' embed_param { num_output: 5 input_dim: 7 " RANDOM_FILLERS " }", {Labels({4, 6}, 7)}},
      {"type: 'Embed' embed_param { num_output: 3 input_dim: 4 bias_term: false " RANDOM_FILLERS " }",
       {Labels({10}, 4)}},
      {"type: 'MVN'", {Values({2, 3, 4, 5})}},
      {"type: 'MVN' mvn_param { normalize_variance: false }", {Values({2, 3, 4, 5})}},
      {"type: 'MVN' mvn_param { across_channels: true eps: 0.001 }", {Values({2, 3, 4, 5})}},
      {"type: 'Parameter' parameter_param { shape { dim: 2 dim: 3 } }", {}},
      {"type: 'DummyData' dummy_data_param { shape { dim: 2 dim: 3 } shape { dim: 4 } "
       "data_filler { type: 'gaussian' } }",
       {},
       1e-4f,
       2,
       false},
      // Losses and metrics
      {"type: 'SoftmaxWithLoss'", {Values({6, 5}), Labels({6}, 5)}},
      {"type: 'SoftmaxWithLoss' loss_param { ignore_label: 2 normalization: VALID }",
       {Values({2, 4, 3, 3}), Labels({2, 3, 3}, 4)}},
      {"type: 'SoftmaxWithLoss' loss_param { normalization: BATCH_SIZE } softmax_param { axis: 2 }",
       {Values({2, 3, 6}), Labels({2, 3}, 6)},
       1e-4f,
       2},
      {"type: 'EuclideanLoss'", {Values({4, 6}), Values({4, 6})}},
      {"type: 'Accuracy'", {Values({20, 7}), Labels({20}, 7)}, 1e-4f, 1, false},
      {"type: 'Accuracy' accuracy_param { top_k: 3 ignore_label: 1 }",
       {Values({30, 6}), Labels({30}, 6)},
       1e-4f,
       2,
       false},
      {"type: 'Accuracy' accuracy_param { axis: 1 }", {Values({2, 5, 3, 3}), Labels({2, 3, 3}, 5)}, 1e-4f, 1, false},
      // -- more loss and recurrent cases (issue 13) --
      {"type: 'EuclideanLoss'", {Values({3, 2, 4}), Values({3, 8})}},
      {"type: 'SigmoidCrossEntropyLoss'", {Values({4, 5}), Labels({4, 5}, 2)}},
      {"type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: 2 normalization: VALID }",
       {Values({3, 2, 4}), Labels({3, 2, 4}, 3)}},
      {"type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: 2 normalization: FULL } loss_weight: 0.5",
       {Values({3, 7}), Labels({3, 7}, 3)}},
      {"type: 'SigmoidCrossEntropyLoss' loss_param { normalization: NONE }", {Values({2, 9}), Labels({2, 9}, 2)}},
      {"type: 'HingeLoss'", {Values({6, 5}), Labels({6}, 5)}},
      {"type: 'HingeLoss' hinge_loss_param { norm: L2 }", {Values({4, 3, 2}), Labels({4}, 6)}},
      {"type: 'MultinomialLogisticLoss'", {Positive({5, 4}), Labels({5}, 4)}},
      {"type: 'MultinomialLogisticLoss' loss_weight: 2", {Positive({3, 2, 3}), Labels({3, 1}, 6)}},
      {"type: 'InfogainLoss'", {Values({6, 5}), Labels({6}, 5), Labels({5, 5}, 3)}},
      {"type: 'InfogainLoss' infogain_loss_param { axis: 2 } loss_param { ignore_label: 1 normalization: FULL }",
       {Values({2, 3, 4}), Labels({2, 3}, 4), Labels({4, 4}, 3)},
       1e-4f,
       2},
      // H from infogain_loss_param.source: a file written once for the run.
      {[] {
         static const test::TempDir dir;
         const std::string path = dir.file("infogain.binaryproto");
         Blob h({5, 5});
         for (int i = 0; i < h.count(); ++i) h.mutable_cpu_data()[i] = 0.25f * static_cast<float>(i % 7);
         BlobProto proto;
         h.ToProto(&proto);
         test::WriteText(path, proto.SerializeAsString());
         return "type: 'InfogainLoss' infogain_loss_param { source: '" + path +
                "' } loss_param { ignore_label: 0 normalization: BATCH_SIZE }";
       }(),
       {Values({2, 5, 3}), Labels({2, 3}, 5)}},
      {"type: 'ContrastiveLoss' contrastive_loss_param { margin: 3 }",
       {Values({6, 3}), Values({6, 3}), Labels({6}, 2)}},
      {"type: 'ContrastiveLoss' contrastive_loss_param { margin: 6 legacy_version: true }",
       {Values({6, 2, 2}), Values({6, 2, 2}), Labels({6}, 2)}},
      {"type: 'LSTMUnit'", {Values({1, 3, 4}), Values({1, 3, 16}), Labels({1, 3}, 2)}, 1e-4f, 2},
      {"type: 'RNN' recurrent_param { num_output: 4 " RANDOM_FILLERS " }", {Values({3, 2, 5}), Labels({3, 2}, 2)}},
      {"type: 'RNN' recurrent_param { num_output: 3 " RANDOM_FILLERS " }",
       {Values({4, 2, 2, 3}), Labels({4, 2}, 2), Values({2, 5})}},
      {"type: 'RNN' recurrent_param { num_output: 4 expose_hidden: true " RANDOM_FILLERS " }",
       {Values({3, 3, 5}), Labels({3, 3}, 2), Values({1, 3, 4})},
       1e-4f,
       2},
      {"type: 'RNN' recurrent_param { num_output: 4 expose_hidden: true " RANDOM_FILLERS " }",
       {Values({3, 2, 5}), Labels({3, 2}, 2), Values({2, 3}), Values({1, 2, 4})},
       1e-4f,
       2},
      {"type: 'LSTM' recurrent_param { num_output: 4 " RANDOM_FILLERS " }", {Values({3, 2, 5}), Labels({3, 2}, 2)}},
      {"type: 'LSTM' recurrent_param { num_output: 3 " RANDOM_FILLERS " }",
       {Values({4, 2, 2, 3}), Labels({4, 2}, 2), Values({2, 5})}},
      {"type: 'LSTM' recurrent_param { num_output: 4 expose_hidden: true " RANDOM_FILLERS " }",
       {Values({3, 3, 5}), Labels({3, 3}, 2), Values({1, 3, 4}), Values({1, 3, 4})},
       1e-4f,
       3},
      {"type: 'LSTM' recurrent_param { num_output: 4 expose_hidden: true " RANDOM_FILLERS " }",
       {Values({3, 2, 5}), Labels({3, 2}, 2), Values({2, 3}), Values({1, 2, 4}), Values({1, 2, 4})},
       1e-4f,
       3},
      // -- cuDNN engine cases (issue 13) --
      {"type: 'LRN' lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 k: 2 }", {Values({2, 16, 5, 5})}},
      {"type: 'LRN' lrn_param { local_size: 1 alpha: 2 beta: 1.5 k: 0.5 }", {Values({2, 4, 3, 3})}},
      {"type: 'LRN' lrn_param { local_size: 15 alpha: 1 beta: 0.6 }", {Values({2, 20, 3, 2})}},
      {"type: 'LRN' lrn_param { local_size: 7 alpha: 1.5 }", {Values({2, 3, 4, 4})}},
      {"type: 'Sigmoid'", {Values({2, 3, 4, 5})}},
      {"type: 'TanH'", {Values({2, 3, 2, 3, 2})}},
      {"type: 'BatchNorm' phase: TEST blobs { shape { dim: 3 } data: [0.6, -1.2, 0.9] } blobs { shape { dim: 3 } data: "
       "[3, 1.5, 0.2] } blobs { shape { dim: 1 } data: 1.5 }",
       {Values({2, 3, 2, 3, 2})}},
      {"type: 'BatchNorm' phase: TRAIN batch_norm_param { use_global_stats: true } blobs { shape { dim: 2 } data: [1, "
       "-1] } blobs { shape { dim: 2 } data: [2, 0.5] } blobs { shape { dim: 1 } data: 0.999 }",
       {Values({4, 2, 3})}},
      {"type: 'BatchNorm' phase: TRAIN", {Values({12})}, 1e-3f},
      {"type: 'BatchNorm' phase: TRAIN", {Values({2, 3, 2, 3, 4})}, 1e-3f},
      {"type: 'BatchNorm' phase: TRAIN batch_norm_param { moving_average_fraction: 0.5 eps: 0.001 }",
       {Values({4, 6, 3, 3})},
       1e-3f},
      {"type: 'BatchNorm' phase: TEST batch_norm_param { use_global_stats: false }", {Values({3, 4, 2, 2})}, 1e-3f},
      // One value per channel: cuDNN refuses batch statistics there; the native engines compute them.
      {"type: 'BatchNorm' phase: TRAIN", {Values({1, 3})}, 1e-3f},
  };
  return cases;
}

// Types with a GPU engine that no case above covers, and why: they read files or the Python interpreter; the
// GPU training tests run Data and Input.
const std::set<std::string> kNotHere = {"Data",       "ImageData",  "WindowData", "HDF5Data",
                                        "HDF5Output", "MemoryData", "Input",      "Python"};

std::string TypeOf(const Case& c) { return test::ParseLayer(c.layer).type(); }

// Everything a run produced, in a fixed order: tops, then bottom gradients, then parameter gradients.
struct Outputs {
  std::vector<std::string> names;
  std::vector<std::vector<float>> values;
  void Add(const std::string& name, std::vector<float> v) {
    names.push_back(name);
    values.push_back(std::move(v));
  }
};

// Runs one case on `device` with `engine` forced ("" = the device's own choice); `engine_run` says which
// engine the registry gave. `gpu_code_on_host` rehearses the engine's GPU code on a CPU context.
// `poison_unread`: between forward and backward, the data of every bottom and top the layer declares its backward
// does not read (Layer::BackwardReadsBottom / BackwardReadsTop) is overwritten with NaN, as a memory plan may
// reuse it. `in_place`: top 0 is bottom 0's blob (the layer must allow it), and poisoning overwrites that blob where
// the layer declares its backward does not read it in place (Layer::BackwardReadsInPlace).
// As on an execution lane: inside a parallel region of two threads, the first runs `work` (its nested regions,
// oneDNN's included, take one thread) while the other waits. Exceptions come out.
void OnALane(const std::function<void()>& work) {
#ifdef _OPENMP
  std::exception_ptr failure;
#pragma omp parallel num_threads(2)
  {
    if (omp_get_thread_num() == 0) {
      try {
        work();
      } catch (...) {
        failure = std::current_exception();
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
#else
  work();
#endif
}

// Which passes of a case run on a lane (OnALane), after the layer was made and reshaped on the calling thread with
// all the threads, as a net's steps are: chosen once the layer is set up.
struct Lane {
  bool forward = false, backward = false;
};
using ChooseLane = std::function<Lane(const Layer&)>;

Outputs RunCase(const Case& c, Device device, const std::string& engine, std::string* engine_run,
                bool gpu_code_on_host = false, bool poison_unread = false, bool in_place = false,
                const ChooseLane& choose_lane = nullptr) {
  auto context = std::make_shared<Context>(device, 0);
  context->set_gpu_code_on_host(gpu_code_on_host);
  LayerParameter param = test::ParseLayer("name: 'probe' " + c.layer);
  if (!engine.empty()) context->force_engine(param.type(), engine);
  test::BlobList bottom, top;
  std::vector<std::vector<int>> shapes;
  std::vector<bool> propagate_down;
  for (size_t b = 0; b < c.bottoms.size(); ++b) {
    const Bottom& spec = c.bottoms[b];
    param.add_bottom("in" + std::to_string(b));
    shapes.push_back(spec.shape);
    Blob* blob = bottom.Add(spec.shape);
    RandomStream random(100 + b);
    float* data = blob->mutable_cpu_data();
    for (int i = 0; i < blob->count(); ++i) {
      data[i] = spec.classes > 0 ? static_cast<float>(random.UniformInt(spec.classes))
                : spec.positive  ? random.Uniform(0.1f, 2.f)
                                 : random.Gaussian(0.f, 1.f);
    }
    propagate_down.push_back(spec.classes == 0);
  }
  for (int t = 0; t < c.tops; ++t) {
    const bool shared = in_place && t == 0;
    param.add_top(shared ? "in0" : "out" + std::to_string(t));
    if (shared) {
      top.pointers.push_back(bottom.pointers[0]);
    } else {
      top.Add({});
    }
  }
  std::unique_ptr<Layer> layer = LayerRegistry::Global().Create(param, shapes, context);
  *engine_run = layer->engine() + (layer->device() == device ? "" : " (on the host)");
  layer->SetUp(bottom.pointers, top.pointers);
  const Lane lane = choose_lane ? choose_lane(*layer) : Lane();
  if (lane.forward) {
    OnALane([&] { layer->Forward(bottom.pointers, top.pointers); });
  } else {
    layer->Forward(bottom.pointers, top.pointers);
  }
  // Random top gradients (a loss top keeps the loss weight Forward gave it); parameter gradients start at 0.
  for (int t = 0; t < c.tops; ++t) {
    if (layer->loss(t) != 0.f) continue;
    RandomStream random(200 + t);
    float* diff = top.pointers[t]->mutable_cpu_diff();
    for (int i = 0; i < top.pointers[t]->count(); ++i) diff[i] = random.Gaussian(0.f, 1.f);
  }
  for (auto& blob : layer->params()) blob->set_diff(0.f);
  if (poison_unread) {
    for (size_t b = in_place ? 1 : 0; b < c.bottoms.size(); ++b)
      if (!layer->BackwardReadsBottom(static_cast<int>(b))) bottom.pointers[b]->set_data(NAN);
    for (int t = in_place ? 1 : 0; t < c.tops; ++t)
      if (!layer->BackwardReadsTop(t)) top.pointers[t]->set_data(NAN);
    if (in_place && !layer->BackwardReadsInPlace(0)) top.pointers[0]->set_data(NAN);
  }
  const bool backward = c.backward;
  if (backward && lane.backward) {
    OnALane([&] { layer->Backward(top.pointers, propagate_down, bottom.pointers); });
  } else if (backward) {
    layer->Backward(top.pointers, propagate_down, bottom.pointers);
  }

  Outputs out;
  for (int t = 0; t < c.tops; ++t) out.Add("top " + std::to_string(t), test::DataOf(*top.pointers[t]));
  if (backward) {
    for (size_t b = 0; b < c.bottoms.size(); ++b)
      if (propagate_down[b]) out.Add("bottom " + std::to_string(b) + " gradient", test::DiffOf(*bottom.pointers[b]));
    for (size_t p = 0; p < layer->params().size(); ++p) {
      out.Add("parameter " + std::to_string(p), test::DataOf(*layer->params()[p]));
      out.Add("parameter " + std::to_string(p) + " gradient", test::DiffOf(*layer->params()[p]));
    }
  }
  return out;
}

// A case's layer with its bottoms ("in0", ...) and tops ("out0", ...) named, and the bottoms' shapes.
LayerParameter ProbeLayer(const Case& c, std::vector<std::vector<int>>* shapes) {
  LayerParameter param = test::ParseLayer("name: 'probe' " + c.layer);
  for (size_t b = 0; b < c.bottoms.size(); ++b) {
    shapes->push_back(c.bottoms[b].shape);
    param.add_bottom("in" + std::to_string(b));
  }
  for (int t = 0; t < c.tops; ++t) param.add_top("out" + std::to_string(t));
  return param;
}

// Whether a case's layer may run in place (top 0 as bottom 0's blob).
bool MayRunInPlace(const Case& c) {
  if (c.bottoms.empty() || c.tops == 0) return false;
  std::vector<std::vector<int>> shapes;
  const LayerParameter param = ProbeLayer(c, &shapes);
  return LayerRegistry::Global().Create(param, shapes, std::make_shared<Context>(Device::kCPU, 0))->AllowsInPlace();
}

// The largest relative difference of two runs, and where it was.
std::string Compare(const Outputs& expected, const Outputs& actual, float tolerance) {
  if (expected.names != actual.names) return "the runs produced different outputs";
  for (size_t k = 0; k < expected.values.size(); ++k) {
    const std::vector<float>& e = expected.values[k];
    const std::vector<float>& a = actual.values[k];
    if (e.size() != a.size()) return expected.names[k] + ": sizes differ";
    for (size_t i = 0; i < e.size(); ++i) {
      const float allowed = tolerance * std::max(1.f, std::fabs(e[i]));
      if (!(std::fabs(e[i] - a[i]) <= allowed))
        return expected.names[k] + "[" + std::to_string(i) + "]: CPU " + std::to_string(e[i]) + ", GPU " +
               std::to_string(a[i]);
    }
  }
  return "";
}

// Runs everywhere: a GPU engine must come with a case.
TEST(GpuConformanceTest, EveryTypeWithAGpuEngineHasACase) {
  std::set<std::string> covered;
  for (const Case& c : Cases()) covered.insert(TypeOf(c));
  for (const std::string& type : LayerRegistry::Global().Types()) {
    if (LayerRegistry::Global().Engines(type, Device::kGPU).empty() || kNotHere.count(type)) continue;
    EXPECT_TRUE(covered.count(type)) << type << " has a GPU engine but no case in test_gpu_conformance.cpp";
  }
}

// Runs everywhere: every case is a valid layer on the CPU (so a GPU session never meets a broken line).
TEST(GpuConformanceTest, EveryCaseRunsOnTheCpu) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.layer);
    std::string engine;
    const Outputs first = RunCase(c, Device::kCPU, "", &engine);
    const Outputs again = RunCase(c, Device::kCPU, "", &engine);
    EXPECT_EQ(Compare(first, again, 0.f), "");
  }
}

// Runs everywhere: the GPU code of every engine that runs on both devices (its Forward_gpu / Backward_gpu, the
// rules and the context's math), rehearsed on the host (Context::set_gpu_code_on_host), matches the CPU code.
// This checks the logic of GPU code on machines without a GPU; EveryGpuEngineMatchesTheCpu then checks it on one.
TEST(GpuConformanceTest, GpuCodeRehearsedOnTheHostMatchesTheCpu) {
  int failures = 0, runs = 0;
  for (const Case& c : Cases()) {
    const std::string type = TypeOf(c);
    std::string reference_engine;
    const Outputs expected = RunCase(c, Device::kCPU, "", &reference_engine);
    const std::vector<std::string> on_cpu = LayerRegistry::Global().Engines(type, Device::kCPU);
    for (const std::string& engine : LayerRegistry::Global().Engines(type, Device::kGPU)) {
      // GPU-only engines (cuDNN's) need a device.
      if (std::find(on_cpu.begin(), on_cpu.end(), engine) == on_cpu.end()) continue;
      LayerParameter param = test::ParseLayer("name: 'probe' " + c.layer);
      std::vector<std::vector<int>> shapes;
      for (const Bottom& b : c.bottoms) shapes.push_back(b.shape);
      if (!LayerRegistry::Global().Refusal(engine, EngineQuery{param, shapes, Device::kGPU}).empty()) continue;
      for (const bool in_place : {false, true}) {
        if (in_place && !MayRunInPlace(c)) continue;
        std::string engine_run, problem;
        try {
          problem =
              Compare(expected, RunCase(c, Device::kCPU, engine, &engine_run, true, false, in_place), c.tolerance);
        } catch (const Error& error) {
          problem = error.what();
        }
        ++runs;
        if (!problem.empty()) {
          ++failures;
          ADD_FAILURE() << c.layer << ": the GPU code of engine '" << engine << "' on the host"
                        << (in_place ? ", in place" : "") << " (CPU: " << reference_engine << "): " << problem;
        }
      }
    }
  }
  std::printf("  %d rehearsals, %d failed\n", runs, failures);
  EXPECT_GT(runs, 0);
}

// Runs everywhere: what a layer declares its backward does not read (Layer::BackwardReadsBottom / BackwardReadsTop)
// it does not read. Every case, with every engine that runs on the CPU and the GPU code of the two-device engines
// rehearsed on the host, gives the same gradients, bit for bit, when those bottoms and tops hold NaN during
// backward; where the layer allows in place, the same holds run in place for the one blob and
// Layer::BackwardReadsInPlace. (cuDNN's engines need a device; this test cannot check them.)
TEST(GpuConformanceTest, BackwardReadsOnlyWhatItDeclares) {
  int runs = 0, declared = 0, in_place_runs = 0, declared_in_place = 0;
  for (const Case& c : Cases()) {
    if (!c.backward) continue;
    const std::string type = TypeOf(c);
    const std::vector<std::string> on_cpu = LayerRegistry::Global().Engines(type, Device::kCPU);
    const std::vector<std::string> on_gpu = LayerRegistry::Global().Engines(type, Device::kGPU);
    for (const std::string& engine : on_cpu) {
      std::vector<std::vector<int>> shapes;
      const LayerParameter param = ProbeLayer(c, &shapes);
      if (!LayerRegistry::Global().Refusal(engine, EngineQuery{param, shapes, Device::kCPU}).empty()) continue;
      const bool both = std::find(on_gpu.begin(), on_gpu.end(), engine) != on_gpu.end();
      auto layer = LayerRegistry::Global().Create(param, shapes, std::make_shared<Context>(Device::kCPU, 0));
      // Out of place, and in place where the layer allows it (its top 0 the shape of its bottom 0).
      const bool may_run_in_place = MayRunInPlace(c);
      for (const bool in_place : {false, true}) {
        if (in_place && !may_run_in_place) continue;
        for (const bool gpu_code : {false, true}) {
          if (gpu_code && !both) continue;
          std::string engine_run;
          const Outputs kept = RunCase(c, Device::kCPU, engine, &engine_run, gpu_code, false, in_place);
          const Outputs poisoned = RunCase(c, Device::kCPU, engine, &engine_run, gpu_code, true, in_place);
          Outputs kept_gradients, poisoned_gradients;
          for (size_t k = 0; k < kept.names.size(); ++k) {
            if (kept.names[k].find("gradient") == std::string::npos) continue;
            kept_gradients.Add(kept.names[k], kept.values[k]);
            poisoned_gradients.Add(poisoned.names[k], poisoned.values[k]);
          }
          EXPECT_EQ(Compare(kept_gradients, poisoned_gradients, 0.f), "")
              << c.layer << ", engine " << engine << (gpu_code ? " (GPU code on the host)" : "")
              << (in_place ? ", in place" : "") << ": the backward read data it declares it does not read";
          ++runs;
          in_place_runs += in_place;
          declared_in_place += in_place && !layer->BackwardReadsInPlace(0);
        }
      }
      for (size_t b = 0; b < shapes.size(); ++b) declared += !layer->BackwardReadsBottom(static_cast<int>(b));
    }
  }
  std::printf("  %d runs (%d in place); %d bottoms declared unread, %d in-place runs where the blob is unread\n", runs,
              in_place_runs, declared, declared_in_place);
  EXPECT_GT(declared, 0);
  EXPECT_GT(declared_in_place, 0);
}

// Runs everywhere with two or more OpenMP threads (ctest runs it again as threaded.* with every loop and step
// split over four threads): what execution lanes rely on. A step on a lane runs on one thread (inside the lanes'
// parallel region, where nested regions, oneDNN's included, take one); in order it runs on all of them. Every case,
// with every engine on the CPU, gives the same tops bit for bit both ways, and the same gradients too unless its
// layer declares that the thread count changes its backward (Layer::ThreadCountChangesBackward: such steps run
// alone on all the threads).
TEST(GpuConformanceTest, OneThreadGivesAllThreadsResultsWhereDeclared) {
#ifndef _OPENMP
  GTEST_SKIP() << "built without OpenMP: everything runs on one thread";
#else
  if (OpenMpThreadCount() < 2) GTEST_SKIP() << "one OpenMP thread: nothing to compare";
  int runs = 0, declared = 0;
  for (const Case& c : Cases()) {
    const std::string type = TypeOf(c);
    for (const std::string& engine : LayerRegistry::Global().Engines(type, Device::kCPU)) {
      std::vector<std::vector<int>> shapes;
      const LayerParameter param = ProbeLayer(c, &shapes);
      if (!LayerRegistry::Global().Refusal(engine, EngineQuery{param, shapes, Device::kCPU}).empty()) continue;
      // A pass whose results may change with the thread count runs alone on all the threads in a net, never on a
      // lane (where a kernel made for several threads may wait for the others forever).
      Lane lane;
      const ChooseLane choose = [&](const Layer& layer) {
        lane.forward = !layer.ThreadCountChangesPass(/*backward=*/false);
        lane.backward = !layer.ThreadCountChangesPass(/*backward=*/true);
        return lane;
      };
      std::string engine_run;
      const Outputs all = RunCase(c, Device::kCPU, engine, &engine_run);
      Outputs one;
      try {
        one = RunCase(c, Device::kCPU, engine, &engine_run, false, false, false, choose);
      } catch (const std::exception& error) {
        ADD_FAILURE() << c.layer << ", engine " << engine_run << ": on a lane: " << error.what();
        continue;
      }
      ASSERT_EQ(all.names, one.names) << c.layer;
      for (size_t k = 0; k < all.names.size(); ++k) {
        Outputs expected, actual;
        expected.Add(all.names[k], all.values[k]);
        actual.Add(one.names[k], one.values[k]);
        EXPECT_EQ(Compare(expected, actual, 0.f), "")
            << c.layer << ", engine " << engine_run << ": on a lane's one thread differs from in order on "
            << OpenMpThreadCount() << " threads; the layer does not declare it (ThreadCountChangesPass)";
      }
      ++runs;
      declared += !lane.forward || !lane.backward;
    }
  }
  std::printf("  %d runs on %d threads and on a lane; %d declare a pass that runs alone on all the threads\n", runs,
              OpenMpThreadCount(), declared);
  EXPECT_GT(runs, 0);
#endif
}

// One line per case and engine: the outcome, then every failure.
TEST(GpuConformanceTest, EveryGpuEngineMatchesTheCpu) {
  CREMA_SKIP_WITHOUT_GPU();
  int failures = 0, runs = 0;
  for (const Case& c : Cases()) {
    std::string reference_engine;
    const Outputs expected = RunCase(c, Device::kCPU, "", &reference_engine);
    // Each GPU engine forced in turn, then the net's own choice ("": the first that accepts, or the host
    // fallback where none does).
    std::vector<std::string> engines = LayerRegistry::Global().Engines(TypeOf(c), Device::kGPU);
    engines.push_back("");
    // Out of place, and in place where the layer allows it (against the CPU's out-of-place run).
    for (const bool in_place : {false, true}) {
      if (in_place && !MayRunInPlace(c)) continue;
      for (const std::string& engine : engines) {
        std::string engine_run, problem;
        try {
          problem =
              Compare(expected, RunCase(c, Device::kGPU, engine, &engine_run, false, false, in_place), c.tolerance);
        } catch (const Error& error) {
          // A forced engine that refuses this case says so; that is not a failure of the engine.
          const std::string what = error.what();
          if (what.find("cannot run it") != std::string::npos) {
            std::printf("  %-60.60s %-18s refused\n", c.layer.c_str(), engine.c_str());
            continue;
          }
          problem = what;
        }
        ++runs;
        std::printf("  %-60.60s %-18s %s%s\n", c.layer.c_str(), engine_run.c_str(), problem.empty() ? "OK" : "FAIL",
                    in_place ? " (in place)" : "");
        if (!problem.empty()) {
          ++failures;
          ADD_FAILURE() << c.layer << " on engine '" << engine_run << "'" << (in_place ? ", in place" : "")
                        << " (CPU: " << reference_engine << "): " << problem;
        }
      }
    }
  }
  std::printf("  %d runs, %d failed\n", runs, failures);
}

// The numeric gradient check, run on the GPU, for the layers with learned parameters and the loss.
TEST(GpuConformanceTest, GradientsOnTheGpuMatchNumericOnes) {
  CREMA_SKIP_WITHOUT_GPU();
  for (const Case& c : Cases()) {
    const std::string type = TypeOf(c);
    if (type != "Convolution" && type != "InnerProduct" && type != "Deconvolution" && type != "SoftmaxWithLoss" &&
        type != "Pooling")
      continue;
    if (c.layer.find("STOCHASTIC") != std::string::npos) continue;
    SCOPED_TRACE(c.layer);
    auto context = std::make_shared<Context>(Device::kGPU, 0);
    LayerParameter param = test::ParseLayer("name: 'probe' " + c.layer);
    test::BlobList bottom, top;
    std::vector<std::vector<int>> shapes;
    int labels = -1;
    for (size_t b = 0; b < c.bottoms.size(); ++b) {
      shapes.push_back(c.bottoms[b].shape);
      Blob* blob = bottom.Add(c.bottoms[b].shape);
      if (c.bottoms[b].classes > 0) {
        labels = static_cast<int>(b);
        RandomStream random(5);
        for (int i = 0; i < blob->count(); ++i)
          blob->mutable_cpu_data()[i] = static_cast<float>(random.UniformInt(c.bottoms[b].classes));
      } else {
        test::FillGaussian(blob, 0.f, 1.f, 6 + b);
      }
    }
    // A loss layer's second top (SoftmaxWithLoss's probabilities) passes no gradient back, as in Caffe: only the
    // loss is checked.
    const int tops = type == "SoftmaxWithLoss" ? 1 : c.tops;
    for (int t = 0; t < tops; ++t) top.Add({});
    std::unique_ptr<Layer> layer = LayerRegistry::Global().Create(param, shapes, context);
    layer->SetUp(bottom.pointers, top.pointers);
    // Max pooling's argmax is a kink: steps that change it are skipped by the checker's kink rule only for
    // ReLU-like layers, so pooling's check uses small steps.
    test::GradientChecker checker(type == "Pooling" ? 1e-3f : 1e-2f, 2e-3f);
    checker.CheckGradient(layer.get(), bottom.pointers, top.pointers, labels >= 0 ? 0 : -1);
  }
}

}  // namespace
}  // namespace crema
