#include "layers/common/expression.hpp"

#include <algorithm>
#include <map>
#include <string>

namespace crema {

void ExpressionLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const ExpressionParameter& param = param_.expression_param();
  CREMA_CHECK(param.formula_size() == static_cast<int>(top.size()))
      << describe() << ": expression_param has " << param.formula_size() << " formula"
      << (param.formula_size() == 1 ? "" : "s") << " for " << top.size() << " top" << (top.size() == 1 ? "" : "s")
      << " (one formula per top)";
  CREMA_CHECK(param.bottom_name_size() == 0 || param.bottom_name_size() == static_cast<int>(bottom.size()))
      << describe() << ": expression_param has " << param.bottom_name_size() << " bottom_name for " << bottom.size()
      << " bottoms (none, or one per bottom)";
  std::vector<std::string> names(param.bottom_name().begin(), param.bottom_name().end());
  if (names.empty()) names.assign(param_.bottom().begin(), param_.bottom().end());
  for (size_t i = 0; i < names.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      CREMA_CHECK(names[i] != names[j]) << describe() << ": two bottoms are both called '" << names[i] << "'";
  graph_ = std::make_unique<FormulaGraph>(names);
  formulas_.clear();
  for (int k = 0; k < param.formula_size(); ++k) {
    try {
      formulas_.push_back(graph_->Parse(param.formula(k)));
    } catch (const Error& error) {
      CREMA_FAIL() << describe() << ": expression_param.formula " << k << " (top '" << param_.top(k)
                   << "'): " << error.what();
    }
  }
  // The gradients: one seed per top (its gradient, or for a reduction the scalar that reaches every element), and
  // per bottom the sum over the tops of what reaches it.
  seeds_.clear();
  gradients_.assign(bottom.size(), -1);
  for (size_t k = 0; k < formulas_.size(); ++k) {
    seeds_.push_back(graph_->AddInput("d(" + param_.top(static_cast<int>(k)) + ")"));
    const std::vector<int> reached = graph_->Differentiate(formulas_[k].node, seeds_.back());
    for (size_t i = 0; i < bottom.size(); ++i) {
      if (reached[i] < 0) continue;
      gradients_[i] = gradients_[i] < 0 ? reached[i] : graph_->Apply(FormulaOp::kAdd, gradients_[i], reached[i]);
    }
  }
  // What backward keeps from forward: the costly values both passes compute.
  std::vector<int> roots;
  for (const FormulaGraph::Parsed& formula : formulas_) roots.push_back(formula.node);
  const std::vector<bool> in_forward = graph_->Reachable(roots);
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
      if (formulas_[k].node == kept.node && formulas_[k].reduction == FormulaReduction::kNone)
        kept.top = static_cast<int>(k);
    if (kept.top < 0) {
      if (blobs == static_cast<int>(kept_blobs_.size()))
        kept_blobs_.push_back(AddInternalBlob("kept" + std::to_string(blobs), InternalLifetime::kUntilBackward));
      kept.blob = kept_blobs_[blobs++];
    }
    kept.input = graph_->nodes()[graph_->AddInput("kept" + std::to_string(kept_.size()))].input;
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
  for (const FormulaGraph::Parsed& formula : formulas_)
    outputs.push_back({formula.node, formula.reduction != FormulaReduction::kNone});
  for (const Kept& kept : kept_)
    if (kept.top < 0) outputs.push_back({kept.node, false});
  forward_ = std::make_unique<FormulaProgram>(*graph_, outputs);
  backward_.reset();
}

std::string ExpressionLayer::BottomName(int i) const {
  return i < static_cast<int>(graph_->input_names().size()) ? graph_->input_names()[i] : param_.bottom(i);
}

bool ExpressionLayer::BackwardReadsTop(int top) const {
  return top < static_cast<int>(reads_top_.size()) ? reads_top_[top] : true;
}

bool ExpressionLayer::BackwardReadsBottom(int bottom) const {
  return bottom < static_cast<int>(reads_bottom_.size()) ? reads_bottom_[bottom] : true;
}

void ExpressionLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob* largest = bottom[0];
  for (const Blob* blob : bottom)
    if (blob->count() > largest->count()) largest = blob;
  elements_ = largest->count();
  for (size_t i = 0; i < bottom.size(); ++i)
    CREMA_CHECK(bottom[i]->count() == 1 || bottom[i]->shape() == largest->shape())
        << describe() << ": bottom '" << BottomName(static_cast<int>(i)) << "' has shape " << bottom[i]->shape_string()
        << ", but every bottom must have the largest one's shape " << largest->shape_string() << " or hold one value";
  for (size_t k = 0; k < top.size(); ++k) {
    if (formulas_[k].reduction != FormulaReduction::kNone) {
      top[k]->Reshape(std::vector<int>());
    } else {
      top[k]->ReshapeLike(*largest);
    }
  }
  for (const Kept& kept : kept_)
    if (kept.blob != nullptr) kept.blob->ReshapeLike(*largest);
  // Backward sums the gradient of a bottom that is broadcast: its program is made for the bottoms broadcast now.
  std::vector<bool> broadcast(bottom.size());
  for (size_t i = 0; i < bottom.size(); ++i) broadcast[i] = bottom[i]->count() == 1 && elements_ > 1;
  if (backward_ == nullptr || broadcast != backward_broadcast_) {
    std::vector<FormulaProgram::Output> outputs;
    for (size_t i = 0; i < bottom.size(); ++i)
      if (gradients_[i] >= 0) outputs.push_back({gradients_[i], broadcast[i]});
    backward_ = std::make_unique<FormulaProgram>(*graph_, outputs);
    backward_broadcast_ = broadcast;
  }
}

std::vector<FormulaProgram::InputArray> ExpressionLayer::BottomInputs(const std::vector<Blob*>& bottom) const {
  std::vector<FormulaProgram::InputArray> inputs(graph_->input_names().size());
  for (size_t i = 0; i < bottom.size(); ++i)
    inputs[i] = {bottom[i]->cpu_data(), bottom[i]->count() == 1 && elements_ > 1};
  return inputs;
}

void ExpressionLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  std::vector<float*> outputs;
  for (Blob* blob : top) outputs.push_back(blob->mutable_cpu_data());
  for (const Kept& kept : kept_)
    if (kept.blob != nullptr) outputs.push_back(kept.blob->mutable_cpu_data());
  std::vector<double> sums(outputs.size(), 0.0);
  forward_->Run(elements_, BottomInputs(bottom), outputs, &sums);
  for (size_t k = 0; k < top.size(); ++k) {
    if (formulas_[k].reduction == FormulaReduction::kNone) continue;
    const double value =
        formulas_[k].reduction == FormulaReduction::kMean && elements_ > 0 ? sums[k] / elements_ : sums[k];
    top[k]->mutable_cpu_data()[0] = static_cast<float>(value);
  }
}

void ExpressionLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                   const std::vector<Blob*>& bottom) {
  // The bottoms backward reads (the others may hold other values by now: the memory plan), and what it kept.
  std::vector<FormulaProgram::InputArray> inputs = BottomInputs(bottom);
  for (size_t i = 0; i < bottom.size(); ++i)
    if (!reads_bottom_[i]) inputs[i].data = nullptr;
  for (const Kept& kept : kept_)
    inputs[kept.input] = {kept.top >= 0 ? top[kept.top]->cpu_data() : kept.blob->cpu_data(), false};
  // Each top's gradient is an input of the graph (after the bottoms); a reduction's reaches every element alike: dy,
  // over the elements for a mean.
  std::vector<float> reduced(top.size(), 0.f);
  for (size_t k = 0; k < top.size(); ++k) {
    const int input = graph_->nodes()[seeds_[k]].input;
    if (formulas_[k].reduction == FormulaReduction::kNone) {
      inputs[input] = {top[k]->cpu_diff(), false};
      continue;
    }
    const float dy = top[k]->cpu_diff()[0];
    reduced[k] = formulas_[k].reduction == FormulaReduction::kMean && elements_ > 0
                     ? static_cast<float>(dy / static_cast<double>(elements_))
                     : dy;
    inputs[input] = {&reduced[k], true};
  }
  // Every gradient the program has is computed: into the bottom's diff, summed for a broadcast bottom, or into a
  // scratch it drops for a bottom that needs none.
  std::vector<float*> outputs;
  std::vector<size_t> written;
  std::vector<std::vector<float>> scratch(bottom.size());
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (gradients_[i] < 0) {
      if (propagate_down[i]) std::fill_n(bottom[i]->mutable_cpu_diff(), bottom[i]->count(), 0.f);
      continue;
    }
    float* target = nullptr;
    if (!backward_broadcast_[i] && propagate_down[i]) {
      target = bottom[i]->mutable_cpu_diff();
    } else if (!backward_broadcast_[i]) {
      scratch[i].resize(static_cast<size_t>(elements_));
      target = scratch[i].data();
    }
    outputs.push_back(target);
    written.push_back(i);
  }
  std::vector<double> sums(outputs.size(), 0.0);
  backward_->Run(elements_, inputs, outputs, &sums);
  for (size_t o = 0; o < written.size(); ++o) {
    const size_t i = written[o];
    if (propagate_down[i] && backward_broadcast_[i]) bottom[i]->mutable_cpu_diff()[0] = static_cast<float>(sums[o]);
  }
}

}  // namespace crema
