// The one list of built-in layers and their engines. Adding a layer: include its header and add one line here;
// adding an engine: one more line under its type, in the order engines are tried (most specialised first,
// the reference last). See layers/layer_registry.hpp for how the engine of a layer is chosen.
#include "layers/accuracy.hpp"
#include "layers/batch_norm.hpp"
#include "layers/bias.hpp"
#include "layers/convolution.hpp"
#include "layers/crop.hpp"
#include "layers/data.hpp"
#include "layers/dropout.hpp"
#include "layers/flatten.hpp"
#include "layers/inner_product.hpp"
#include "layers/input.hpp"
#include "layers/layer_registry.hpp"
#include "layers/lrn.hpp"
#include "layers/pooling.hpp"
#include "layers/reference_convolution.hpp"
#include "layers/relu.hpp"
#include "layers/scale.hpp"
#include "layers/softmax.hpp"
#include "layers/softmax_with_loss.hpp"
#include "layers/split.hpp"

namespace crema {

void RegisterBuiltinLayers(LayerRegistry* registry) {
  // Data (batches are assembled on the host; a GPU net's next layer copies them over)
  registry->Add<DataLayer>("Data", {"native", kCpuAndGpu});
  registry->Add<InputLayer>("Input", {"native", kCpuAndGpu});
  // Vision
  registry->Add<ConvolutionLayer>("Convolution", {"im2col"});
  registry->Add<ReferenceConvolutionLayer>("Convolution", {"reference"});
  registry->Add<PoolingLayer>("Pooling", {"native"});
  // Common
  registry->Add<InnerProductLayer>("InnerProduct", {"native"});
  registry->Add<DropoutLayer>("Dropout", {"native", kCpuAndGpu});
  registry->Add<FlattenLayer>("Flatten", {"native", kCpuAndGpu});
  registry->Add<SplitLayer>("Split", {"native"});
  // Activations and normalisation
  registry->Add<ReLULayer>("ReLU", {"native", kCpuAndGpu});
  registry->Add<SoftmaxLayer>("Softmax", {"native"});
  // Losses and metrics
  registry->Add<SoftmaxWithLossLayer>("SoftmaxWithLoss", {"native"});
  registry->Add<AccuracyLayer>("Accuracy", {"native"});
  // Vision layers for model-zoo nets: normalisation, per-channel affine, LRN, crop (CPU only)
  registry->Add<BatchNormLayer>("BatchNorm", {"native"});
  registry->Add<ScaleLayer>("Scale", {"native"});
  registry->Add<BiasLayer>("Bias", {"native"});
  registry->Add<LRNLayer>("LRN", {"native"});
  registry->Add<CropLayer>("Crop", {"native"});
}

}  // namespace crema
