#include "io/leveldb.hpp"

#include <glog/logging.h>
#include <leveldb/db.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <leveldb/status.h>
#include <leveldb/write_batch.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "core/common.hpp"

namespace crema {

namespace {

// Checks, before LevelDB sees it, that `path` looks like a database directory, so the error says what is
// wrong in words rather than as LevelDB's complaint about a file inside.
void CheckIsDatabaseDirectory(const std::string& path) {
  struct stat info;
  CREMA_CHECK(stat(path.c_str(), &info) == 0) << "cannot open LevelDB '" << path << "': " << std::strerror(errno);
  CREMA_CHECK(S_ISDIR(info.st_mode)) << "cannot open LevelDB '" << path
                                     << "': it is a file, not a LevelDB directory (one holding CURRENT)";
  const std::string current = path + "/CURRENT";
  CREMA_CHECK(stat(current.c_str(), &info) == 0)
      << "cannot open LevelDB '" << path << "': the directory holds no CURRENT, so it is not a LevelDB database";
}

// The handles of the databases open for reading in this process, one per directory, counted by hand rather
// than through weak pointers: a handle is closed under the same lock under which one is opened, so a reader
// opening a path never meets the directory still locked by a handle that is being closed.
class OpenDatabases {
 public:
  std::shared_ptr<leveldb::DB> Acquire(const std::string& path) {
    CheckIsDatabaseDirectory(path);
    char resolved_path[PATH_MAX];
    CREMA_CHECK(realpath(path.c_str(), resolved_path) != nullptr)
        << "cannot open LevelDB '" << path << "': " << std::strerror(errno);
    const std::string resolved = resolved_path;

    leveldb::DB* shared = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto found = entries_.find(resolved);
      if (found == entries_.end()) {
        leveldb::Options options;
        options.create_if_missing = false;
        leveldb::DB* database = nullptr;
        const leveldb::Status status = leveldb::DB::Open(options, resolved, &database);
        if (!status.ok()) {
          const bool writable = access(resolved.c_str(), W_OK) == 0;
          CREMA_FAIL() << "cannot open LevelDB '" << path << "': " << status.ToString()
                       << (writable ? ""
                                    : " (LevelDB writes its lock and log even to read, so the directory must be "
                                      "writable; copy it somewhere writable or convert it to LMDB)");
        }
        found = entries_.emplace(resolved, Entry{database, 0}).first;
      }
      ++found->second.users;
      shared = found->second.database;
    }
    // Made outside the lock: should making it fail, the deleter runs at once, and it takes the lock.
    return std::shared_ptr<leveldb::DB>(shared, [this, resolved](leveldb::DB*) { Release(resolved); });
  }

 private:
  struct Entry {
    leveldb::DB* database;
    int users;
  };

  void Release(const std::string& resolved) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = entries_.find(resolved);
    CHECK(found != entries_.end()) << "LevelDB handle of '" << resolved << "' released but not open";
    if (--found->second.users > 0) return;
    delete found->second.database;
    entries_.erase(found);
  }

  std::mutex mutex_;
  std::map<std::string, Entry> entries_;
};

// Never destroyed, so readers that outlive main (in static objects) can still release their handles.
OpenDatabases& OpenDatabasesOfThisProcess() {
  static OpenDatabases* open_databases = new OpenDatabases;
  return *open_databases;
}

}  // namespace

// ---- reading ---------------------------------------------------------------------------------------------

LevelDbReader::LevelDbReader(const std::string& path)
    : path_(path), database_(OpenDatabasesOfThisProcess().Acquire(path)) {
  snapshot_ = database_->GetSnapshot();
  leveldb::ReadOptions options;
  options.snapshot = snapshot_;
  iterator_.reset(database_->NewIterator(options));
  try {
    SeekToFirst();
  } catch (...) {
    // No destructor runs for a constructor that throws, and the handle must not close under a live iterator.
    ReleaseIterator();
    throw;
  }
}

LevelDbReader::~LevelDbReader() { ReleaseIterator(); }

void LevelDbReader::ReleaseIterator() {
  iterator_.reset();  // an iterator must go before its snapshot, and both before the handle
  database_->ReleaseSnapshot(snapshot_);
  snapshot_ = nullptr;
}

size_t LevelDbReader::size() const {
  if (!size_) {
    leveldb::ReadOptions options;
    options.snapshot = snapshot_;
    options.fill_cache = false;  // one pass over everything: keep the cache for the records being read
    std::unique_ptr<leveldb::Iterator> counter(database_->NewIterator(options));
    size_t count = 0;
    for (counter->SeekToFirst(); counter->Valid(); counter->Next()) ++count;
    CREMA_CHECK(counter->status().ok()) << "cannot read LevelDB '" << path_ << "': " << counter->status().ToString();
    size_ = count;
  }
  return *size_;
}

void LevelDbReader::CheckIterator() const {
  CREMA_CHECK(iterator_->status().ok()) << "cannot read LevelDB '" << path_ << "': " << iterator_->status().ToString();
}

void LevelDbReader::SeekToFirst() {
  iterator_->SeekToFirst();
  valid_ = iterator_->Valid();
  if (!valid_) CheckIterator();
}

void LevelDbReader::Next() {
  CREMA_CHECK(valid_) << "LevelDB '" << path_ << "': Next() past the last record";
  iterator_->Next();
  valid_ = iterator_->Valid();
  if (!valid_) CheckIterator();
}

void LevelDbReader::Seek(const std::string& key) {
  // LevelDB seeks to the first key at or after `key`; only that exact key will do.
  iterator_->Seek(key);
  valid_ = iterator_->Valid() && iterator_->key() == leveldb::Slice(key);
  if (!iterator_->Valid()) CheckIterator();
  CREMA_CHECK(valid_) << "LevelDB '" << path_ << "' has no record with key '" << PrintableKey(key) << "'";
}

std::string LevelDbReader::key() const {
  CREMA_CHECK(valid_) << "LevelDB '" << path_ << "': no current record";
  return iterator_->key().ToString();
}

std::string LevelDbReader::value() const {
  CREMA_CHECK(valid_) << "LevelDB '" << path_ << "': no current record";
  return iterator_->value().ToString();
}

// ---- writing ---------------------------------------------------------------------------------------------

LevelDbWriter::LevelDbWriter(const std::string& path, size_t batch_size)
    : path_(path), batch_(std::make_unique<leveldb::WriteBatch>()), batch_size_(batch_size == 0 ? 1 : batch_size) {
  // The directory is made here, not by LevelDB, so that an existing one is refused whatever it holds.
  if (mkdir(path.c_str(), 0755) != 0) {
    CREMA_CHECK(errno != EEXIST) << "cannot create LevelDB '" << path
                                 << "': it already exists; remove it or choose another path";
    CREMA_FAIL() << "cannot create LevelDB '" << path << "': " << std::strerror(errno);
  }
  leveldb::Options options;
  options.create_if_missing = true;
  options.error_if_exists = true;
  leveldb::DB* database = nullptr;
  const leveldb::Status status = leveldb::DB::Open(options, path, &database);
  CREMA_CHECK(status.ok()) << "cannot create LevelDB '" << path << "': " << status.ToString();
  database_.reset(database);
}

LevelDbWriter::~LevelDbWriter() {
  try {
    Commit();
  } catch (const std::exception& error) {
    LOG(ERROR) << error.what();
  }
}

void LevelDbWriter::Put(const std::string& key, const std::string& value) {
  batch_->Put(key, value);
  ++pending_;
  ++records_;
  if (pending_ >= batch_size_) Commit();
}

void LevelDbWriter::Commit() {
  if (pending_ == 0) return;
  leveldb::WriteOptions options;
  options.sync = true;
  const leveldb::Status status = database_->Write(options, batch_.get());
  // The batch is gone either way, as LMDB's transaction is: a failed write is reported, not retried.
  batch_->Clear();
  pending_ = 0;
  CREMA_CHECK(status.ok()) << "cannot write LevelDB '" << path_ << "': " << status.ToString();
}

}  // namespace crema
