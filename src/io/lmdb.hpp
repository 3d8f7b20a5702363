// A small wrapper over LMDB, the key-value store that holds crema's (and Caffe's) data sets: one record per
// key, read in key order by data layers and written by the converters. The classes implement io/db.hpp's
// DbReader and DbWriter, and may also be used directly. Every failure raises a crema::Error naming the
// database path (and the key, where one is involved).
#pragma once

#include <lmdb.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/common.hpp"
#include "io/db.hpp"

namespace crema {

// Reads a database with a cursor that walks the keys in order.
//
// Several readers may be open on one database in one process, each on its own thread or all on one: they
// share one LMDB environment per path (LMDB forbids opening the same environment twice in a process, since
// closing one copy would drop the other's file locks) and each holds its own read-only transaction, which is
// not tied to the thread that began it (MDB_NOTLS). So a reader may be created on one thread and used on
// another, e.g. by a prefetch thread. A reader itself is not meant for concurrent use.
class LmdbReader : public DbReader {
 public:
  // Opens `path` (the directory holding data.mdb) and places the cursor on the first record.
  explicit LmdbReader(const std::string& path);
  ~LmdbReader() override;
  LmdbReader(const LmdbReader&) = delete;
  LmdbReader& operator=(const LmdbReader&) = delete;

  const std::string& path() const override { return path_; }
  // The number of records.
  size_t size() const override;

  void SeekToFirst() override;
  // Moves to the next record; past the last one the cursor is no longer Valid().
  void Next() override;
  // Moves to the record with exactly this key; throws naming the key and the path when there is none.
  void Seek(const std::string& key) override;
  // Whether the cursor points at a record (false for an empty database, or after the last record).
  bool Valid() const override { return valid_; }
  // The current record's key and value; only while Valid().
  std::string key() const override;
  std::string value() const override;

 private:
  struct Environment;
  // The shared environment of `path`, opened on first use (see the class comment).
  static std::shared_ptr<Environment> OpenEnvironment(const std::string& path);
  // Moves the cursor with `operation` (MDB_FIRST, MDB_NEXT, ...); false when no record is there.
  bool Move(MDB_cursor_op operation, MDB_val* key, MDB_val* value);

  std::string path_;
  std::shared_ptr<Environment> environment_;
  MDB_txn* transaction_ = nullptr;
  MDB_cursor* cursor_ = nullptr;
  MDB_val key_{0, nullptr};
  MDB_val value_{0, nullptr};
  bool valid_ = false;
};

// Writes a new database. Records are buffered and written in transactions of `batch_size` records; the map
// (LMDB's fixed upper bound on the database size) starts small and is doubled whenever it fills up, so no
// size needs to be guessed and no huge sparse file is created.
class LmdbWriter : public DbWriter {
 public:
  // Creates the directory `path`; throws when it already exists (a converter never overwrites a data set).
  explicit LmdbWriter(const std::string& path, size_t batch_size = 1000);
  // Commits what is still buffered (logging, not throwing, on failure; call Commit to see errors).
  ~LmdbWriter() override;
  LmdbWriter(const LmdbWriter&) = delete;
  LmdbWriter& operator=(const LmdbWriter&) = delete;

  void Put(const std::string& key, const std::string& value) override;
  // Writes every buffered record in one transaction.
  void Commit() override;
  // Records written so far (committed or still buffered).
  size_t records() const override { return records_; }

 private:
  std::string path_;
  MDB_env* environment_ = nullptr;
  size_t map_size_;
  size_t batch_size_;
  size_t records_ = 0;
  std::vector<std::pair<std::string, std::string>> pending_;
};

}  // namespace crema
