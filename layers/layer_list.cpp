// The one list of built-in layers. Adding a layer: include its header and add one line here.
#include "layers/accuracy.hpp"
#include "layers/convolution.hpp"
#include "layers/data.hpp"
#include "layers/dropout.hpp"
#include "layers/flatten.hpp"
#include "layers/inner_product.hpp"
#include "layers/input.hpp"
#include "layers/layer_registry.hpp"
#include "layers/pooling.hpp"
#include "layers/relu.hpp"
#include "layers/softmax.hpp"
#include "layers/softmax_with_loss.hpp"
#include "layers/split.hpp"

namespace crema {

void RegisterBuiltinLayers(LayerRegistry* registry) {
  // Data
  registry->Add<DataLayer>("Data");
  registry->Add<InputLayer>("Input");
  // Vision
  registry->Add<ConvolutionLayer>("Convolution");
  registry->Add<PoolingLayer>("Pooling");
  // Common
  registry->Add<InnerProductLayer>("InnerProduct");
  registry->Add<DropoutLayer>("Dropout");
  registry->Add<FlattenLayer>("Flatten");
  registry->Add<SplitLayer>("Split");
  // Activations and normalisation
  registry->Add<ReLULayer>("ReLU");
  registry->Add<SoftmaxLayer>("Softmax");
  // Losses and metrics
  registry->Add<SoftmaxWithLossLayer>("SoftmaxWithLoss");
  registry->Add<AccuracyLayer>("Accuracy");
}

}  // namespace crema
