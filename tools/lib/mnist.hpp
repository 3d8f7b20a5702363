// Reading the MNIST IDX format (also used by Fashion-MNIST) and converting a data set to a database (LMDB or
// LevelDB) of Datums.
//
// An IDX file is a big-endian header followed by raw bytes: images start with the magic number 2051, the
// image count, rows and columns, then count*rows*cols pixels; labels start with 2049 and the count, then one
// byte per label. Files may be gzipped or plain: zlib reads both. Errors name the file.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/common.hpp"

namespace crema {

struct MnistImages {
  int count = 0;
  int rows = 0;
  int columns = 0;
  // count*rows*columns bytes, image after image, each row-major.
  std::string pixels;
};

MnistImages ReadMnistImages(const std::string& path);
// One byte per label.
std::string ReadMnistLabels(const std::string& path);

// Which images a conversion writes, and under which labels.
struct MnistSelection {
  // The slice of the data set to consider: `count` images from `first` (-1: to the end).
  int first = 0;
  int count = -1;
  // When not empty, only images whose label is a key here are written, each under the label it maps to: a new
  // task made from some of the classes (tops against shoes, say, for fine-tuning).
  std::map<int, int> relabel;
  // At most this many records are written (-1: no limit).
  int64_t limit = -1;
};

// Parses a relabelling written as OLD:NEW pairs, comma-separated ("0:0,2:0,5:1"); throws naming the bad item.
std::map<int, int> ParseLabelMap(const std::string& text);

// Writes one Datum per selected image (channels 1, the file's height and width, the raw pixels as `data`, its
// label) to a new database of `backend` at `db_path`, under Caffe's keys (RecordKey: "00000000", ...), the
// first record written under key 0. Refuses to write over an existing path, and checks that both files hold the
// same number of items. Returns the number of records written.
int64_t ConvertMnist(const std::string& images_path, const std::string& labels_path, const std::string& db_path,
                     DataParameter::DB backend, const MnistSelection& selection = {});
// The same, to an LMDB.
inline int64_t ConvertMnistToLmdb(const std::string& images_path, const std::string& labels_path,
                                  const std::string& db_path, int first = 0, int count = -1) {
  MnistSelection selection;
  selection.first = first;
  selection.count = count;
  return ConvertMnist(images_path, labels_path, db_path, DataParameter::LMDB, selection);
}

}  // namespace crema
