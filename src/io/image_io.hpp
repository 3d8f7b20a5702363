// Images to Datums, with OpenCV kept inside src/io: reading an image file (ImageData) and decoding an encoded
// Datum (a Data set whose records hold PNG or JPEG bytes). The result is a raw Datum: `data` holds
// channels x height x width bytes, channel-major, channels in OpenCV's order (B, G, R for colour images, as in
// Caffe), ready for DataTransformer.
#pragma once

#include <string>

#include "core/common.hpp"

namespace crema {

// Whether this crema can decode and encode images: false in a build without OpenCV (CMake option
// CREMA_USE_OPENCV=OFF, as the relocatable bundle is built), where every function below except a raw Datum's
// DecodeDatum throws a crema::Error saying so.
bool ImageCodecsAvailable();

// How to decode: as stored (1 or 3 channels, whichever the file has), always 3 channels, or always 1.
enum class ImageColor { kAsStored, kColor, kGray };

// Reads the image at `path` into a Datum with `label`; when new_height and new_width are both positive the image
// is first resized to that size (bilinear). Throws naming the path when the file is missing or not an image
// OpenCV can decode.
Datum ReadImageToDatum(const std::string& path, int label, int new_height, int new_width, ImageColor color);

// The raw Datum of an encoded one (its label kept); a raw Datum is returned unchanged. Throws when the bytes
// are not an image OpenCV can decode.
Datum DecodeDatum(const Datum& datum, ImageColor color);

// The region of rows y1..y2 and columns x1..x2 (inclusive) of a raw 8-bit Datum, resized to out_height x
// out_width with OpenCV's bilinear interpolation (INTER_LINEAR, the region taken as an image of its own) and,
// when `mirror`, flipped left-right; a raw Datum of that size, its label kept. Throws when the region is empty
// or leaves the image, or the output size is not positive.
Datum CropResizeDatum(const Datum& image, int x1, int y1, int x2, int y2, int out_height, int out_width, bool mirror);

// The size of a decoded image.
struct ImageShape {
  int channels = 0, height = 0, width = 0;
};

// Reads the image at `path` as ReadImageToDatum does (decoded per `color`, resized bilinearly when new_height and
// new_width are both positive) and stores it encoded: a Datum with `encoded: true`, `label`, and as `data` the
// file's own bytes when they already hold that image (nothing resized, the file's channels are the ones `color`
// asks for, and `format` is empty or the format the file's extension names), else the image encoded as `format`
// ("png", ".jpg", ...; the file's extension when empty). Like Caffe's encoded records it leaves channels, height
// and width unset; *shape (when given) gets the decoded image's size. Throws naming the path when the file is
// missing or not an image OpenCV can decode, and when it must be re-encoded but no format is given and its name
// has no extension.
Datum ReadImageToEncodedDatum(const std::string& path, int label, int new_height, int new_width, ImageColor color,
                              const std::string& format, ImageShape* shape = nullptr);

// Whether OpenCV can write files of `format` ("png", ".jpg", "JPEG"; any case, with or without the dot).
bool CanEncodeImageFormat(const std::string& format);

// Encodes an 8-bit image of height x width x channels bytes (interleaved, B G R for 3 channels) as a file of
// the format `extension` names (".png", ".jpg"); for tests and converters.
std::string EncodeImage(const std::string& extension, const unsigned char* pixels, int height, int width, int channels);

}  // namespace crema
