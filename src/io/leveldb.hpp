// LevelDB, the key-value store Caffe writes by default (a Data layer's `backend` is LEVELDB unless set), behind
// io/db.hpp's reader and writer. A LevelDB database is a directory holding CURRENT, a MANIFEST, logs and
// sorted tables. Every failure raises a crema::Error naming the path (and the key, where one is involved).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "io/db.hpp"

namespace leveldb {
class DB;
class Iterator;
class Snapshot;
class WriteBatch;
}  // namespace leveldb

namespace crema {

// Reads a database with a cursor that walks the keys in order, over a snapshot taken when the reader opens.
//
// LevelDB allows one open handle per database directory in a process (the handle holds the directory's LOCK
// file), so the readers of one path share one handle, opened by the first and closed by the last. The handle
// is safe for concurrent use; each reader has its own snapshot and iterator. So several readers of one path
// may run at once, each on its own thread, and a reader may be created on one thread and used on another
// (e.g. by a prefetch thread). A reader itself is not meant for concurrent use.
//
// Opening a LevelDB takes its lock and starts a new log even to read it, so the directory must be writable.
class LevelDbReader : public DbReader {
 public:
  // Opens `path` (the directory holding CURRENT) and places the cursor on the first record.
  explicit LevelDbReader(const std::string& path);
  ~LevelDbReader() override;
  LevelDbReader(const LevelDbReader&) = delete;
  LevelDbReader& operator=(const LevelDbReader&) = delete;

  const std::string& path() const override { return path_; }
  // LevelDB keeps no record count: the first call counts the snapshot's records (one pass over the keys) and
  // remembers the number, which the snapshot keeps true.
  size_t size() const override;

  void SeekToFirst() override;
  void Next() override;
  void Seek(const std::string& key) override;
  bool Valid() const override { return valid_; }
  std::string key() const override;
  std::string value() const override;

 private:
  // After a move that left the iterator on no record: throws if that was an error rather than the end.
  void CheckIterator() const;
  // Deletes the iterator and releases the snapshot, which must both go before the handle does.
  void ReleaseIterator();

  std::string path_;
  // Shared with the other readers of this path (see the class comment).
  std::shared_ptr<leveldb::DB> database_;
  const leveldb::Snapshot* snapshot_ = nullptr;
  std::unique_ptr<leveldb::Iterator> iterator_;
  // Our own flag rather than the iterator's: a failed Seek leaves the iterator on the next key, not on none.
  bool valid_ = false;
  mutable std::optional<size_t> size_;
};

// Writes a new database, `batch_size` records per write batch; each batch is written durably (synced), as an
// LMDB transaction is.
class LevelDbWriter : public DbWriter {
 public:
  // Creates the directory `path`; throws when it already exists (a converter never overwrites a data set).
  explicit LevelDbWriter(const std::string& path, size_t batch_size = 1000);
  // Writes what is still buffered (logging, not throwing, on failure; call Commit to see errors).
  ~LevelDbWriter() override;
  LevelDbWriter(const LevelDbWriter&) = delete;
  LevelDbWriter& operator=(const LevelDbWriter&) = delete;

  void Put(const std::string& key, const std::string& value) override;
  void Commit() override;
  size_t records() const override { return records_; }

 private:
  std::string path_;
  std::unique_ptr<leveldb::DB> database_;
  std::unique_ptr<leveldb::WriteBatch> batch_;
  size_t batch_size_;
  size_t pending_ = 0;
  size_t records_ = 0;
};

}  // namespace crema
