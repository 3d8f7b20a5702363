// Inference rewrites: passes of the after-weights stage (net/passes.hpp) that turn the plan of a net that runs forward
// only into a shorter one computing the same outputs, once its weights are loaded. MXNet's design notes call this
// operator folding: a program that knows its whole graph merges operations before running them.
//
//   plain_layouts        every blob back to the plain layout, so that the rewritten steps are laid out afresh
//   fold_identities      a step whose forward copies its bottom (Dropout in TEST, Split) goes; its readers read
//                        the bottom
//   fold_into_producers  after a Convolution, Deconvolution or InnerProduct (the producer): the channel affine
//                        maps that follow it (BatchNorm with stored statistics, Scale, Bias) fold into its weights
//                        and bias, then an activation (ReLU, ELU, Sigmoid, TanH, Clip) fuses into its engine; the
//                        producer's step is given a rewritten layer (Net::ReplaceStepLayer) and theirs go
//   drop_unused_blobs    the blobs no step uses any more (the producer's output before a fold out of place, a
//                        Split's copies) give their memory back
//   plan_layouts         the layouts planned again over the rewritten steps
//
// They run where the net runs forward only (Net::forward_only) and folding is allowed (NetParameter.fold, crema's
// --fold, Context::fold); otherwise they leave the net alone. A rewrite never changes what a blob read from outside
// holds (Net::BlobReadOutside: outputs, kept blobs, every blob of a net without a memory plan), so in place chains
// fold everywhere, and out of place ones where the blobs between them are the plan's own. Weight files are never
// touched: the folded weights are derived from the layers' own parameters (which stay what files and Python see) and
// derived again when those change (Net::AddDerivedParams). Net::rewrites() says what was done.
#pragma once

#include "net/net.hpp"

namespace crema {

// Whether the rewrites apply to `net`: it runs forward only, folding is allowed, and no step runs layers fused for
// training (net/fuse.hpp).
bool InferenceRewritesApply(const Net& net);
void PlainLayoutsForRewrites(Net* net);
void FoldIdentities(Net* net);
void FoldIntoProducers(Net* net);
// Net::DropBlobsNoStepUses where the rewrites applied: the values no step computes any more give their memory back.
void DropUnusedBlobs(Net* net);
// PlanLayouts (net/passes.hpp) where the rewrites applied.
void PlanLayoutsAfterRewrites(Net* net);

// The net as its steps run it, written as plain Caffe layers that BVLC Caffe and OpenCV's dnn module read (crema
// fold): each step's layer in order, a rewritten producer as its prototxt's layer with the folded weights and a bias
// (bias_term: true), then the sum and the activation fused into it as the layers they were, in place on its output;
// the steps that went do not appear, and readers of a Split's copies read the blob itself. Every layer carries its
// parameters (a .caffemodel); without the blobs it is the definition.
NetParameter FoldedNetParameter(const Net& net);

}  // namespace crema
