// ImageDataLayer ("ImageData"): reads image files named in a list and produces batches: top 0 the transformed
// images {batch_size, C, H', W'}, top 1 the labels {batch_size}. At the end of the list it starts again from
// the first line.
//
// image_data_param: source (a text file of lines "path label": the label is the last field, an integer, and
// the path everything before it, so paths may hold spaces; blank lines are skipped; as in Caffe, a line without
// a label gets 0 and a label like "3.7" reads as its leading integer, each with a warning once per list), root_folder (prepended
// to every path as it is), batch_size (1), rand_skip (skip a random number of lines, 0 to rand_skip - 1, at
// the start), shuffle (false: the order of the lines, drawn from the layer's random stream at set-up and
// again at every pass over the list), new_height / new_width (both 0, or both positive: every image is resized
// to that size, bilinearly), is_color (true: 3 channels B, G, R; false: 1 grey channel). Its deprecated scale /
// mean_file / crop_size / mirror are used where transform_param leaves those fields unset. transform_param:
// crop, mirror, mean and scale through DataTransformer (crops and mirrors drawn from the layer's stream).
//
// Images are decoded with OpenCV (src/io/image_io). The images of one batch must have the same size (resize
// them, or use batch_size 1); the tops take the shape of each batch's first image.
//
// Runtime state (exact resume): the line order (when shuffling) and the position of the next line
// (cursor_key, as text), the lines read (records_read) and the random stream (shuffles, crops, mirrors).
//
// Data parallelism: on replica r of N, each batch is part r of a global batch of N * batch_size consecutive
// lines, as for Data.
//
// Differences from Caffe: images are read in Forward, without a prefetch thread; mirroring happens only in
// TRAIN (as in Data); a label with no leading integer ("cat", which Caffe's atoi reads as 0) is an error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/data_transformer.hpp"
#include "io/image_set.hpp"
#include "layers/layer.hpp"

namespace crema {

class ImageDataLayer : public HostDataLayer {
 public:
  using HostDataLayer::HostDataLayer;

  // Checks the parameters, reads the list, shuffles and skips, and shapes the tops from the first image.
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // The tops are shaped in LayerSetUp and, should a batch's shape differ, in Forward.
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}

  const char* type() const override { return "ImageData"; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }

  void SaveRuntimeState(LayerRuntimeState* state) const override;
  // Throws naming the layer and the list when the state does not fit the list.
  void RestoreRuntimeState(const LayerRuntimeState& state) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 private:
  TransformationParameter MergedTransformParam() const;
  // The image of the line at the cursor; errors name the file and the list line.
  Datum CurrentDatum() const;
  void Advance();

  std::vector<ImageListEntry> lines_;
  std::unique_ptr<DataTransformer> transformer_;
  int batch_size_ = 0;
  bool shuffle_ = false;
  Replica replica_;

  // The next line is lines_[order_[position_]] (lines_[position_] when not shuffling).
  std::vector<int> order_;
  int position_ = 0;
  uint64_t records_read_ = 0;
};

}  // namespace crema
