// A set of image files named in a list, converted into a database of Datum records that a Data layer reads:
// convert_imageset's library, so that the tool stays a thin shell and tests can call each step.
//
// The list is Caffe's: one "path label" line per image, the path relative to a root folder that is prepended
// as it is (so "images/" wants its slash), the label the last whitespace-separated field (an integer), so
// paths may hold spaces. As in Caffe (atoi), a label is read as its leading integer ("3.7" and "3.0" as 3) and a
// line without one gets label 0, each with a warning once per list file; a label with no leading integer
// ("cat") is an error. Record i of the database (in list order, or shuffled) has Caffe's key
// "%08d_<path as listed>", i counted over the whole list, so that an image that cannot be read leaves a gap
// and does not move the others.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/common.hpp"

namespace crema {

struct ImageListEntry {
  std::string path;  // as written in the list, relative to the root folder
  int label = 0;
  int line = 0;  // its line number in the list file, from 1
};

// The entries of a list file. Blank lines are skipped, and surrounding blanks (and a CR of a CRLF file) are no
// part of the path. A line without a label gets label 0, a label that is not a whole number its leading integer,
// with one warning per file for each (naming the first such line), as Caffe reads them. Throws naming the file
// when it cannot be opened or names no image, and the file and the line when a label has no leading integer
// (or one that does not fit an int).
std::vector<ImageListEntry> ReadImageList(const std::string& list_path);

// Puts the entries in an order drawn from a stream seeded with `seed`: the same seed gives the same order.
void ShuffleImageList(uint64_t seed, std::vector<ImageListEntry>* entries);

// Caffe's key for record `index` of an image set: the index as 8 zero-padded digits, '_', the path as listed.
std::string ImageSetKey(int64_t index, const std::string& path);

// convert_imageset's flags (the same names and defaults as Caffe's).
struct ImageSetOptions {
  DataParameter::DB backend = DataParameter::LMDB;
  bool gray = false;                        // one grey channel (else three, B G R, also for a grey file)
  bool shuffle = false;                     // shuffle the list first (ShuffleImageList with shuffle_seed)
  uint64_t shuffle_seed = 1701;             // crema's addition: Caffe's shuffle is not reproducible
  int resize_height = 0, resize_width = 0;  // both positive: resize every image (bilinear); both 0: keep
  bool check_size = false;                  // every image must decode to one size; else an error
  bool encoded = false;                     // store the image files (encode_type below), not raw pixels
  std::string encode_type;                  // with encoded: re-encode as this ("png", "jpg"); implies encoded
  size_t transaction_size = 1000;           // records per transaction (and per "Processed N files." line)
};

struct SkippedImage {
  ImageListEntry entry;
  std::string reason;  // why it could not be read
};

struct ImageSetResult {
  int64_t listed = 0;                 // entries in the list
  int64_t records = 0;                // records written
  std::vector<SkippedImage> skipped;  // in the order they were met
};

// Reads the list, shuffles it when asked, and writes one record per image into a new database at db_path,
// logging Caffe's lines ("A total of N images.", "Processed N files." after every transaction). An image that
// is missing or cannot be decoded is logged as a warning naming the file and the list's line, and skipped.
// Throws (and leaves no database behind) when the options are inconsistent, the list is bad (see
// ReadImageList), db_path exists already, check_size finds two sizes (naming the file and both sizes), no
// image at all could be read, or OpenCV is missing from this build.
ImageSetResult ConvertImageSet(const std::string& root_folder, const std::string& list_path, const std::string& db_path,
                               const ImageSetOptions& options);

}  // namespace crema
