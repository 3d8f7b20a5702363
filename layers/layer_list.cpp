// The one list of built-in layers and their engines. Adding a layer: include its header and add one line here;
// adding an engine: one more line under its type, in the order engines are tried (most specialised first,
// the reference last). See layers/layer_registry.hpp for how the engine of a layer is chosen.
#include "layers/common/argmax.hpp"
#include "layers/common/batch_reindex.hpp"
#include "layers/common/concat.hpp"
#include "layers/common/cudnn_softmax.hpp"
#include "layers/common/eltwise.hpp"
#include "layers/common/embed.hpp"
#include "layers/common/expression.hpp"
#include "layers/common/filter.hpp"
#include "layers/common/flatten.hpp"
#include "layers/common/inner_product.hpp"
#include "layers/common/onednn_concat.hpp"
#include "layers/common/onednn_eltwise.hpp"
#include "layers/common/onednn_inner_product.hpp"
#include "layers/common/parameter.hpp"
#include "layers/common/reduction.hpp"
#include "layers/common/reshape.hpp"
#include "layers/common/silence.hpp"
#include "layers/common/slice.hpp"
#include "layers/common/softmax.hpp"
#include "layers/common/split.hpp"
#include "layers/common/tile.hpp"
#include "layers/data/data.hpp"
#include "layers/data/dummy_data.hpp"
#include "layers/data/hdf5_data.hpp"
#include "layers/data/hdf5_output.hpp"
#include "layers/data/image_data.hpp"
#include "layers/data/input.hpp"
#include "layers/data/memory_data.hpp"
#include "layers/data/window_data.hpp"
#include "layers/layer_registry.hpp"
#include "layers/loss/accuracy.hpp"
#include "layers/loss/contrastive_loss.hpp"
#include "layers/loss/euclidean_loss.hpp"
#include "layers/loss/hinge_loss.hpp"
#include "layers/loss/infogain_loss.hpp"
#include "layers/loss/multinomial_logistic_loss.hpp"
#include "layers/loss/sigmoid_cross_entropy_loss.hpp"
#include "layers/loss/softmax_with_loss.hpp"
#include "layers/neuron/abs_val.hpp"
#include "layers/neuron/bias.hpp"
#include "layers/neuron/bnll.hpp"
#include "layers/neuron/clip.hpp"
#include "layers/neuron/cudnn_activation.hpp"
#include "layers/neuron/cudnn_relu.hpp"
#include "layers/neuron/dropout.hpp"
#include "layers/neuron/elu.hpp"
#include "layers/neuron/exp.hpp"
#include "layers/neuron/log.hpp"
#include "layers/neuron/power.hpp"
#include "layers/neuron/prelu.hpp"
#include "layers/neuron/relu.hpp"
#include "layers/neuron/scale.hpp"
#include "layers/neuron/sigmoid.hpp"
#include "layers/neuron/swish.hpp"
#include "layers/neuron/tanh.hpp"
#include "layers/neuron/threshold.hpp"
#include "layers/normalization/batch_norm.hpp"
#include "layers/normalization/cudnn_batch_norm.hpp"
#include "layers/normalization/cudnn_lrn.hpp"
#include "layers/normalization/lrn.hpp"
#include "layers/normalization/mvn.hpp"
#include "layers/normalization/onednn_batch_norm.hpp"
#include "layers/normalization/onednn_lrn.hpp"
#include "layers/python/python.hpp"
#include "layers/recurrent/lstm.hpp"
#include "layers/recurrent/lstm_unit.hpp"
#include "layers/recurrent/rnn.hpp"
#include "layers/vision/batched_convolution.hpp"
#include "layers/vision/convolution.hpp"
#include "layers/vision/crop.hpp"
#include "layers/vision/cudnn_convolution.hpp"
#include "layers/vision/cudnn_pooling.hpp"
#include "layers/vision/deconvolution.hpp"
#include "layers/vision/im2col.hpp"
#include "layers/vision/onednn_convolution.hpp"
#include "layers/vision/onednn_pooling.hpp"
#include "layers/vision/pooling.hpp"
#include "layers/vision/reference_convolution.hpp"
#include "layers/vision/spp.hpp"

namespace crema {

void RegisterBuiltinLayers(LayerRegistry* registry) {
  // Data (batches are assembled on the host; a GPU net's next layer copies them over)
  registry->Add<DataLayer>("Data", {"native", kCpuAndGpu});
  registry->Add<InputLayer>("Input", {"native", kCpuAndGpu});
  registry->Add<DummyDataLayer>("DummyData", {"native", kCpuAndGpu});
  registry->Add<MemoryDataLayer>("MemoryData", {"native", kCpuAndGpu});
  registry->Add<HDF5DataLayer>("HDF5Data", {"native", kCpuAndGpu});
  registry->Add<HDF5OutputLayer>("HDF5Output", {"native", kCpuAndGpu});
  registry->Add<ImageDataLayer>("ImageData", {"native", kCpuAndGpu});
  registry->Add<WindowDataLayer>("WindowData", {"native", kCpuAndGpu});
  // Vision: convolutions, pooling, patches, cropping
#ifdef CREMA_USE_CUDNN
  registry->Add<CudnnConvolutionLayer>("Convolution",
                                       {"cudnn", kGpuOnly, CaffeEngine::kCudnn, CudnnConvolutionLayer::Refusal});
#endif
#ifdef CREMA_USE_ONEDNN
  registry->Add<OneDnnConvolutionLayer>("Convolution",
                                        {"onednn", kCpuOnly, CaffeEngine::kCaffe, OneDnnConvolutionLayer::Refusal});
#endif
  registry->Add<ConvolutionLayer>("Convolution", {"native", kCpuAndGpu});
  registry->Add<BatchedConvolutionLayer>("Convolution", {"im2col_batched"});
  registry->Add<ReferenceConvolutionLayer>("Convolution", {"reference"});
#ifdef CREMA_USE_CUDNN
  registry->Add<CudnnDeconvolutionLayer>("Deconvolution",
                                         {"cudnn", kGpuOnly, CaffeEngine::kCudnn, CudnnConvolutionLayer::Refusal});
#endif
#ifdef CREMA_USE_ONEDNN
  registry->Add<OneDnnDeconvolutionLayer>("Deconvolution",
                                          {"onednn", kCpuOnly, CaffeEngine::kCaffe, OneDnnConvolutionLayer::Refusal});
#endif
  registry->Add<DeconvolutionLayer>("Deconvolution", {"native", kCpuAndGpu});
#ifdef CREMA_USE_CUDNN
  registry->Add<CudnnPoolingLayer>("Pooling", {"cudnn", kGpuOnly, CaffeEngine::kCudnn, CudnnPoolingLayer::Refusal});
#endif
#ifdef CREMA_USE_ONEDNN
  registry->Add<OneDnnPoolingLayer>("Pooling", {"onednn", kCpuOnly, CaffeEngine::kCaffe, OneDnnPoolingLayer::Refusal});
#endif
  registry->Add<PoolingLayer>("Pooling", {"native", kCpuAndGpu});
  registry->Add<Im2colLayer>("Im2col", {"native", kCpuAndGpu});
  registry->Add<SPPLayer>("SPP", {"native", kCpuAndGpu});
  registry->Add<CropLayer>("Crop", {"native", kCpuAndGpu});
  // Normalization
#ifdef CREMA_USE_CUDNN
  registry->Add<CudnnLRNLayer>("LRN", {"cudnn", kGpuOnly, CaffeEngine::kCudnn, CudnnLRNLayer::Refusal});
#endif
#ifdef CREMA_USE_ONEDNN
  registry->Add<OneDnnLRNLayer>("LRN", {"onednn", kCpuOnly, CaffeEngine::kCaffe, OneDnnLRNLayer::Refusal});
#endif
  registry->Add<LRNLayer>("LRN", {"native", kCpuAndGpu});
#ifdef CREMA_USE_CUDNN
  registry->Add<CudnnBatchNormLayer>("BatchNorm",
                                     {"cudnn", kGpuOnly, CaffeEngine::kCudnn, CudnnBatchNormLayer::Refusal});
#endif
#ifdef CREMA_USE_ONEDNN
  registry->Add<OneDnnBatchNormLayer>("BatchNorm",
                                      {"onednn", kCpuOnly, CaffeEngine::kCaffe, OneDnnBatchNormLayer::Refusal});
#endif
  registry->Add<BatchNormLayer>("BatchNorm", {"native", kCpuAndGpu});
  registry->Add<MVNLayer>("MVN", {"native", kCpuAndGpu});
  // Neuron (per-element) layers: rules written once for both devices; Scale and Bias broadcast a learned blob
#ifdef CREMA_USE_CUDNN
  registry->Add<CudnnReLULayer>("ReLU", {"cudnn", kGpuOnly, CaffeEngine::kCudnn, CudnnReLULayer::Refusal});
#endif
  registry->Add<ReLULayer>("ReLU", {"native", kCpuAndGpu});
  registry->Add<PReLULayer>("PReLU", {"native", kCpuAndGpu});
  registry->Add<ELULayer>("ELU", {"native", kCpuAndGpu});
#ifdef CREMA_USE_CUDNN
  registry->Add<CudnnSigmoidLayer>("Sigmoid", {"cudnn", kGpuOnly, CaffeEngine::kCudnn});
#endif
  registry->Add<SigmoidLayer>("Sigmoid", {"native", kCpuAndGpu});
#ifdef CREMA_USE_CUDNN
  registry->Add<CudnnTanHLayer>("TanH", {"cudnn", kGpuOnly, CaffeEngine::kCudnn});
#endif
  registry->Add<TanHLayer>("TanH", {"native", kCpuAndGpu});
  registry->Add<AbsValLayer>("AbsVal", {"native", kCpuAndGpu});
  registry->Add<BNLLLayer>("BNLL", {"native", kCpuAndGpu});
  registry->Add<PowerLayer>("Power", {"native", kCpuAndGpu});
  registry->Add<ExpLayer>("Exp", {"native", kCpuAndGpu});
  registry->Add<LogLayer>("Log", {"native", kCpuAndGpu});
  registry->Add<ThresholdLayer>("Threshold", {"native", kCpuAndGpu});
  registry->Add<ClipLayer>("Clip", {"native", kCpuAndGpu});
  registry->Add<SwishLayer>("Swish", {"native", kCpuAndGpu});
  registry->Add<DropoutLayer>("Dropout", {"native", kCpuAndGpu});
  registry->Add<ScaleLayer>("Scale", {"native", kCpuAndGpu});
  registry->Add<BiasLayer>("Bias", {"native", kCpuAndGpu});
  // Common: products, joining, cutting, combining and reshaping blobs, softmax
#ifdef CREMA_USE_ONEDNN
  registry->Add<OneDnnInnerProductLayer>("InnerProduct", {"onednn", kCpuOnly, CaffeEngine::kCaffe});
#endif
  registry->Add<InnerProductLayer>("InnerProduct", {"native", kCpuAndGpu});
  registry->Add<FlattenLayer>("Flatten", {"native", kCpuAndGpu});
  registry->Add<ReshapeLayer>("Reshape", {"native", kCpuAndGpu});
  registry->Add<SplitLayer>("Split", {"native", kCpuAndGpu});
#ifdef CREMA_USE_ONEDNN
  registry->Add<OneDnnConcatLayer>("Concat", {"onednn", kCpuOnly, CaffeEngine::kCaffe, OneDnnConcatLayer::Refusal});
#endif
  registry->Add<ConcatLayer>("Concat", {"native", kCpuAndGpu});
  registry->Add<SliceLayer>("Slice", {"native", kCpuAndGpu});
#ifdef CREMA_USE_ONEDNN
  registry->Add<OneDnnEltwiseLayer>("Eltwise", {"onednn", kCpuOnly, CaffeEngine::kCaffe, OneDnnEltwiseLayer::Refusal});
#endif
  registry->Add<EltwiseLayer>("Eltwise", {"native", kCpuAndGpu});
  registry->Add<TileLayer>("Tile", {"native", kCpuAndGpu});
  registry->Add<SilenceLayer>("Silence", {"native", kCpuAndGpu});
  registry->Add<ReductionLayer>("Reduction", {"native", kCpuAndGpu});
  registry->Add<ExpressionLayer>("Expression", {"native", kCpuAndGpu});
  registry->Add<ArgMaxLayer>("ArgMax", {"native", kCpuAndGpu});
  registry->Add<BatchReindexLayer>("BatchReindex", {"native", kCpuAndGpu});
  registry->Add<FilterLayer>("Filter", {"native", kCpuAndGpu});
  registry->Add<EmbedLayer>("Embed", {"native", kCpuAndGpu});
  registry->Add<ParameterLayer>("Parameter", {"native", kCpuAndGpu});
#ifdef CREMA_USE_CUDNN
  registry->Add<CudnnSoftmaxLayer>("Softmax", {"cudnn", kGpuOnly, CaffeEngine::kCudnn, CudnnSoftmaxLayer::Refusal});
#endif
  registry->Add<SoftmaxLayer>("Softmax", {"native", kCpuAndGpu});
  // Recurrent: loops over time, each step's work on the device (Caffe unrolls them into a net; the learned blobs are
  // the same)
  registry->Add<RNNLayer>("RNN", {"native", kCpuAndGpu});
  registry->Add<LSTMLayer>("LSTM", {"native", kCpuAndGpu});
  registry->Add<LSTMUnitLayer>("LSTMUnit", {"native", kCpuAndGpu});
  // Losses and metrics
  registry->Add<SoftmaxWithLossLayer>("SoftmaxWithLoss", {"native", kCpuAndGpu});
  registry->Add<EuclideanLossLayer>("EuclideanLoss", {"native", kCpuAndGpu});
  registry->Add<SigmoidCrossEntropyLossLayer>("SigmoidCrossEntropyLoss", {"native", kCpuAndGpu});
  registry->Add<HingeLossLayer>("HingeLoss", {"native", kCpuAndGpu});
  registry->Add<MultinomialLogisticLossLayer>("MultinomialLogisticLoss", {"native", kCpuAndGpu});
  registry->Add<InfogainLossLayer>("InfogainLoss", {"native", kCpuAndGpu});
  registry->Add<ContrastiveLossLayer>("ContrastiveLoss", {"native", kCpuAndGpu});
  registry->Add<AccuracyLayer>("Accuracy", {"native", kCpuAndGpu});
  // Layers written in Python: run by the backend the Python module installs (python/src/python_layer.cpp), in the
  // crema tool through its embedded interpreter
  registry->Add<PythonLayer>("Python", {"native", kCpuAndGpu});
}

}  // namespace crema
