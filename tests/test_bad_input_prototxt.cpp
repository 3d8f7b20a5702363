// Bad net prototxts, as a user meets them through `crema time` (issue 12): syntax errors with file:line:column,
// unknown fields and types, values out of range, bottoms nobody produces, shapes that do not fit, bad rules. Each
// case is a net of one Input layer (2 x 3 x 8 x 8) and the layers at fault, checked with test::ExpectBadInput,
// which also records the rows of docs/reliability.md.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/proto_io.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

struct BadNet {
  std::string what;    // the bad input, in words (a row of the reliability table)
  std::string layers;  // prototxt text after the Input layer
  std::vector<std::string> parts;
};

const char* const kConv3 =
    "layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv' convolution_param { num_output: 4 "
    "kernel_size: 3 } } ";

std::string Conv(const std::string& param) {
  return "layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv' convolution_param { " + param + " } }";
}

std::string Pool(const std::string& param) {
  return "layer { name: 'pool' type: 'Pooling' bottom: 'data' top: 'pool' pooling_param { " + param + " } }";
}

std::string Dropout(const std::string& ratio) {
  return "layer { name: 'drop' type: 'Dropout' bottom: 'data' top: 'drop' dropout_param { dropout_ratio: " + ratio +
         " } }";
}

TEST(BadInputPrototxtTest, EveryMistakeIsNamedWhereItIs) {
  const std::vector<BadNet> cases = {
      // Syntax: the file, line and column (lines: 1 the name, 2 the Input layer, 3 the layers below).
      {"a syntax error (a '}' missing at the end of the file)",
       "layer { name: 'relu' type: 'ReLU'",
       {"net.prototxt:4:", "Expected identifier, got: the end of the text"}},
      {"a syntax error (a value missing at the end of the file)",
       "layer { name: 'relu' type: 'ReLU' bottom: 'data' top: 'relu' } input:",
       {"net.prototxt:4:", "Expected string, got: the end of the text"}},
      {"a misspelt field name",
       "layer { name: 'conv' type: 'Convolution' convolution_param { kernal_size: 3 } }",
       {"net.prototxt:3:", "no field named \"kernal_size\""}},
      {"a negative value for an unsigned field (kernel_size: -3)",
       "layer { name: 'c' convolution_param { kernel_size: -3 } }",
       {"net.prototxt:3:", "Expected integer"}},
      {"an unknown enum value (phase: TESTING)",
       "layer { name: 'relu' type: 'ReLU' bottom: 'data' top: 'relu' include { phase: TESTING } }",
       {"net.prototxt:3:", "\"TESTING\"", "phase"}},
      {"an unknown layer type (with the known types listed)",
       "layer { name: 'conv' type: 'Convolutoin' bottom: 'data' top: 'conv' }",
       {"layer 'conv'", "unknown type 'Convolutoin'", "known types:", "Convolution,"}},
      // Values out of range: the layer, the field and the value.
      {"Convolution kernel_size 0",
       Conv("num_output: 4 kernel_size: 0"),
       {"layer 'conv' (Convolution)", "kernel_size must be positive, but is 0"}},
      {"Convolution stride 0",
       Conv("num_output: 4 kernel_size: 3 stride: 0"),
       {"layer 'conv' (Convolution)", "stride must be positive, but is 0"}},
      {"Convolution num_output 0",
       Conv("num_output: 0 kernel_size: 3"),
       {"layer 'conv' (Convolution)", "num_output must be given and positive"}},
      {"a Convolution kernel larger than the padded input",
       Conv("num_output: 4 kernel_size: 11 pad: 1"),
       {"layer 'conv' (Convolution)", "kernel_size 11", "padded input", "2 3 8 8", "output would be empty"}},
      {"InnerProduct num_output 0",
       "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip' inner_product_param { num_output: 0 } }",
       {"layer 'ip' (InnerProduct)", "num_output must be given and positive"}},
      {"InnerProduct axis outside the input",
       "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip' inner_product_param { num_output: 2 axis: 5 "
       "} }",
       {"layer 'ip' (InnerProduct)", "inner_product_param.axis 5", "2 3 8 8"}},
      {"Pooling pad not smaller than the kernel",
       Pool("pool: MAX kernel_size: 2 pad: 2"),
       {"layer 'pool' (Pooling)", "pad (2 x 2) must be smaller than kernel_size (2 x 2)"}},
      {"a Pooling kernel larger than the padded input",
       Pool("pool: MAX kernel_size: 12"),
       {"layer 'pool' (Pooling)", "kernel_size 12", "padded input", "output would be empty"}},
      {"Dropout dropout_ratio 1", Dropout("1.0"), {"layer 'drop' (Dropout)", "dropout_ratio is 1", "[0, 1)"}},
      {"Dropout dropout_ratio below 0", Dropout("-0.2"), {"layer 'drop' (Dropout)", "dropout_ratio is -0.2", "[0, 1)"}},
      {"LRN local_size even",
       "layer { name: 'norm' type: 'LRN' bottom: 'data' top: 'norm' lrn_param { local_size: 4 } }",
       {"layer 'norm' (LRN)", "local_size 4 must be odd"}},
      {"Softmax axis outside the input",
       "layer { name: 'prob' type: 'Softmax' bottom: 'data' top: 'prob' softmax_param { axis: -7 } }",
       {"layer 'prob' (Softmax)", "softmax_param.axis -7", "2 3 8 8"}},
      // Wiring and shapes: both layers and shapes named.
      {"a bottom that no layer produces",
       "layer { name: 'relu' type: 'ReLU' bottom: 'nothing' top: 'relu' }",
       {"layer 'relu' (ReLU)", "bottom blob 'nothing'", "no earlier layer produces"}},
      {"a layer given fewer bottoms than it takes",
       "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'data' top: 'loss' }",
       {"layer 'loss' (SoftmaxWithLoss)", "takes 2 bottom blob(s), but 1 are given"}},
      {"Eltwise of blobs of different shapes",
       (std::string(kConv3) + "layer { name: 'sum' type: 'Eltwise' bottom: 'data' bottom: 'conv' top: 'sum' }"),
       // 'data' feeds two layers, so 'sum' reads a copy an added Split makes; the user's name is the one given.
       {"layer 'sum' (Eltwise)", "2 4 6 6", "'data' 2 3 8 8", "'conv' 2 4 6 6", "same shape"}},
      {"Concat of blobs that differ off the concatenation axis",
       (std::string(kConv3) + "layer { name: 'cat' type: 'Concat' bottom: 'data' bottom: 'conv' top: 'cat' }"),
       {"layer 'cat' (Concat)", "'data' 2 3 8 8", "'conv' 2 4 6 6", "concatenation axis 1"}},
      {"a Reshape whose -1 cannot be inferred",
       "layer { name: 'r' type: 'Reshape' bottom: 'data' top: 'r' reshape_param { shape { dim: 5 dim: -1 } } }",
       {"layer 'r' (Reshape)", "cannot infer its -1", "2 3 8 8"}},
      // Rules.
      {"a layer with both include and exclude rules",
       "layer { name: 'relu' type: 'ReLU' bottom: 'data' top: 'relu' include { phase: TEST } exclude { phase: TRAIN } "
       "}",
       {"layer 'relu'", "both include and exclude rules"}},
  };
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.what);
    test::TempDir dir;
    WriteStringToFileAtomically(
        "name: 'Probe'\n"
        "layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }\n" +
            bad.layers + "\n",
        dir.file("net.prototxt"));
    test::ExpectBadInput(
        "prototxt", bad.what,
        test::ToolsDir() + "/crema time --iterations=1 --forward_only --model=" + dir.file("net.prototxt"), bad.parts);
  }
}

}  // namespace
}  // namespace crema
