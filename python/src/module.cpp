// crema._crema, the extension behind `import crema` (docs/python.md): the module's device and seed, crema.Error,
// and the Blob, Net and Solver classes (blob.cpp, net.cpp, solver.cpp).
#include <glog/logging.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "core/half_products.hpp"
#include "layers/layer_registry.hpp"
#ifdef CREMA_USE_ONEDNN
#include "layers/onednn_util.hpp"
#endif

namespace crema {
namespace python {

Defaults& ModuleDefaults() {
  static Defaults defaults;
  return defaults;
}

std::shared_ptr<Context> MakeContext(uint64_t random_seed) {
  const Defaults& defaults = ModuleDefaults();
  if (defaults.device == Device::kGPU) {
    // Said in Python's terms here; Context's own checks speak of the command line's flags.
    CREMA_CHECK(Context::built_with_cuda())
        << "crema.set_mode_gpu() was called, but this crema was built without CUDA; use crema.set_mode_cpu()";
    const int count = Context::gpu_count();
    CREMA_CHECK(count > 0) << "crema.set_mode_gpu() was called, but no CUDA device is visible on this machine; use "
                              "crema.set_mode_cpu()";
    CREMA_CHECK(defaults.gpu_id < count) << "crema.set_device(" << defaults.gpu_id << "): this machine has " << count
                                         << " CUDA device(s)";
  }
  auto context = std::make_shared<Context>(defaults.device, defaults.gpu_id, random_seed);
  context->set_plan_memory(defaults.plan_memory);
  context->set_recompute(defaults.recompute);
  context->set_fold(defaults.fold);
  if (defaults.precision_set) context->set_precision(defaults.precision);
  return context;
}

namespace {

void StartLogging() {
  if (google::IsGoogleLoggingInitialized()) return;  // another module of this process did
  FLAGS_logtostderr = true;
  FLAGS_colorlogtostderr = false;
  google::InitGoogleLogging("crema");
}

}  // namespace

}  // namespace python
}  // namespace crema

PYBIND11_MODULE(_crema, module) {
  namespace py = pybind11;
  using crema::python::ModuleDefaults;
  module.doc() = "crema's C++ core: nets, blobs as numpy arrays, solvers (import crema, not crema._crema)";
  crema::python::StartLogging();
  // Every problem crema reports (a prototxt, a file, a shape) is a crema.Error, a RuntimeError with its message.
  py::register_exception<crema::Error>(module, "Error", PyExc_RuntimeError);

  module.attr("TRAIN") = static_cast<int>(crema::TRAIN);
  module.attr("TEST") = static_cast<int>(crema::TEST);

  module.def(
      "set_mode_cpu", [] { ModuleDefaults().device = crema::Device::kCPU; },
      "Nets and solvers made from now on run on the CPU.");
  module.def(
      "set_mode_gpu", [] { ModuleDefaults().device = crema::Device::kGPU; },
      "Nets and solvers made from now on run on the GPU crema.set_device chose (default 0); making one raises "
      "crema.Error where there is none.");
  module.def(
      "set_device",
      [](int gpu_id) {
        CREMA_CHECK(gpu_id >= 0) << "crema.set_device(" << gpu_id << "): a GPU id is not negative";
        ModuleDefaults().gpu_id = gpu_id;
      },
      py::arg("gpu_id"), "The GPU that nets and solvers made in GPU mode run on.");
  module.def(
      "set_random_seed",
      [](long long seed) {
        CREMA_CHECK(seed >= 0) << "crema.set_random_seed(" << seed << "): the seed is not negative";
        ModuleDefaults().random_seed = static_cast<uint64_t>(seed);
      },
      py::arg("seed"),
      "The seed of the random streams (fillers, dropout) of nets made from now on (a solver uses its own "
      "random_seed).");
  module.def(
      "set_memory_plan",
      [](const std::string& plan) {
        CREMA_CHECK(plan == "share" || plan == "none" || plan == "recompute")
            << "crema.set_memory_plan('" << plan << "'): use 'share', 'recompute' or 'none'";
        ModuleDefaults().plan_memory = plan != "none";
        ModuleDefaults().recompute = plan == "recompute";
      },
      py::arg("plan"),
      "'share': nets and solvers made from now on plan their memory as crema's tools do (buffers whose lifetimes do "
      "not overlap share memory), so that after a forward pass only the inputs, the outputs and the blobs "
      "Net.keep_blobs names hold their values, and forward and backward run whole; 'recompute': as 'share', and "
      "training keeps only segment boundaries from forward to backward, computing the rest again in backward; "
      "'none' (the default): every blob keeps its memory, as in Caffe.");
  module.def(
      "set_fold", [](bool on) { ModuleDefaults().fold = on; }, py::arg("on"),
      "Whether nets made from now on with weights, when they run forward only (a deploy net, or a TEST net without a "
      "loss), rewrite themselves for inference as crema's tools do: BatchNorm, Scale and Bias folded into the "
      "convolution or inner product before them, the activation after one fused into it, Dropout and Split steps "
      "dropped. Only where no blob a user may read changes: without a memory plan (the default) every blob stays "
      "readable, so only chains in place fold. Net.params stay the weights as loaded; edits to them are folded again "
      "before the next forward. True by default; net.rewrites lists what was done.");
  module.def(
      "set_precision",
      [](const std::string& precision) {
        ModuleDefaults().precision_set = !precision.empty();
        if (!precision.empty()) ModuleDefaults().precision = crema::ParsePrecision(precision, "crema.set_precision");
      },
      py::arg("precision"),
      "'bf16', 'fp16' or 'fp32': the precision the convolutions and inner products of nets and solvers made from now "
      "on compute in, their sums and every other layer in float32, as crema's --precision (over a solver's own "
      "precision; a layer's own still wins). Where the CPU lacks the kernels, float32, with a warning. '' undoes it.");
  module.def("precision", [] {
    return std::string(ModuleDefaults().precision_set ? crema::PrecisionName(ModuleDefaults().precision) : "");
  });
  module.def(
      "multiplies_in",
      [](const std::string& precision) {
        const crema::Precision asked = crema::ParsePrecision(precision, "crema.multiplies_in");
        if (asked == crema::Precision::kFloat32) return true;
        if (ModuleDefaults().device == crema::Device::kGPU)
          return crema::DeviceMultipliesIn(*crema::python::MakeContext(0), asked);
#ifdef CREMA_USE_ONEDNN
        return asked == crema::Precision::kBfloat16 && crema::onednn::HasBfloat16Kernels();
#else
        return false;
#endif
      },
      py::arg("precision"),
      "Whether the convolutions and inner products of nets made now (on the mode's device) would compute in "
      "'bf16', 'fp16' or 'fp32': bf16 on a CPU whose oneDNN runs bf16 instructions (AVX512_BF16 or AMX, as "
      "DNNL_MAX_CPU_ISA allows), float16 and bf16 on a GPU with the tensor cores for them; elsewhere such a "
      "precision computes in float32.");
  module.def("mode", [] { return std::string(ModuleDefaults().device == crema::Device::kGPU ? "GPU" : "CPU"); });
  module.def("device", [] { return ModuleDefaults().gpu_id; });
  module.def("gpu_count", &crema::Context::gpu_count, "The number of CUDA devices visible (0 without CUDA).");
  module.def("built_with_cuda", &crema::Context::built_with_cuda);
  module.def(
      "layer_type_list", [] { return crema::LayerRegistry::Global().Types(); },
      "The layer types crema knows (the `type` values a prototxt may use), sorted.");
  module.def(
      "set_log_level", [](int level) { FLAGS_minloglevel = level; }, py::arg("level"),
      "crema's least severe log lines shown: 0 INFO (the default), 1 WARNING, 2 ERROR.");

  crema::python::BindBlob(module);
  crema::python::BindNet(module);
  crema::python::BindSolver(module);
  crema::python::BindIo(module);
  crema::python::BindPythonLayer(module);
}
