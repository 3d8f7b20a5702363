// The one list of built-in layers and their engines. Adding a layer: include its header and add one line here;
// adding an engine: one more line under its type, in the order engines are tried (most specialised first,
// the reference last). See layers/layer_registry.hpp for how the engine of a layer is chosen.
#include "layers/accuracy.hpp"
#include "layers/batch_reindex.hpp"
#include "layers/contrastive_loss.hpp"
#include "layers/convolution.hpp"
#include "layers/data.hpp"
#include "layers/deconvolution.hpp"
#include "layers/dropout.hpp"
#include "layers/dummy_data.hpp"
#include "layers/embed.hpp"
#include "layers/euclidean_loss.hpp"
#include "layers/flatten.hpp"
#include "layers/hinge_loss.hpp"
#include "layers/im2col.hpp"
#include "layers/infogain_loss.hpp"
#include "layers/inner_product.hpp"
#include "layers/input.hpp"
#include "layers/layer_registry.hpp"
#include "layers/multinomial_logistic_loss.hpp"
#include "layers/mvn.hpp"
#include "layers/parameter.hpp"
#include "layers/pooling.hpp"
#include "layers/python.hpp"
#include "layers/reference_convolution.hpp"
#include "layers/relu.hpp"
#include "layers/sigmoid_cross_entropy_loss.hpp"
#include "layers/softmax.hpp"
#include "layers/softmax_with_loss.hpp"
#include "layers/split.hpp"

namespace crema {

void RegisterBuiltinLayers(LayerRegistry* registry) {
  // Data (batches are assembled on the host; a GPU net's next layer copies them over)
  registry->Add<DataLayer>("Data", {"native", kCpuAndGpu});
  registry->Add<InputLayer>("Input", {"native", kCpuAndGpu});
  registry->Add<DummyDataLayer>("DummyData", {"native"});
  // Vision
  registry->Add<ConvolutionLayer>("Convolution", {"im2col"});
  registry->Add<ReferenceConvolutionLayer>("Convolution", {"reference"});
  registry->Add<DeconvolutionLayer>("Deconvolution", {"im2col"});
  registry->Add<PoolingLayer>("Pooling", {"native"});
  registry->Add<Im2colLayer>("Im2col", {"native"});
  // Common
  registry->Add<InnerProductLayer>("InnerProduct", {"native"});
  registry->Add<DropoutLayer>("Dropout", {"native", kCpuAndGpu});
  registry->Add<FlattenLayer>("Flatten", {"native", kCpuAndGpu});
  registry->Add<SplitLayer>("Split", {"native"});
  registry->Add<BatchReindexLayer>("BatchReindex", {"native"});
  registry->Add<EmbedLayer>("Embed", {"native"});
  registry->Add<MVNLayer>("MVN", {"native"});
  registry->Add<ParameterLayer>("Parameter", {"native"});
  // Activations and normalisation
  registry->Add<ReLULayer>("ReLU", {"native", kCpuAndGpu});
  registry->Add<SoftmaxLayer>("Softmax", {"native"});
  // Losses and metrics
  registry->Add<SoftmaxWithLossLayer>("SoftmaxWithLoss", {"native"});
  registry->Add<AccuracyLayer>("Accuracy", {"native"});
  // Layers written in Python: known, but they need the Python bindings (a later step).
  registry->Add<PythonLayer>("Python", {"native", kCpuAndGpu});
  // More losses (CPU only): regression, binary and one-versus-all classification, given probabilities, weighted
  // by an infogain matrix, siamese pairs
  registry->Add<EuclideanLossLayer>("EuclideanLoss", {"native"});
  registry->Add<SigmoidCrossEntropyLossLayer>("SigmoidCrossEntropyLoss", {"native"});
  registry->Add<HingeLossLayer>("HingeLoss", {"native"});
  registry->Add<MultinomialLogisticLossLayer>("MultinomialLogisticLoss", {"native"});
  registry->Add<InfogainLossLayer>("InfogainLoss", {"native"});
  registry->Add<ContrastiveLossLayer>("ContrastiveLoss", {"native"});
}

}  // namespace crema
