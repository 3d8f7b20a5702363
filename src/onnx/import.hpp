// ONNX import (crema import): a model's graph of standard operators mapped onto crema's layers, as an ordinary net
// definition and a .caffemodel of its weights that crema test, time and train --weights (fine-tuning) read.
//
// Mapped: Conv, ConvTranspose, Gemm, MatMul with a constant matrix, Relu, LeakyRelu, PRelu, Sigmoid, Tanh, Elu,
// Softplus, Abs, Exp, Log, Clip, Pow with one constant exponent, MaxPool, AveragePool, GlobalAveragePool,
// GlobalMaxPool, BatchNormalization (a BatchNorm and a Scale), Add, Sum, Mul (two values: an Eltwise; a constant: a
// Scale or Bias broadcast as Caffe broadcasts, or a Power), Max, Concat, Split (a Slice), Softmax, Flatten, Reshape to
// a constant shape, Transpose where it moves only axes of one element, Dropout and Identity (the value itself), LRN,
// Constant, and Pad with zeros folded into the convolution or the average pooling that reads it. Anything else is an
// error naming the node and its operator, and the shapes are checked as the net is built (a pooling whose padding Caffe
// cannot say: its message names the node).
#pragma once

#include <string>

#include "core/common.hpp"
#include "proto/onnx.pb.h"

namespace crema {

struct ImportedNet {
  NetParameter definition;  // layers without their blobs (a prototxt)
  NetParameter weights;     // the same layers with them (a .caffemodel)
};

// The net of `model`. `origin` names the model in errors (its file).
ImportedNet ImportOnnx(const onnx::ModelProto& model, const std::string& origin = "the ONNX model");

// Reads an ONNX file; a file that is not one is an Error naming it.
ImportedNet ImportOnnxFile(const std::string& path);

}  // namespace crema
