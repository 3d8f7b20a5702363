// The one list of built-in layers and their engines. Adding a layer: include its header and add one line here;
// adding an engine: one more line under its type, in the order engines are tried (most specialised first,
// the reference last). See layers/layer_registry.hpp for how the engine of a layer is chosen.
#include "layers/accuracy.hpp"
#include "layers/argmax.hpp"
#include "layers/concat.hpp"
#include "layers/convolution.hpp"
#include "layers/data.hpp"
#include "layers/dropout.hpp"
#include "layers/eltwise.hpp"
#include "layers/flatten.hpp"
#include "layers/inner_product.hpp"
#include "layers/input.hpp"
#include "layers/layer_registry.hpp"
#include "layers/pooling.hpp"
#include "layers/reduction.hpp"
#include "layers/reference_convolution.hpp"
#include "layers/relu.hpp"
#include "layers/reshape.hpp"
#include "layers/silence.hpp"
#include "layers/slice.hpp"
#include "layers/softmax.hpp"
#include "layers/softmax_with_loss.hpp"
#include "layers/split.hpp"
#include "layers/tile.hpp"

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
  // Common: joining, cutting, combining and reshaping blobs (CPU only)
  registry->Add<ConcatLayer>("Concat", {"native"});
  registry->Add<SliceLayer>("Slice", {"native"});
  registry->Add<EltwiseLayer>("Eltwise", {"native"});
  registry->Add<ReshapeLayer>("Reshape", {"native"});
  registry->Add<TileLayer>("Tile", {"native"});
  registry->Add<SilenceLayer>("Silence", {"native"});
  registry->Add<ReductionLayer>("Reduction", {"native"});
  registry->Add<ArgMaxLayer>("ArgMax", {"native"});
  // Activations and normalisation
  registry->Add<ReLULayer>("ReLU", {"native", kCpuAndGpu});
  registry->Add<SoftmaxLayer>("Softmax", {"native"});
  // Losses and metrics
  registry->Add<SoftmaxWithLossLayer>("SoftmaxWithLoss", {"native"});
  registry->Add<AccuracyLayer>("Accuracy", {"native"});
}

}  // namespace crema
