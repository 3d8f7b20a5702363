// The images batch inference (crema classify) reads, from any of the places a user keeps them, behind one
// cursor: a single image file, a folder of images, a list file of `path label` lines (what convert_imageset
// reads), or a database of Datum records (LMDB or LevelDB, what the converters write). Each item carries its
// key (the path, or the record's key) and, where the source knows it, its label.
//
// Items are only located here; LoadInputImage reads or decodes one and fits it to the net's input (channels,
// height, width), so that a caller can skip a single unreadable image and go on with the others.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/common.hpp"

namespace crema {

struct InputItem {
  // The path as listed (an image file, a folder's file, a list line's path) or the database record's key.
  std::string key;
  // The label the source gives (a list line's label, a Datum's label field); none when it gives none.
  std::optional<int> label;
  // Where the image is: a file to read ...
  std::string image_path;
  // ... or a database record, parsed; none (with `problem` saying why) when the record is not a Datum.
  std::optional<Datum> datum;
  std::string problem;
};

class InputSource {
 public:
  virtual ~InputSource() = default;
  // What the source is, for logs: "LMDB 'path' (10000 records)".
  virtual std::string Describe() const = 0;
  // The number of items (known before the first).
  virtual int64_t size() const = 0;
  // Whether the items are image files (so the net's input must have 1 or 3 channels) rather than records.
  virtual bool reads_image_files() const = 0;
  // Fills `item` with the next item; false past the last.
  virtual bool Next(InputItem* item) = 0;
};

struct InputSourceOptions {
  // The database's store; none: judged from the folder's files (LMDB's data.mdb, LevelDB's CURRENT).
  std::optional<DataParameter::DB> backend;
  // Prefixed to the relative paths of a list file (convert_imageset's ROOTFOLDER); empty: the paths as written,
  // relative to the current directory.
  std::string root_folder;
};

// Opens `path`, deciding what it is:
//   a folder holding a database (or any folder when options.backend is set): its records, in key order;
//   another folder: every file below it (subfolders included) with an image extension (.png, .jpg, .jpeg, .bmp,
//     .pgm, .ppm, .pbm, .pnm, .tif, .tiff, .webp, .jp2, .jpe, .dib, .sr, .ras, .exr, .hdr, .pic; any case),
//     sorted by path byte by byte, with no label;
//   a file with an image extension: that image alone, with no label;
//   any other file: a list file, one image a line: `path label` when the line's last space-separated word is an
//     integer (paths may hold spaces), else the whole line is the path and the label is unknown; blank lines
//     are skipped.
// Throws naming the path when it does not exist, or when the folder, list or database holds no image.
std::unique_ptr<InputSource> OpenInputSource(const std::string& path, const InputSourceOptions& options = {});

// Whether the file name ends in one of the image extensions above.
bool HasImageExtension(const std::string& path);

// The item as a raw Datum of exactly channels x height x width, its label kept where known: an image file is
// decoded as grey (1 channel) or colour (3, in B, G, R order); an encoded record likewise; a raw 8-bit record must
// have `channels` channels. An image or 8-bit record of another size is resized (bilinear) to height x width; a
// record of float values must have the size already. Throws naming the item's key when it cannot be read, decoded
// or fitted.
Datum LoadInputImage(const InputItem& item, int channels, int height, int width);

}  // namespace crema
