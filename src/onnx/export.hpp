// ONNX export (crema export, Net.to_onnx): a built net, its layers in the order its steps run, written as an ONNX
// model (proto/onnx.proto) of standard operators at opset 13, its parameters as initializers, with Caffe's exact
// semantics: a pooling's rounding up and its averages' divisors (explicit end padding, and a Pad node where Caffe
// counts padding ONNX would not), LRN's formula, Softmax's axis, Flatten and Reshape to the shapes the net gives,
// InnerProduct as Flatten + Gemm, BatchNorm's statistics divided by its moving-average factor, Scale and Bias
// broadcast as Caffe broadcasts them, PReLU's channels, Deconvolution as ConvTranspose with its groups.
//
// A blob written in place by several layers (conv1 -> BatchNorm -> Scale -> ReLU) is a value per writer in ONNX,
// the last keeping the blob's name, so the model's outputs and every blob's final value are named as in the
// prototxt. Split and Dropout steps are the values they copy. A layer type ONNX cannot express (or that the exporter
// does not write yet) is an Error naming the layer and its type; docs/compatibility.md lists them.
#pragma once

#include <string>

#include "net/net.hpp"
#include "proto/onnx.pb.h"

namespace crema {

struct OnnxExportOptions {
  int opset = 13;              // 13 and later: the operators' forms written are those of opset 13
  bool dynamic_batch = false;  // the inputs' and outputs' first dimension a named size ("batch")
};

// The model of `net` (its phase's steps, its parameters as they are now). A net the inference rewrites folded is
// written as crema fold writes it: its convolutions with the BatchNorms and Scales folded in, the activations after.
crema::onnx::ModelProto ExportOnnx(const Net& net, const OnnxExportOptions& options = {});

// Writes ExportOnnx's model to `path` (atomically: a complete file or none).
void WriteOnnx(const Net& net, const std::string& path, const OnnxExportOptions& options = {});

}  // namespace crema
