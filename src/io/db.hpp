// The key-value stores that hold data sets (LMDB and LevelDB, the two Caffe writes), behind one interface: a
// reader with a cursor that walks the keys in order, and a writer for new databases. The Data layer and the
// converters open one by backend and path and need not know which store it is. The backend is the schema's
// DataParameter::DB, the field a prototxt sets (`backend: LMDB`).
//
// Both stores allow several readers of one path in one process, each with its own cursor, on one thread or
// several; a single reader is not meant for concurrent use. Every failure raises a crema::Error naming the
// path (and the key, where one is involved).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/common.hpp"

namespace crema {

// A key as it may appear in an error message: printable bytes as they are, others as \xNN.
std::string PrintableKey(const std::string& key);

// Caffe's key for record `index` of a converted data set: the index as 8 zero-padded digits ("00000042"), so
// that the stores' byte-wise key order is the record order.
std::string RecordKey(int64_t index);

// The store's name in messages: "LMDB" or "LevelDB".
const char* DbBackendName(DataParameter::DB backend);
// The backend a command-line flag names: "lmdb" or "leveldb" (any case); throws naming both otherwise.
DataParameter::DB ParseDbBackend(const std::string& name);
// Which store the directory `path` holds, judged by the file each always has (LMDB's data.mdb, LevelDB's
// CURRENT); none when it is neither (or missing), which opening it then reports in detail.
std::optional<DataParameter::DB> DetectDbBackend(const std::string& path);

class DbReader {
 public:
  virtual ~DbReader() = default;

  virtual const std::string& path() const = 0;
  // The number of records.
  virtual size_t size() const = 0;

  virtual void SeekToFirst() = 0;
  // Moves to the next record; past the last one the cursor is no longer Valid().
  virtual void Next() = 0;
  // Moves to the record with exactly this key; throws naming the key and the path when there is none.
  virtual void Seek(const std::string& key) = 0;
  // Whether the cursor points at a record (false for an empty database, or after the last record).
  virtual bool Valid() const = 0;
  // The current record's key and value; only while Valid().
  virtual std::string key() const = 0;
  virtual std::string value() const = 0;
};

class DbWriter {
 public:
  // Writes what is still buffered (see the implementations).
  virtual ~DbWriter() = default;

  virtual void Put(const std::string& key, const std::string& value) = 0;
  // Writes every buffered record.
  virtual void Commit() = 0;
  // Records written so far (committed or still buffered).
  virtual size_t records() const = 0;
};

// Opens the database at `path` with its cursor on the first record.
std::unique_ptr<DbReader> OpenDbReader(DataParameter::DB backend, const std::string& path);
// Creates a new database at `path`, writing `batch_size` records at a time; throws when `path` exists (a
// converter never overwrites a data set).
std::unique_ptr<DbWriter> CreateDbWriter(DataParameter::DB backend, const std::string& path, size_t batch_size = 1000);

}  // namespace crema
