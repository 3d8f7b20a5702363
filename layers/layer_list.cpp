// The one list of built-in layers and their engines. Adding a layer: include its header and add one line here;
// adding an engine: one more line under its type, in the order engines are tried (most specialised first,
// the reference last). See layers/layer_registry.hpp for how the engine of a layer is chosen.
#include "layers/abs_val.hpp"
#include "layers/accuracy.hpp"
#include "layers/bnll.hpp"
#include "layers/clip.hpp"
#include "layers/convolution.hpp"
#include "layers/data.hpp"
#include "layers/dropout.hpp"
#include "layers/elu.hpp"
#include "layers/exp.hpp"
#include "layers/flatten.hpp"
#include "layers/inner_product.hpp"
#include "layers/input.hpp"
#include "layers/layer_registry.hpp"
#include "layers/log.hpp"
#include "layers/pooling.hpp"
#include "layers/power.hpp"
#include "layers/prelu.hpp"
#include "layers/reference_convolution.hpp"
#include "layers/relu.hpp"
#include "layers/sigmoid.hpp"
#include "layers/softmax.hpp"
#include "layers/softmax_with_loss.hpp"
#include "layers/split.hpp"
#include "layers/swish.hpp"
#include "layers/tanh.hpp"
#include "layers/threshold.hpp"

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
  // Neuron (per-element) layers: rules written once for both devices (PReLU's slope gradient is a host reduction)
  registry->Add<ELULayer>("ELU", {"native", kCpuAndGpu});
  registry->Add<SigmoidLayer>("Sigmoid", {"native", kCpuAndGpu});
  registry->Add<TanHLayer>("TanH", {"native", kCpuAndGpu});
  registry->Add<AbsValLayer>("AbsVal", {"native", kCpuAndGpu});
  registry->Add<BNLLLayer>("BNLL", {"native", kCpuAndGpu});
  registry->Add<PowerLayer>("Power", {"native", kCpuAndGpu});
  registry->Add<ExpLayer>("Exp", {"native", kCpuAndGpu});
  registry->Add<LogLayer>("Log", {"native", kCpuAndGpu});
  registry->Add<ThresholdLayer>("Threshold", {"native", kCpuAndGpu});
  registry->Add<ClipLayer>("Clip", {"native", kCpuAndGpu});
  registry->Add<SwishLayer>("Swish", {"native", kCpuAndGpu});
  registry->Add<PReLULayer>("PReLU", {"native", kCpuOnly});
  // Losses and metrics
  registry->Add<SoftmaxWithLossLayer>("SoftmaxWithLoss", {"native"});
  registry->Add<AccuracyLayer>("Accuracy", {"native"});
}

}  // namespace crema
