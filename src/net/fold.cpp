#include "net/fold.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <sstream>

#include "net/passes.hpp"

namespace crema {

namespace {

bool Contains(const std::vector<int>& ids, int id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

// The steps after `writer` that read the version of blob `id` that it wrote: up to the step that writes the blob
// again (included when it reads it first, in place).
std::vector<size_t> ReadersOf(const std::vector<PlanStep>& plan, size_t writer, int id) {
  std::vector<size_t> readers;
  for (size_t s = writer + 1; s < plan.size(); ++s) {
    if (Contains(plan[s].bottoms, id)) readers.push_back(s);
    if (Contains(plan[s].tops, id)) break;
  }
  return readers;
}

// The producer's parameter as its rewrite is built: with a bias where a channel affine map folds into it, and
// fillers that cost nothing (the parameters are the producer's, or derived from them, never filled).
LayerParameter RewrittenParameter(const Layer& producer, bool with_bias) {
  LayerParameter param = producer.layer_param();
  FillerParameter zero;
  zero.set_type("constant");
  zero.set_value(0.f);
  if (param.type() == "InnerProduct") {
    InnerProductParameter* ip = param.mutable_inner_product_param();
    if (with_bias) ip->set_bias_term(true);
    *ip->mutable_weight_filler() = zero;
    *ip->mutable_bias_filler() = zero;
  } else {
    ConvolutionParameter* conv = param.mutable_convolution_param();
    if (with_bias) conv->set_bias_term(true);
    *conv->mutable_weight_filler() = zero;
    *conv->mutable_bias_filler() = zero;
  }
  return param;
}

void CopyValues(const Blob& from, Blob* to) {
  CREMA_CHECK(from.count() == to->count())
      << "cannot derive parameters of shape " << to->shape_string() << " from " << from.shape_string();
  std::copy(from.cpu_data(), from.cpu_data() + from.count(), to->mutable_cpu_data());
}

}  // namespace

bool InferenceRewritesApply(const Net& net) {
  if (!net.forward_only() || !net.fold_allowed()) return false;
  // A net fused for training (net/fuse.hpp) keeps that plan: its steps are not the layers the folds expect.
  for (const PlanStep& step : net.plan())
    if (!net.absorbed(step.layer).empty() && net.rewrite_of(step.layer) == step.layer) return false;
  return true;
}

void PlainLayoutsForRewrites(Net* net) {
  if (!InferenceRewritesApply(*net)) return;
  for (const auto& blob : net->blobs()) blob->set_layout(Layout::kPlain);
  for (PlanStep& step : net->mutable_plan()) step.reshape_pending = true;
}

void FoldIdentities(Net* net) {
  if (!InferenceRewritesApply(*net)) return;
  std::vector<PlanStep>& plan = net->mutable_plan();
  for (size_t s = 0; s < plan.size();) {
    const PlanStep& step = plan[s];
    const Layer& layer = *net->layers()[step.layer];
    if (!layer.ForwardIsIdentity() || step.bottoms.size() != 1) {
      ++s;
      continue;
    }
    const int bottom = step.bottoms[0];
    bool removable = true;
    size_t last_reader = s;
    for (int top : step.tops) {
      if (top == bottom) continue;  // in place: nothing to redirect
      // Its readers will read the bottom: the top must be read by no one outside, written by no later step, and the
      // bottom must hold the same values until its last reader has run.
      removable = removable && !net->BlobReadOutside(top);
      for (size_t later = s + 1; later < plan.size(); ++later) {
        if (Contains(plan[later].tops, top)) removable = false;
        if (Contains(plan[later].bottoms, top)) last_reader = std::max(last_reader, later);
      }
    }
    for (size_t later = s + 1; later <= last_reader && removable; ++later)
      removable = !Contains(plan[later].tops, bottom);
    if (!removable) {
      ++s;
      continue;
    }
    for (int top : step.tops)
      if (top != bottom) net->RedirectReads(s, top, bottom);
    net->RecordRewrite(net->layer_names()[step.layer] + " (" + layer.type() +
                       "): removed, its forward pass copies its input");
    net->RemoveStep(s);
  }
}

void FoldIntoProducers(Net* net) {
  if (!InferenceRewritesApply(*net)) return;
  std::vector<PlanStep>& plan = net->mutable_plan();
  for (size_t s = 0; s < plan.size(); ++s) {
    if (net->rewrite_of(plan[s].layer) != plan[s].layer) continue;
    if (plan[s].bottoms.size() != 1 || plan[s].tops.size() != 1) continue;
    Layer* producer = net->layers()[plan[s].layer].get();
    const Blob& output = *net->blobs()[plan[s].tops[0]];
    const int channels = output.num_axes() >= 2 ? output.shape(1) : 0;
    const bool absorbs = producer->AbsorbsChannelAffine() && channels > 0;
    // Follow the producer's output through the steps that may fold into it.
    // In order: channel affine maps, then a sum with a blob already computed, then an activation.
    std::vector<size_t> folded;  // the affine steps, in order
    std::vector<Layer*> affine;
    int summand = -1;  // the sum's other operand
    size_t sum_step = 0;
    Quantization sum_quantization;  // the sum's own (Layer::set_sum_quantization)
    FusedActivation activation;
    size_t activation_step = 0;
    int current = plan[s].tops[0];
    size_t last = s;
    while (activation.kind == FusedActivation::kNone) {
      const std::vector<size_t> readers = ReadersOf(plan, last, current);
      if (readers.size() != 1) break;
      const size_t r = readers[0];
      const PlanStep& next = plan[r];
      if (next.tops.size() != 1) break;
      const bool in_place = next.tops[0] == current;
      // Out of place, the blob between them will no longer be written.
      if (!in_place && net->BlobReadOutside(current)) break;
      Layer& layer = *net->layers()[next.layer];
      if (next.bottoms.size() == 2) {
        // A sum whose other operand is final before the producer runs: written by an earlier step (or an input),
        // and by no step from the producer to the sum; and not the sum's top (the producer's output would overwrite
        // it before an engine that adds after its work reads it: no layer of today sums in place, but one may).
        const int other = next.bottoms[0] == current ? next.bottoms[1] : next.bottoms[0];
        bool ready = summand < 0 && other != current && next.tops[0] != other && layer.ForwardIsSumOfTwo() &&
                     producer->TakesFusedSum();
        for (size_t between = s; between < r && ready; ++between) ready = !Contains(plan[between].tops, other);
        if (!ready) break;
        summand = other;
        sum_step = r;
        if (layer.layer_param().has_quantization())  // the range of its inputs, `crema quantize`'s measure
          sum_quantization =
              QuantizationOf(layer.layer_param().quantization(), "layer '" + layer.name() + "' (" + layer.type() + ")");
      } else {
        if (next.bottoms.size() != 1) break;
        std::vector<float> scale, shift;
        const FusedActivation candidate = layer.AsFusedActivation();
        if (absorbs && summand < 0 && layer.ChannelAffine(channels, &scale, &shift)) {
          folded.push_back(r);
          affine.push_back(&layer);
        } else if (candidate.kind != FusedActivation::kNone && producer->TakesFusedActivation(candidate)) {
          activation = candidate;
          activation_step = r;
        } else {
          break;
        }
      }
      current = next.tops[0];
      last = r;
    }
    if (folded.empty() && summand < 0 && activation.kind == FusedActivation::kNone) continue;

    // The record, before the steps go.
    std::ostringstream note;
    note << net->layer_names()[plan[s].layer] << " (" << producer->type() << ")";
    if (!folded.empty()) {
      note << ": folded";
      for (size_t i = 0; i < folded.size(); ++i)
        note << (i ? ", " : " ") << net->layer_names()[plan[folded[i]].layer] << " (" << affine[i]->type() << ")";
    }
    if (summand >= 0)
      note << (folded.empty() ? ": " : "; ") << "fused " << net->layer_names()[plan[sum_step].layer] << " (sum with '"
           << net->UserBlobName(net->blob_names()[summand]) << "')";
    if (activation.kind != FusedActivation::kNone)
      note << (folded.empty() && summand < 0 ? ": " : "; ") << "fused "
           << net->layer_names()[plan[activation_step].layer] << " (" << activation.describe() << ")";

    if (summand >= 0) plan[s].bottoms.push_back(summand);  // the step reads it: the memory plan keeps it until then
    const int index =
        net->ReplaceStepLayer(s, RewrittenParameter(*producer, !folded.empty()), {current}, [&](Layer& layer) {
          layer.set_fused_activation(activation);
          layer.set_fused_sum(summand >= 0);
          layer.set_sum_quantization(sum_quantization);
        });
    Layer* rewritten = net->layers()[index].get();
    note << " [" << rewritten->engine() << "]";
    if (folded.empty()) {
      rewritten->params() = producer->params();  // the same weights, shared
    } else {
      std::vector<const Blob*> sources;
      for (const auto& param : producer->params()) sources.push_back(param.get());
      for (Layer* layer : affine)
        for (const auto& param : layer->params()) sources.push_back(param.get());
      net->AddDerivedParams(index, sources, [producer, rewritten, affine, channels] {
        auto& params = rewritten->params();
        CopyValues(*producer->params()[0], params[0].get());
        if (producer->params().size() > 1) {
          CopyValues(*producer->params()[1], params[1].get());
        } else {
          std::fill(params[1]->mutable_cpu_data(), params[1]->mutable_cpu_data() + params[1]->count(), 0.f);
        }
        // The maps one after another: y = a2 (a1 x + b1) + b2 = (a2 a1) x + (a2 b1 + b2).
        std::vector<float> scale(channels, 1.f), shift(channels, 0.f), a, b;
        for (Layer* layer : affine) {
          CREMA_CHECK(layer->ChannelAffine(channels, &a, &b)) << "layer '" << layer->name() << "' (" << layer->type()
                                                              << ") no longer maps its channels by a scale and shift";
          for (int c = 0; c < channels; ++c) {
            scale[c] *= a[c];
            shift[c] = shift[c] * a[c] + b[c];
          }
        }
        rewritten->AbsorbChannelAffine(scale, shift);
      });
    }
    std::vector<size_t> gone = folded;
    if (summand >= 0) gone.push_back(sum_step);
    if (activation.kind != FusedActivation::kNone) gone.push_back(activation_step);
    std::vector<int> absorbed;
    for (size_t step : gone) absorbed.push_back(plan[step].layer);
    net->SetAbsorbed(index, absorbed);
    std::sort(gone.rbegin(), gone.rend());
    for (size_t step : gone) net->RemoveStep(step);
    net->RecordRewrite(note.str());
  }
}

NetParameter FoldedNetParameter(const Net& net) {
  NetParameter param;
  param.set_name(net.name());
  const auto written = [&](const Layer& layer, const PlanStep& step) {
    LayerParameter* out = param.add_layer();
    layer.ToProto(out, false);
    out->clear_phase();
    out->clear_bottom();
    out->clear_top();
    for (int id : step.bottoms) out->add_bottom(net.UserBlobName(net.blob_names()[id]));
    for (int id : step.tops) out->add_top(net.blob_names()[id]);
    return out;
  };
  for (const PlanStep& step : net.plan()) {
    const Layer& layer = *net.layers()[step.layer];
    LayerParameter* producer = written(layer, step);
    if (net.rewrite_of(step.layer) == step.layer) continue;
    // A rewritten producer: the prototxt's parameters, with the bias the fold gave it, and the fused activation after
    // it as the layer it was, in place on the producer's output.
    const Layer& original = *net.layers()[net.rewrite_of(step.layer)];
    const bool bias = layer.params().size() > original.params().size();
    LayerParameter restored = original.layer_param();
    restored.clear_phase();
    restored.clear_blobs();
    *restored.mutable_bottom() = producer->bottom();
    *restored.mutable_top() = producer->top();
    *restored.mutable_blobs() = producer->blobs();
    if (bias && restored.has_inner_product_param()) restored.mutable_inner_product_param()->set_bias_term(true);
    if (bias && !restored.has_inner_product_param()) restored.mutable_convolution_param()->set_bias_term(true);
    // A fused sum: the producer writes the sum's other operand, as the prototxt named it, and the sum follows.
    const Layer* sum = nullptr;
    for (int absorbed : net.absorbed(step.layer))
      if (net.layers()[absorbed]->ForwardIsSumOfTwo()) sum = net.layers()[absorbed].get();
    if (sum != nullptr) {
      const std::string summand = restored.bottom(restored.bottom_size() - 1);
      restored.mutable_bottom()->RemoveLast();
      for (const std::string& operand : sum->layer_param().bottom())
        if (net.UserBlobName(operand) != summand) restored.set_top(0, net.UserBlobName(operand));
    }
    *producer = restored;
    const std::string output = net.blob_names()[step.tops[0]];
    for (int absorbed : net.absorbed(step.layer)) {
      const Layer& layer = *net.layers()[absorbed];
      const bool activation = layer.AsFusedActivation().kind != FusedActivation::kNone;
      if (!activation && &layer != sum) continue;
      LayerParameter* out = param.add_layer();
      *out = layer.layer_param();
      out->clear_phase();
      out->clear_bottom();
      out->clear_top();
      if (activation) {
        out->add_bottom(output);
      } else {
        for (const std::string& operand : layer.layer_param().bottom()) out->add_bottom(net.UserBlobName(operand));
      }
      out->add_top(output);
    }
  }
  return param;
}

void DropUnusedBlobs(Net* net) {
  if (InferenceRewritesApply(*net)) net->DropBlobsNoStepUses();
}

void PlanLayoutsAfterRewrites(Net* net) {
  if (!InferenceRewritesApply(*net)) return;
  // The engines say what they offer as the rewrites left them (fused post-ops; 8-bit kernels take channels-last).
  net->Reshape();
  PlanLayouts(net);
}

}  // namespace crema
