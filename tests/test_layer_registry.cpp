// Engine lists: for each layer, the first engine of its type that runs on the device and accepts the layer's
// parameters and bottom shapes; a forced engine (per type or by name for every type) or Caffe's `engine` field
// changes the choice; every refusal is explained.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/context.hpp"
#include "layers/layer_registry.hpp"
#include "net/net.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// A stand-in layer for the engines of a private registry: the identity.
class ProbeLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Probe"; }

 protected:
  void ForwardElements(const Blob& bottom, Blob* top) override {
    std::copy(bottom.cpu_data(), bottom.cpu_data() + bottom.count(), top->mutable_cpu_data());
  }
  void BackwardElements(const Blob& top, Blob* bottom) override {
    std::copy(top.cpu_diff(), top.cpu_diff() + top.count(), bottom->mutable_cpu_diff());
  }
};

// Probe's engines, most specialised first: `fast` takes only 4-d input, `device` only runs on the GPU, `cudnn`
// answers to Caffe's CUDNN (on the CPU too, for the test), and `plain` takes anything.
LayerRegistry ProbeRegistry() {
  LayerRegistry registry;
  registry.Add<ProbeLayer>("Probe", {"fast", kCpuOnly, CaffeEngine::kCaffe, [](const EngineQuery& query) {
                                       return query.bottom_shapes[0].size() == 4 ? "" : "needs 4-d input";
                                     }});
  registry.Add<ProbeLayer>("Probe", {"device", kGpuOnly});
  registry.Add<ProbeLayer>("Probe", {"cudnn", kCpuOnly, CaffeEngine::kCudnn});
  registry.Add<ProbeLayer>("Probe", {"plain"});
  return registry;
}

std::string EngineFor(const LayerRegistry& registry, const std::string& layer_text,
                      const std::vector<std::vector<int>>& shapes, const std::string& forced = "") {
  auto context = std::make_shared<Context>();
  if (!forced.empty()) context->ForceEngines(forced);
  return registry.Create(test::ParseLayer(layer_text), shapes, context)->engine();
}

const char kProbe[] = "name: 'p' type: 'Probe'";

TEST(LayerRegistryTest, TheFirstEngineThatRunsAndAcceptsWins) {
  const LayerRegistry registry = ProbeRegistry();
  EXPECT_EQ(registry.Engines("Probe"), (std::vector<std::string>{"fast", "device", "cudnn", "plain"}));
  EXPECT_EQ(EngineFor(registry, kProbe, {{2, 3, 4, 5}}), "fast");
  // 3-d input: `fast` refuses and `device` does not run on the CPU, so `cudnn` (a CPU engine here) is next.
  EXPECT_EQ(EngineFor(registry, kProbe, {{2, 3, 4}}), "cudnn");
}

TEST(LayerRegistryTest, AForcedEngineWinsOrSaysWhyNot) {
  const LayerRegistry registry = ProbeRegistry();
  EXPECT_EQ(EngineFor(registry, kProbe, {{2, 3, 4, 5}}, "Probe:plain"), "plain");
  // A bare name applies to every type that has such an engine, where it accepts; elsewhere the list decides.
  EXPECT_EQ(EngineFor(registry, kProbe, {{2, 3, 4, 5}}, "plain"), "plain");
  EXPECT_EQ(EngineFor(registry, kProbe, {{2, 3, 4, 5}}, "reference"), "fast");
  EXPECT_EQ(EngineFor(registry, kProbe, {{2, 3}}, "fast"), "cudnn");
  // Forced for the type: an engine it lacks, one that refuses the shapes, one for another device.
  test::ExpectErrorContaining(
      [&] {
        EngineFor(registry, kProbe, {{2, 3, 4, 5}}, "Probe:quick");
      },
      {"layer 'p' (Probe)", "engine 'quick' was forced (--engine)",
       "Probe has the engines fast, device, cudnn, plain"});
  test::ExpectErrorContaining(
      [&] {
        EngineFor(registry, kProbe, {{2, 3}}, "Probe:fast");
      },
      {"layer 'p' (Probe)", "forced engine 'fast' cannot run it", "needs 4-d input"});
  test::ExpectErrorContaining(
      [&] {
        EngineFor(registry, kProbe, {{2, 3, 4, 5}}, "Probe:device");
      },
      {"forced engine 'device'", "does not run on the CPU"});
}

TEST(LayerRegistryTest, CaffesEngineFieldNarrowsTheList) {
  LayerRegistry registry = ProbeRegistry();
  // Probe has no parameter message of its own; Convolution's engine field is read through reflection, so a
  // Probe layer carrying a convolution_param stands in for any layer with an `engine` field.
  const std::string caffe = std::string(kProbe) + " convolution_param { engine: CAFFE }";
  const std::string cudnn = std::string(kProbe) + " convolution_param { engine: CUDNN }";
  EXPECT_EQ(EngineFor(registry, caffe, {{2, 3, 4, 5}}), "fast");
  EXPECT_EQ(EngineFor(registry, caffe, {{2, 3}}), "plain");  // the CAFFE engines that accept: not cudnn
  EXPECT_EQ(EngineFor(registry, cudnn, {{2, 3}}), "cudnn");
  // Without a CUDNN engine for the device, CUDNN falls back to the default order (as Caffe's CPU mode does).
  LayerRegistry plain;
  plain.Add<ProbeLayer>("Probe", {"plain"});
  EXPECT_EQ(EngineFor(plain, cudnn, {{2, 3}}), "plain");
  // CAFFE with no CAFFE engine that can run the layer is an error.
  LayerRegistry only_cudnn;
  only_cudnn.Add<ProbeLayer>("Probe", {"cudnn", kCpuOnly, CaffeEngine::kCudnn});
  test::ExpectErrorContaining([&] { EngineFor(only_cudnn, caffe, {{2, 3}}); }, {"layer 'p' (Probe)", "engine: CAFFE"});
}

TEST(LayerRegistryTest, WhenNoEngineCanRunTheLayerEachSaysWhy) {
  LayerRegistry registry;
  registry.Add<ProbeLayer>("Probe", {"fast", kCpuOnly, CaffeEngine::kCaffe, [](const EngineQuery& query) {
                                       return query.bottom_shapes[0].size() == 4 ? "" : "needs 4-d input";
                                     }});
  registry.Add<ProbeLayer>("Probe", {"device", kGpuOnly});
  test::ExpectErrorContaining(
      [&] {
        EngineFor(registry, kProbe, {{2, 3}});
      },
      {"layer 'p' (Probe)", "no engine can run it on the CPU", "fast: needs 4-d input",
       "device: does not run on the CPU"});
  // Unknown types list the known ones; an engine registered twice is refused.
  test::ExpectErrorContaining([&] { EngineFor(registry, "name: 'x' type: 'Nope'", {{2}}); },
                              {"layer 'x' has unknown type 'Nope'", "known types: Probe"});
  test::ExpectErrorContaining([&] { registry.Add<ProbeLayer>("Probe", {"fast"}); }, {"'Probe'", "engine 'fast' twice"});
}

TEST(LayerRegistryTest, MalformedEngineFlagsAreNamed) {
  Context context;
  test::ExpectErrorContaining([&] { context.ForceEngines("Convolution:"); }, {"--engine='Convolution:'"});
  test::ExpectErrorContaining([&] { context.ForceEngines(":im2col"); }, {"--engine=':im2col'"});
  context.ForceEngines("Convolution:reference,Pooling:native");
  EXPECT_EQ(context.forced_engines().at("Convolution"), "reference");
  EXPECT_EQ(context.forced_engines().at("Pooling"), "native");
}

// The built-in lists: Convolution has oneDNN's engine first (in builds with it), then the per-image im2col
// engine, the batched one and the reference last; Pooling has oneDNN's, then the native one. A net's layers
// know their engine, and forcing an engine by its bare name changes only the layers whose type has it.
TEST(LayerRegistryTest, ConvolutionsEnginesInANet) {
  // On the GPU: the CUDA kernels (after cuDNN's engine where built with it).
  EXPECT_EQ(LayerRegistry::Global().Engines("Convolution", Device::kGPU).back(), "native");
  EXPECT_EQ(LayerRegistry::Global().Engines("Pooling", Device::kGPU).back(), "native");
  EXPECT_EQ(LayerRegistry::Global().Engines("Deconvolution", Device::kGPU).back(), "native");
#ifdef CREMA_USE_ONEDNN
  const std::string first = "onednn", pool = "onednn";
  EXPECT_EQ(LayerRegistry::Global().Engines("Convolution", Device::kCPU),
            (std::vector<std::string>{"onednn", "native", "im2col_batched", "reference"}));
  EXPECT_EQ(LayerRegistry::Global().Engines("Pooling", Device::kCPU), (std::vector<std::string>{"onednn", "native"}));
  EXPECT_EQ(LayerRegistry::Global().Engines("Deconvolution", Device::kCPU),
            (std::vector<std::string>{"onednn", "native"}));
#else
  const std::string first = "native", pool = "native";
  EXPECT_EQ(LayerRegistry::Global().Engines("Convolution", Device::kCPU),
            (std::vector<std::string>{"native", "im2col_batched", "reference"}));
  EXPECT_EQ(LayerRegistry::Global().Engines("Pooling", Device::kCPU), (std::vector<std::string>{"native"}));
  EXPECT_EQ(LayerRegistry::Global().Engines("Deconvolution", Device::kCPU), (std::vector<std::string>{"native"}));
#endif
  const std::string text = R"(
    layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 1 dim: 6 dim: 6 } } }
    layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv' convolution_param { num_output: 2 kernel_size: 3 } }
    layer { name: 'caffe' type: 'Convolution' bottom: 'conv' top: 'caffe'
            convolution_param { num_output: 2 kernel_size: 3 engine: CAFFE } }
    layer { name: 'pool' type: 'Pooling' bottom: 'caffe' top: 'pool' pooling_param { kernel_size: 2 } }
  )";
  const auto engines = [&](const std::string& forced) {
    auto context = std::make_shared<Context>();
    if (!forced.empty()) context->ForceEngines(forced);
    Net net(test::ParseNet(text), context);
    std::vector<std::string> names;
    for (const auto& layer : net.layers()) names.push_back(layer->engine());
    return names;
  };
  EXPECT_EQ(engines(""), (std::vector<std::string>{"native", first, first, pool}));
  EXPECT_EQ(engines("im2col_batched"), (std::vector<std::string>{"native", "im2col_batched", "im2col_batched", pool}));
  EXPECT_EQ(engines("reference"), (std::vector<std::string>{"native", "reference", "reference", pool}));
  EXPECT_EQ(engines("Convolution:reference"), (std::vector<std::string>{"native", "reference", "reference", pool}));
  EXPECT_EQ(engines("Convolution:reference,Pooling:native"),
            (std::vector<std::string>{"native", "reference", "reference", "native"}));
}

// oneDNN makes no convolution over a blob with a dimension of 0, which a Slice may leave (as Caffe's does): crema's own
// engines run those layers, and a convolution of no input channels gives its bias. oneDNN refused to
// make such a convolution with an exception of its own, which a fuzzed net turned into "internal error".
TEST(LayerRegistryTest, EmptyBlobsGoToCremasOwnEngines) {
  const std::string text = R"(
    layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 dim: 6 dim: 6 } } }
    layer { name: 'slice' type: 'Slice' bottom: 'data' top: 'all' top: 'none' slice_param { slice_point: 3 } }
    layer { name: 'conv' type: 'Convolution' bottom: 'none' top: 'conv'
            convolution_param { num_output: 2 kernel_size: 3 bias_filler { type: 'constant' value: 0.5 } } }
    layer { name: 'deconv' type: 'Deconvolution' bottom: 'none' top: 'deconv'
            convolution_param { num_output: 2 kernel_size: 2 stride: 2 bias_filler { type: 'constant' value: -1 } } }
    layer { name: 'ip' type: 'InnerProduct' bottom: 'none' top: 'ip'
            inner_product_param { num_output: 3 bias_filler { type: 'constant' value: 2 } } }
    layer { name: 'pool' type: 'Pooling' bottom: 'none' top: 'pool' pooling_param { kernel_size: 2 stride: 2 } }
    layer { name: 'lrn' type: 'LRN' bottom: 'none' top: 'lrn' }
    layer { name: 'bn' type: 'BatchNorm' bottom: 'none' top: 'bn' }
    layer { name: 'sum' type: 'Eltwise' bottom: 'none' bottom: 'bn' top: 'sum' }
    layer { name: 'concat' type: 'Concat' bottom: 'all' bottom: 'none' top: 'concat' }
  )";
  auto context = std::make_shared<Context>();
  Net net(test::ParseNet(text), context);
  for (const auto& layer : net.layers()) EXPECT_NE(layer->engine(), std::string("onednn")) << layer->type();
  net.Forward();
  const auto all_equal = [&](const std::string& blob, float value, int count) {
    const Blob& top = *net.blob_by_name(blob);
    ASSERT_EQ(top.count(), count) << blob;
    for (int i = 0; i < top.count(); ++i) EXPECT_EQ(top.cpu_data()[i], value) << blob << "[" << i << "]";
  };
  all_equal("conv", 0.5f, 2 * 2 * 4 * 4);
  all_equal("deconv", -1.f, 2 * 2 * 12 * 12);
  all_equal("ip", 2.f, 2 * 3);
  all_equal("pool", 0.f, 0);
  all_equal("sum", 0.f, 0);
  EXPECT_EQ(net.blob_by_name("concat")->shape(), (std::vector<int>{2, 3, 6, 6}));
#ifdef CREMA_USE_ONEDNN
  // Forced, oneDNN's engine says why it cannot.
  context->ForceEngines("Convolution:onednn");
  EXPECT_CONTAINS(test::ErrorMessage([&] { Net forced(test::ParseNet(text), context); }),
                  "its primitives take no empty blob, and bottom 0 has shape 2 0 6 6");
#endif
}

}  // namespace
}  // namespace crema
