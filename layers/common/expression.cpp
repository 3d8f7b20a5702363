#include "layers/common/expression.hpp"

#include <glog/logging.h>

#include "core/formula_gpu.hpp"
#ifdef CREMA_USE_CUDA
#include "core/cuda_check.hpp"
#endif

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <utility>

namespace crema {

namespace {

// Names in a list written "n c h w" or "n, c, h, w".
std::vector<std::string> SplitNames(const std::string& text) {
  std::vector<std::string> names;
  std::string name;
  for (char c : text + " ") {
    if (c == ' ' || c == ',' || c == '\t') {
      if (!name.empty()) names.push_back(name);
      name.clear();
    } else {
      name += c;
    }
  }
  return names;
}

std::vector<std::string> DefaultAxisNames(size_t rank) {
  static const std::vector<std::vector<std::string>> kNames = {
      {}, {"n"}, {"n", "c"}, {"n", "c", "h"}, {"n", "c", "h", "w"}, {"n", "c", "d", "h", "w"}};
  if (rank < kNames.size()) return kNames[rank];
  std::vector<std::string> names;
  for (size_t a = 0; a < rank; ++a) names.push_back("a" + std::to_string(a));
  return names;
}

std::string ShapeText(const std::vector<int>& shape) {
  std::ostringstream out;
  out << "(";
  for (size_t a = 0; a < shape.size(); ++a) out << (a ? ", " : "") << shape[a];
  out << ")";
  return out.str();
}

// Whether a bottom of `shape` holds a value over the axes `axes` of a full shape `full`, laid out as those axes are:
// its sizes other than 1 are theirs, in order ((C), (1, C, 1, 1) and (C, 1) all hold a value over c).
bool Fits(const std::vector<int>& shape, AxisMask axes, const std::vector<int>& full) {
  std::vector<int> mine, theirs;
  for (int size : shape)
    if (size != 1) mine.push_back(size);
  for (size_t a = 0; a < full.size(); ++a)
    if ((axes & (AxisMask{1} << a)) && full[a] != 1) theirs.push_back(full[a]);
  return mine == theirs;
}

}  // namespace

ExpressionLayer::ExpressionLayer(const LayerParameter& param, std::shared_ptr<Context> context)
    : Layer(param, std::move(context)) {}

ExpressionLayer::~ExpressionLayer() = default;

AxisMask ExpressionLayer::BottomAxes(int i, const Blob& blob, const std::vector<int>& full) const {
  const ExpressionParameter& param = param_.expression_param();
  const std::vector<std::string>& names = graph_->axis_names();
  const std::vector<int>& shape = blob.shape();
  const AxisMask all = graph_->all_axes();
  const std::string name = BottomName(i);
  if (param.bottom_axes_size() > 0 && !param.bottom_axes(i).empty()) {
    AxisMask axes = 0;
    int last = -1;
    for (const std::string& axis : SplitNames(param.bottom_axes(i))) {
      const auto found = std::find(names.begin(), names.end(), axis);
      CREMA_CHECK(found != names.end()) << describe() << ": bottom_axes '" << param.bottom_axes(i) << "' of bottom '"
                                        << name << "' names the axis '" << axis << "', not one of the layer's axes "
                                        << graph_->DescribeAxes(all);
      const int index = static_cast<int>(found - names.begin());
      CREMA_CHECK(index > last) << describe() << ": bottom_axes '" << param.bottom_axes(i) << "' of bottom '" << name
                                << "' must name axes once each, in the order " << graph_->DescribeAxes(all);
      last = index;
      axes |= AxisMask{1} << index;
    }
    return axes;
  }
  if (shape == full) return all;
  if (blob.count() == 1) return 0;
  // The same number of axes, with 1 where it is broadcast.
  if (shape.size() == full.size()) {
    AxisMask axes = 0;
    for (size_t a = 0; a < full.size(); ++a)
      if (shape[a] == full[a]) axes |= AxisMask{1} << a;
    if (Fits(shape, axes, full)) return axes;
  }
  // Fewer axes: the one way its sizes are sizes of the full shape's axes, in order.
  std::vector<AxisMask> found;
  const std::function<void(size_t, size_t, AxisMask)> match = [&](size_t d, size_t from, AxisMask axes) {
    if (found.size() > 1) return;
    if (d == shape.size()) {
      found.push_back(axes);
      return;
    }
    for (size_t a = from; a < full.size(); ++a)
      if (full[a] == shape[d]) match(d + 1, a + 1, axes | (AxisMask{1} << a));
  };
  match(0, 0, 0);
  std::ostringstream full_text;
  full_text << "the axes " << graph_->DescribeAxes(all) << " of the largest bottom '" << BottomName(full_) << "' are "
            << ShapeText(full);
  CREMA_CHECK(!found.empty()) << describe() << ": bottom '" << name << "' has shape " << ShapeText(shape)
                              << ", which is not the size of some of the axes (" << full_text.str()
                              << ") or one value; expression_param.bottom_axes names the axes of each bottom";
  CREMA_CHECK(found.size() == 1) << describe() << ": bottom '" << name << "' has shape " << ShapeText(shape)
                                 << ", which may vary over the axes " << graph_->DescribeAxes(found[0]) << " or "
                                 << graph_->DescribeAxes(found[1]) << " (" << full_text.str()
                                 << "): say which in expression_param.bottom_axes";
  return found[0];
}

void ExpressionLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const ExpressionParameter& param = param_.expression_param();
  CREMA_CHECK(param.formula_size() == static_cast<int>(top.size()))
      << describe() << ": expression_param has " << param.formula_size() << " formula"
      << (param.formula_size() == 1 ? "" : "s") << " for " << top.size() << " top" << (top.size() == 1 ? "" : "s")
      << " (one formula per top)";
  CREMA_CHECK(param.bottom_name_size() == 0 || param.bottom_name_size() == static_cast<int>(bottom.size()))
      << describe() << ": expression_param has " << param.bottom_name_size() << " bottom_name for " << bottom.size()
      << " bottoms (none, or one per bottom)";
  CREMA_CHECK(param.bottom_axes_size() == 0 || param.bottom_axes_size() == static_cast<int>(bottom.size()))
      << describe() << ": expression_param has " << param.bottom_axes_size() << " bottom_axes for " << bottom.size()
      << " bottoms (none, or one per bottom)";
  std::vector<std::string> names(param.bottom_name().begin(), param.bottom_name().end());
  if (names.empty()) names.assign(param_.bottom().begin(), param_.bottom().end());
  for (size_t i = 0; i < names.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      CREMA_CHECK(names[i] != names[j]) << describe() << ": two bottoms are both called '" << names[i] << "'";
  // The axes: those of the largest bottom (the first of the largest).
  full_ = 0;
  for (size_t i = 0; i < bottom.size(); ++i)
    if (bottom[i]->count() > bottom[full_]->count()) full_ = static_cast<int>(i);
  const std::vector<int>& full = bottom[full_]->shape();
  std::vector<std::string> axis_names = param.has_axes() ? SplitNames(param.axes()) : DefaultAxisNames(full.size());
  CREMA_CHECK(axis_names.size() == full.size())
      << describe() << ": expression_param.axes '" << param.axes() << "' names " << axis_names.size()
      << " axes, but the largest bottom '" << names[full_] << "' has " << full.size() << " " << ShapeText(full);
  CREMA_CHECK(full.size() <= static_cast<size_t>(kFormulaMostAxes))
      << describe() << ": the largest bottom has " << full.size() << " axes; formulas take at most "
      << kFormulaMostAxes;
  for (size_t a = 0; a < axis_names.size(); ++a)
    for (size_t b = 0; b < a; ++b)
      CREMA_CHECK(axis_names[a] != axis_names[b])
          << describe() << ": two axes are both called '" << axis_names[a] << "'";
  graph_ = std::make_unique<FormulaGraph>(names, axis_names);
  bottom_axes_.clear();
  for (size_t i = 0; i < bottom.size(); ++i) bottom_axes_.push_back(BottomAxes(static_cast<int>(i), *bottom[i], full));
  graph_ = std::make_unique<FormulaGraph>(names, axis_names, bottom_axes_);
  formulas_.clear();
  for (int k = 0; k < param.formula_size(); ++k) {
    try {
      formulas_.push_back(graph_->Parse(param.formula(k)));
    } catch (const Error& error) {
      CREMA_FAIL() << describe() << ": expression_param.formula " << k << " (top '" << param_.top(k)
                   << "'): " << error.what();
    }
  }
  const auto axes_of = [&](int node) { return graph_->nodes()[node].axes; };
  // The gradients: one seed per top (its gradient, over the top's axes), and per bottom the sum over the tops of
  // what reaches it.
  seeds_.clear();
  gradients_.assign(bottom.size(), -1);
  for (size_t k = 0; k < formulas_.size(); ++k) {
    seeds_.push_back(graph_->AddInput("d(" + param_.top(static_cast<int>(k)) + ")", axes_of(formulas_[k])));
    const std::vector<int> reached = graph_->Differentiate(formulas_[k], seeds_.back());
    for (size_t i = 0; i < bottom.size(); ++i) {
      if (reached[i] < 0) continue;
      gradients_[i] = gradients_[i] < 0 ? reached[i] : graph_->Apply(FormulaOp::kAdd, gradients_[i], reached[i]);
    }
  }
  // What backward keeps from forward: the costly values both passes compute.
  const std::vector<bool> in_forward = graph_->Reachable(formulas_);
  const std::vector<bool> in_backward = graph_->Reachable(gradients_);
  kept_.clear();
  std::map<int, int> replace;
  int blobs = 0;
  for (size_t n = 0; n < in_backward.size(); ++n) {
    const FormulaNode& node = graph_->nodes()[n];
    if (!in_forward[n] || !in_backward[n] || !node.varies || !FormulaCostly(node.op)) continue;
    Kept kept;
    kept.node = static_cast<int>(n);
    for (size_t k = 0; k < formulas_.size() && kept.top < 0; ++k)
      if (formulas_[k] == kept.node) kept.top = static_cast<int>(k);
    if (kept.top < 0) {
      if (blobs == static_cast<int>(kept_blobs_.size()))
        kept_blobs_.push_back(AddInternalBlob("kept" + std::to_string(blobs), InternalLifetime::kUntilBackward));
      kept.blob = kept_blobs_[blobs++];
    }
    kept.input = graph_->nodes()[graph_->AddInput("kept" + std::to_string(kept_.size()), node.axes)].input;
    replace[kept.node] = graph_->Input(kept.input);
    kept_.push_back(kept);
  }
  for (int& gradient : gradients_)
    if (gradient >= 0) gradient = graph_->Substitute(gradient, replace);
  // What backward reads, for the memory plan.
  const std::vector<bool> read = graph_->Reachable(gradients_);
  reads_bottom_.assign(bottom.size(), false);
  reads_top_.assign(top.size(), false);
  for (size_t i = 0; i < bottom.size(); ++i) reads_bottom_[i] = read[graph_->Input(static_cast<int>(i))];
  for (const Kept& kept : kept_)
    if (kept.top >= 0) reads_top_[kept.top] = true;
  std::vector<FormulaProgram::Output> outputs;
  for (int formula : formulas_) outputs.push_back({formula, axes_of(formula)});
  for (const Kept& kept : kept_)
    if (kept.top < 0) outputs.push_back({kept.node, axes_of(kept.node)});
  kernels_.clear();
  forward_ = std::make_unique<FormulaProgram>(*graph_, outputs);
  backward_.clear();
  // On a GPU the kernels are compiled now, as the net is built: forward's, and in training backward's for every
  // bottom.
  KernelsFor(*forward_);
  std::vector<bool> every(bottom.size());
  for (size_t i = 0; i < bottom.size(); ++i) every[i] = gradients_[i] >= 0;
  if (phase() == TRAIN) KernelsFor(BackwardProgram(every));
}

std::string ExpressionLayer::BottomName(int i) const {
  return graph_ != nullptr && i < static_cast<int>(graph_->input_names().size()) ? graph_->input_names()[i]
                                                                                 : param_.bottom(i);
}

bool ExpressionLayer::BackwardReadsTop(int top) const {
  return top < static_cast<int>(reads_top_.size()) ? reads_top_[top] : true;
}

bool ExpressionLayer::BackwardReadsBottom(int bottom) const {
  return bottom < static_cast<int>(reads_bottom_.size()) ? reads_bottom_[bottom] : true;
}

std::vector<int> ExpressionLayer::ShapeOver(AxisMask axes) const {
  std::vector<int> shape;
  for (size_t a = 0; a < dims_.size(); ++a)
    if (axes & (AxisMask{1} << a)) shape.push_back(static_cast<int>(dims_[a]));
  return shape;
}

void ExpressionLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const std::vector<int>& full = bottom[full_]->shape();
  CREMA_CHECK(full.size() == graph_->axis_names().size())
      << describe() << ": bottom '" << BottomName(full_) << "' has shape " << bottom[full_]->shape_string() << ", but "
      << graph_->axis_names().size() << " axes (" << graph_->DescribeAxes(graph_->all_axes()) << ") when set up";
  dims_.assign(full.begin(), full.end());
  for (size_t i = 0; i < bottom.size(); ++i)
    CREMA_CHECK(Fits(bottom[i]->shape(), bottom_axes_[i], full))
        << describe() << ": bottom '" << BottomName(static_cast<int>(i)) << "' has shape " << bottom[i]->shape_string()
        << ", but it varies over "
        << (bottom_axes_[i] ? "the axes " + graph_->DescribeAxes(bottom_axes_[i]) : std::string("no axis (one value)"))
        << " of the largest bottom '" << BottomName(full_) << "' " << bottom[full_]->shape_string() << ": it must be "
        << ShapeText(ShapeOver(bottom_axes_[i]));
  for (size_t k = 0; k < top.size(); ++k) top[k]->Reshape(ShapeOver(graph_->nodes()[formulas_[k]].axes));
  for (const Kept& kept : kept_)
    if (kept.blob != nullptr) kept.blob->Reshape(ShapeOver(graph_->nodes()[kept.node].axes));
}

void ExpressionLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  std::vector<const float*> inputs(graph_->input_names().size(), nullptr);
  for (size_t i = 0; i < bottom.size(); ++i) inputs[i] = bottom[i]->cpu_data();
  std::vector<float*> outputs;
  for (Blob* blob : top) outputs.push_back(blob->mutable_cpu_data());
  for (const Kept& kept : kept_)
    if (kept.blob != nullptr) outputs.push_back(kept.blob->mutable_cpu_data());
  forward_->Run(dims_, inputs, outputs);
}

std::vector<const float*> ExpressionLayer::BackwardInputs(const std::vector<Blob*>& top,
                                                          const std::vector<Blob*>& bottom, Device device) const {
  // The bottoms backward reads (the others may hold other values by now: the memory plan), what it kept, and each
  // top's gradient.
  std::vector<const float*> inputs(graph_->input_names().size(), nullptr);
  for (size_t i = 0; i < bottom.size(); ++i)
    if (reads_bottom_[i]) inputs[i] = bottom[i]->data_on(device);
  for (const Kept& kept : kept_)
    inputs[kept.input] = kept.top >= 0 ? top[kept.top]->data_on(device) : kept.blob->data_on(device);
  for (size_t k = 0; k < top.size(); ++k) inputs[graph_->nodes()[seeds_[k]].input] = top[k]->diff_on(device);
  return inputs;
}

const FormulaProgram& ExpressionLayer::BackwardProgram(const std::vector<bool>& wanted) {
  std::unique_ptr<FormulaProgram>& program = backward_[wanted];
  if (program == nullptr) {
    std::vector<FormulaProgram::Output> outputs;
    for (size_t i = 0; i < wanted.size(); ++i)
      if (wanted[i]) outputs.push_back({gradients_[i], bottom_axes_[i]});
    program = std::make_unique<FormulaProgram>(*graph_, outputs);
  }
  return *program;
}

void ExpressionLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                   const std::vector<Blob*>& bottom) {
  const std::vector<const float*> inputs = BackwardInputs(top, bottom, Device::kCPU);
  // The gradients of the bottoms it propagates to, one program per set of them.
  std::vector<bool> wanted(bottom.size());
  for (size_t i = 0; i < bottom.size(); ++i) wanted[i] = propagate_down[i] && gradients_[i] >= 0;
  const FormulaProgram& program = BackwardProgram(wanted);
  std::vector<float*> outputs;
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (wanted[i]) {
      outputs.push_back(bottom[i]->mutable_cpu_diff());
    } else if (propagate_down[i]) {
      std::fill_n(bottom[i]->mutable_cpu_diff(), bottom[i]->count(), 0.f);
    }
  }
  program.Run(dims_, inputs, outputs);
}

FormulaKernels* ExpressionLayer::KernelsFor(const FormulaProgram& program) {
#ifdef CREMA_USE_CUDA
  if (device() != Device::kGPU) return nullptr;
  const auto found = kernels_.find(&program);
  if (found != kernels_.end()) return found->second.get();
  std::unique_ptr<FormulaKernels>& kernels = kernels_[&program];
  try {
    kernels = std::make_unique<FormulaKernels>(program);
  } catch (const Error& error) {
    LOG(WARNING) << describe() << " runs on the host: its kernels cannot be made (" << error.what() << ")";
  }
  return kernels.get();
#else
  (void)program;
  return nullptr;
#endif
}

void ExpressionLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
#ifdef CREMA_USE_CUDA
  if (FormulaKernels* kernels = KernelsFor(*forward_)) {
    std::vector<const float*> inputs(graph_->input_names().size(), nullptr);
    for (size_t i = 0; i < bottom.size(); ++i) inputs[i] = bottom[i]->gpu_data();
    std::vector<float*> outputs;
    for (Blob* blob : top) outputs.push_back(blob->mutable_gpu_data());
    for (const Kept& kept : kept_)
      if (kept.blob != nullptr) outputs.push_back(kept.blob->mutable_gpu_data());
    kernels->Run(dims_, inputs, outputs, false, context().stream());
    return;
  }
#endif
  Forward_cpu(bottom, top);
}

void ExpressionLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                   const std::vector<Blob*>& bottom) {
#ifdef CREMA_USE_CUDA
  std::vector<bool> wanted(bottom.size());
  for (size_t i = 0; i < bottom.size(); ++i) wanted[i] = propagate_down[i] && gradients_[i] >= 0;
  if (FormulaKernels* kernels = KernelsFor(BackwardProgram(wanted))) {
    const std::vector<const float*> inputs = BackwardInputs(top, bottom, Device::kGPU);
    std::vector<float*> outputs;
    for (size_t i = 0; i < bottom.size(); ++i) {
      if (wanted[i]) {
        outputs.push_back(bottom[i]->mutable_gpu_diff());
      } else if (propagate_down[i]) {
        CREMA_CUDA_CHECK(
            cudaMemsetAsync(bottom[i]->mutable_gpu_diff(), 0, sizeof(float) * bottom[i]->count(), context().stream()));
      }
    }
    kernels->Run(dims_, inputs, outputs, false, context().stream());
    return;
  }
#endif
  Backward_cpu(top, propagate_down, bottom);
}

}  // namespace crema
