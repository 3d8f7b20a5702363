// Reading the MNIST IDX format (also used by Fashion-MNIST) and converting a data set to a database (LMDB or
// LevelDB) of Datums.
//
// An IDX file is a big-endian header followed by raw bytes: images start with the magic number 2051, the
// image count, rows and columns, then count*rows*cols pixels; labels start with 2049 and the count, then one
// byte per label. Files may be gzipped or plain: zlib reads both. Errors name the file.
#pragma once

#include <cstdint>
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

// Writes one Datum per image (channels 1, the file's height and width, the raw pixels as `data`, its label)
// to a new database of `backend` at `db_path`, under Caffe's keys (RecordKey: "00000000", ...). Refuses to
// write over an existing path, and checks that both files hold the same number of items. With `first` and
// `count` (-1: to the end) only that slice of the data set is written, its first record under key 0. Returns
// the number of records written.
int64_t ConvertMnist(const std::string& images_path, const std::string& labels_path, const std::string& db_path,
                     DataParameter::DB backend, int first = 0, int count = -1);
// The same, to an LMDB.
inline int64_t ConvertMnistToLmdb(const std::string& images_path, const std::string& labels_path,
                                  const std::string& db_path, int first = 0, int count = -1) {
  return ConvertMnist(images_path, labels_path, db_path, DataParameter::LMDB, first, count);
}

}  // namespace crema
