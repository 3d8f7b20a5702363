// DataTransformer: turns one Datum (a C x H x W record of a data set) into the floats a data layer hands to
// the net, applying TransformationParameter in this order:
//   1. crop to crop_size x crop_size: at a random offset in TRAIN, at the centre in TEST;
//   2. mirror left-right: at random (probability 1/2), only in TRAIN and only when `mirror` is set;
//   3. subtract the mean: mean_file (a BlobProto .binaryproto of shape 1xCxHxW, the size of the uncropped
//      datum, so the crop's own part of it is subtracted) or mean_value (one for every channel, or one per
//      channel);
//   4. multiply by scale.
// An encoded Datum (encoded: true, `data` holding a PNG or JPEG file) is decoded first with OpenCV
// (src/io/image_io): to 3 channels with force_color, to 1 with force_gray, else as stored; the decoded image's
// size is the datum's (its channels/height/width fields are not read). force_color and force_gray do not
// change raw Datums.
// Random draws come from the RandomStream passed in, so the caller decides whose stream it is and can save
// and restore it for an exact resume. Per datum in TRAIN, the stream is drawn from in a fixed order: the crop
// rows offset, the crop columns offset (both only when cropping), then the mirror coin (only with mirror).
#pragma once

#include <string>
#include <vector>

#include "core/blob.hpp"
#include "core/common.hpp"
#include "core/random.hpp"

namespace crema {

class DataTransformer {
 public:
  // Loads mean_file now (once) and checks the parameter's own consistency; errors name the field or file.
  DataTransformer(const TransformationParameter& param, Phase phase);

  // The raw Datum of `datum`: decoded when it is encoded (see above), else `datum` itself. A caller that needs
  // both the shape and the values decodes once with this and passes the result to both.
  Datum Decode(const Datum& datum) const;

  // The shape {C, H', W'} that Transform writes for `datum` (H' = W' = crop_size when cropping). Checks the
  // datum against the parameter (crop larger than the image, mean shape or mean_value count), so calling it
  // on a data set's first record finds configuration errors when the net is built.
  std::vector<int> InferBlobShape(const Datum& datum) const;

  // Writes the C*H'*W' transformed values of `datum` to `out`. `random` may be null only when nothing is
  // random (TEST phase, or neither crop nor mirror).
  void Transform(const Datum& datum, float* out, RandomStream* random) const;
  // The same into a blob of shape {C, H', W'} or {1, C, H', W'}.
  void Transform(const Datum& datum, Blob* out, RandomStream* random) const;

  const TransformationParameter& param() const { return param_; }

 private:
  // Checks the datum's own fields and its fit to the parameter; returns {C, H, W} of the uncropped datum.
  std::vector<int> CheckDatum(const Datum& datum) const;

  TransformationParameter param_;
  Phase phase_;
  // The mean image (mean_file), C*H*W values, and its shape {C, H, W}.
  std::vector<float> mean_;
  std::vector<int> mean_shape_;
};

}  // namespace crema
