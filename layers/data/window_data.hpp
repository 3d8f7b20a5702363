// WindowDataLayer ("WindowData"), R-CNN's data layer: samples windows (boxes) of images listed in a window
// file and produces batches: top 0 the cropped windows {batch_size, C, crop_size, crop_size}, top 1 their
// labels {batch_size}.
//
// The window file (window_data_param.source) is a sequence of blocks, one per image, each item on its own line
// (blank lines are skipped):
//   # <image_index>            0, 1, 2, ... in order
//   <image path>               relative to root_folder, which is prepended as it is
//   <channels>                 1 or 3, the same for every image
//   <height>
//   <width>
//   <number of windows>
//   <class_index> <overlap> <x1> <y1> <x2> <y2>     one line per window; corners inclusive, 0-based pixels
// A window whose overlap is >= fg_threshold is foreground (label: its class, which must be positive); one whose
// overlap is < bg_threshold is background (label 0); the others are not used.
//
// window_data_param: source, root_folder (""), batch_size, fg_threshold (0.5), bg_threshold (0.5), fg_fraction
// (0.25: each batch holds int(fg_fraction * batch_size) foreground windows, truncated as in Caffe, then the
// rest background; background windows come first in the batch, as in Caffe), context_pad (0: the window is
// enlarged so that, once warped, context_pad pixels of its surroundings lie on each side), crop_mode ("warp":
// the window is stretched to crop_size x crop_size; "square": the tightest square around it is), cache_images
// (false: keep every image file's encoded bytes in memory, read at set-up), and the deprecated crop_size /
// mirror / mean_file / scale, used where transform_param leaves those fields unset. transform_param:
// crop_size (required, > 2 * context_pad), mirror (at random, only in TRAIN), mean_file (a 1xCxHxW
// .binaryproto with H, W >= crop_size; its centre crop_size x crop_size part is subtracted) or mean_value
// (one value or one per channel), scale (applied after the mean).
// Where the enlarged window leaves the image the output is 0 (the mean, before it is subtracted).
//
// Each window is drawn uniformly from its set, from the layer's own random stream: per window the index, then
// (mirror in TRAIN) the mirror coin. Images are decoded with OpenCV (src/io/image_io), 3 channels B, G, R or
// 1 grey channel as the window file says, and cropped and resized there (bilinear).
//
// Runtime state (exact resume): the random stream (every draw) and the number of windows drawn (records_read).
// Sampling has no cursor, so a layer restored from a state saved after k batches returns the same batches as
// the one that saved it.
//
// Differences from Caffe: windows are read in Forward, without a prefetch thread; mirroring happens only in
// TRAIN; transform_param.scale is used when set (Caffe reads only window_data_param.scale); the window file is
// checked line by line (image indexes in order, sizes positive, windows inside the image, foreground labels
// positive, one channel count) and errors name the line; an image whose size differs from the file's is an
// error; a 1-channel window file reads grey images (Caffe always decodes colour); a batch that needs windows
// of a set that is empty is an error at set-up; the mean file's centre is taken per axis.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layers/layer.hpp"

namespace crema {

class WindowDataLayer : public HostDataLayer {
 public:
  using HostDataLayer::HostDataLayer;

  // Checks the parameters, reads the window file (and, with cache_images, the images) and the mean, and
  // shapes the tops.
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}

  const char* type() const override { return "WindowData"; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }

  void SaveRuntimeState(LayerRuntimeState* state) const override;
  // Throws naming the layer when the state belongs to another layer or has no random stream.
  void RestoreRuntimeState(const LayerRuntimeState& state) override;

  size_t num_foreground() const { return foreground_.size(); }
  size_t num_background() const { return background_.size(); }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 private:
  struct Image {
    std::string path;  // root_folder + the path in the file
    int height = 0, width = 0;
    int line = 0;         // the line of its path
    std::string encoded;  // the file's bytes (cache_images)
  };
  struct Window {
    int image = 0;
    int label = 0;
    int x1 = 0, y1 = 0, x2 = 0, y2 = 0;
    int line = 0;
  };

  void ReadWindowFile();
  void LoadMean();
  // Writes window `window` (mirrored or not) into `out`, channels x crop_size x crop_size, zeroed first.
  void WriteWindow(const Window& window, bool mirror, float* out) const;

  std::vector<Image> images_;
  std::vector<Window> foreground_, background_;
  int channels_ = 0;
  int batch_size_ = 0;
  int num_foreground_ = 0;  // per batch
  int crop_size_ = 0;
  int context_pad_ = 0;
  bool square_ = false;
  bool mirror_ = false;
  float scale_ = 1.f;
  std::vector<float> mean_;  // mean_file: channels x mean_height_ x mean_width_; mean_value: one per channel
  int mean_height_ = 0, mean_width_ = 0;
  bool mean_is_image_ = false;
  uint64_t windows_drawn_ = 0;
};

}  // namespace crema
