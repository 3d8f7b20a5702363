#include "layers/vision/kernel_geometry.hpp"

namespace crema {

namespace {

// One setting as the schema gives it: the repeated (or scalar) field's values, and the 2-d pair.
struct SpatialField {
  const char* name;        // "kernel_size"
  std::vector<int> given;  // the field's values: none, one for every axis, or one per axis
  const char* pair_name;   // "kernel_h/kernel_w", or nullptr where the field has no 2-d form
  bool has_h, has_w;
  int h, w;
  bool pair_needs_both;  // kernel and stride need both halves; pad_h and pad_w default to 0 each
};

// The setting's value per spatial axis, or `fallback` for every axis when nothing is given (a negative
// fallback: the setting is required).
std::vector<int> Resolve(const std::string& layer, const SpatialField& field, int axes, int fallback) {
  const int given = static_cast<int>(field.given.size());
  if (field.has_h || field.has_w) {
    CREMA_CHECK(given == 0) << layer << ": give either " << field.name << " or " << field.pair_name << ", not both";
    CREMA_CHECK(!field.pair_needs_both || (field.has_h && field.has_w))
        << layer << ": give both halves of " << field.pair_name << " (or " << field.name << ")";
    CREMA_CHECK(axes == 2) << layer << ": " << field.pair_name << " apply to 2-d input only, but the input has " << axes
                           << " spatial axes; use the repeated " << field.name;
    return {field.h, field.w};
  }
  if (given == 0) {
    CREMA_CHECK(fallback >= 0) << layer << ": " << field.name << " must be given"
                               << (field.pair_name ? std::string(" (or ") + field.pair_name + ")" : "");
    return std::vector<int>(axes, fallback);
  }
  CREMA_CHECK(given == 1 || given == axes) << layer << ": " << field.name << " must have one value, or one per "
                                           << "spatial axis (" << axes << "), but has " << given;
  std::vector<int> values;
  for (int i = 0; i < axes; ++i) values.push_back(field.given[given == 1 ? 0 : i]);
  return values;
}

template <typename Repeated>
std::vector<int> Values(const Repeated& repeated) {
  return std::vector<int>(repeated.begin(), repeated.end());
}

std::vector<int> Optional(bool has, uint32_t value) {
  return has ? std::vector<int>{static_cast<int>(value)} : std::vector<int>{};
}

void CheckPositive(const std::string& layer, const char* field, const std::vector<int>& values) {
  for (size_t i = 0; i < values.size(); ++i)
    CREMA_CHECK(values[i] > 0) << layer << ": " << field << " must be positive, but is " << values[i]
                               << " along spatial axis " << i;
}

}  // namespace

bool KernelGeometry::pointwise() const {
  for (int i = 0; i < axes(); ++i)
    if (kernel[i] != 1 || stride[i] != 1 || pad[i] != 0) return false;
  return true;
}

KernelGeometry ConvolutionGeometry(const ConvolutionParameter& param, int axes, const std::string& layer) {
  const auto to_int = [](uint32_t v) { return static_cast<int>(v); };
  KernelGeometry g;
  g.kernel = Resolve(layer,
                     {"kernel_size", Values(param.kernel_size()), "kernel_h/kernel_w", param.has_kernel_h(),
                      param.has_kernel_w(), to_int(param.kernel_h()), to_int(param.kernel_w()), true},
                     axes, -1);
  g.stride = Resolve(layer,
                     {"stride", Values(param.stride()), "stride_h/stride_w", param.has_stride_h(), param.has_stride_w(),
                      to_int(param.stride_h()), to_int(param.stride_w()), true},
                     axes, 1);
  g.pad = Resolve(layer,
                  {"pad", Values(param.pad()), "pad_h/pad_w", param.has_pad_h(), param.has_pad_w(),
                   to_int(param.pad_h()), to_int(param.pad_w()), false},
                  axes, 0);
  g.dilation = Resolve(layer, {"dilation", Values(param.dilation()), nullptr, false, false, 0, 0, false}, axes, 1);
  CheckPositive(layer, "kernel_size", g.kernel);
  CheckPositive(layer, "stride", g.stride);
  CheckPositive(layer, "dilation", g.dilation);
  return g;
}

KernelGeometry PoolingGeometry(const PoolingParameter& param, const std::string& layer) {
  const auto to_int = [](uint32_t v) { return static_cast<int>(v); };
  KernelGeometry g;
  const SpatialField kernel{"kernel_size",
                            Optional(param.has_kernel_size(), param.kernel_size()),
                            "kernel_h/kernel_w",
                            param.has_kernel_h(),
                            param.has_kernel_w(),
                            to_int(param.kernel_h()),
                            to_int(param.kernel_w()),
                            true};
  if (param.global_pooling()) {
    CREMA_CHECK(kernel.given.empty() && !kernel.has_h && !kernel.has_w)
        << layer << ": global_pooling takes the kernel from the input; do not give kernel_size or kernel_h/kernel_w";
    g.kernel = {0, 0};
  } else {
    g.kernel = Resolve(layer, kernel, 2, -1);
    CheckPositive(layer, "kernel_size", g.kernel);
  }
  g.stride = Resolve(layer,
                     {"stride", Optional(param.has_stride(), param.stride()), "stride_h/stride_w", param.has_stride_h(),
                      param.has_stride_w(), to_int(param.stride_h()), to_int(param.stride_w()), true},
                     2, 1);
  g.pad = Resolve(layer,
                  {"pad", Optional(param.has_pad(), param.pad()), "pad_h/pad_w", param.has_pad_h(), param.has_pad_w(),
                   to_int(param.pad_h()), to_int(param.pad_w()), false},
                  2, 0);
  g.dilation = {1, 1};
  CheckPositive(layer, "stride", g.stride);
  return g;
}

}  // namespace crema
