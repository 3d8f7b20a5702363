#include "io/lmdb.hpp"

#include <glog/logging.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "core/common.hpp"

namespace crema {

namespace {

// The first map size of a new database; it doubles on MDB_MAP_FULL.
constexpr size_t kInitialMapSize = size_t{64} << 20;

void CheckLmdb(int status, const std::string& what) {
  CREMA_CHECK(status == MDB_SUCCESS) << what << ": " << mdb_strerror(status);
}

// Checks, before LMDB sees it, that `path` looks like a database directory, so the error says what is wrong
// in words rather than as LMDB's errno for a file it failed to open inside.
void CheckIsDatabaseDirectory(const std::string& path) {
  struct stat info;
  CREMA_CHECK(stat(path.c_str(), &info) == 0) << "cannot open LMDB '" << path << "': " << std::strerror(errno);
  CREMA_CHECK(S_ISDIR(info.st_mode)) << "cannot open LMDB '" << path
                                     << "': it is a file, not an LMDB directory (one holding data.mdb)";
  const std::string data_file = path + "/data.mdb";
  CREMA_CHECK(stat(data_file.c_str(), &info) == 0)
      << "cannot open LMDB '" << path << "': the directory holds no data.mdb, so it is not an LMDB database";
}

// Why a write to the database at `path` failed, in words. LMDB reports a short write (what a full disk gives)
// as "Input/output error", so a file system left with almost no room is taken to be the cause.
std::string WriteFailure(int status, const std::string& path) {
  struct statvfs space;
  const bool nearly_full = statvfs(path.c_str(), &space) == 0 &&
                           static_cast<unsigned long long>(space.f_bavail) * space.f_frsize < (1ull << 20);
  if (status == ENOSPC || (status == EIO && nearly_full)) return std::strerror(ENOSPC);
  return mdb_strerror(status);
}

}  // namespace

// ---- reading ---------------------------------------------------------------------------------------------

struct LmdbReader::Environment {
  MDB_env* handle = nullptr;
  MDB_dbi database = 0;
  ~Environment() {
    if (handle != nullptr) mdb_env_close(handle);
  }
};

std::shared_ptr<LmdbReader::Environment> LmdbReader::OpenEnvironment(const std::string& path) {
  CheckIsDatabaseDirectory(path);
  char resolved[PATH_MAX];
  CREMA_CHECK(realpath(path.c_str(), resolved) != nullptr)
      << "cannot open LMDB '" << path << "': " << std::strerror(errno);

  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<Environment>> open_environments;
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<Environment> environment = open_environments[resolved].lock();
  if (environment) return environment;

  environment = std::make_shared<Environment>();
  // MDB_NOTLS: read transactions belong to the reader, not to the thread that began them.
  unsigned int flags = MDB_RDONLY | MDB_NOTLS;
  int status = MDB_SUCCESS;
  for (int attempt = 0; attempt < 2; ++attempt) {
    CheckLmdb(mdb_env_create(&environment->handle), "cannot create an LMDB environment for '" + path + "'");
    status = mdb_env_open(environment->handle, resolved, flags, 0664);
    if (status == MDB_SUCCESS) break;
    mdb_env_close(environment->handle);  // a failed open leaves a handle that must be discarded
    environment->handle = nullptr;
    // A directory we may not write (a shared data set, a read-only mount) cannot hold our lock.mdb; read it
    // without LMDB's locking, as such data sets are read (no writer may run there meanwhile).
    if ((status == EACCES || status == EROFS) && !(flags & MDB_NOLOCK)) {
      flags |= MDB_NOLOCK;
      continue;
    }
    break;
  }
  CREMA_CHECK(status != MDB_INVALID) << "cannot open LMDB '" << path
                                     << "': its data.mdb is not an LMDB file (damaged, or something else)";
  CREMA_CHECK(status != MDB_VERSION_MISMATCH)
      << "cannot open LMDB '" << path << "': it was written by an incompatible LMDB version";
  CheckLmdb(status, "cannot open LMDB '" + path + "'");

  // The database handle is opened once per environment: LMDB forbids opening it from concurrent transactions.
  MDB_txn* transaction = nullptr;
  CheckLmdb(mdb_txn_begin(environment->handle, nullptr, MDB_RDONLY, &transaction), "cannot read LMDB '" + path + "'");
  const int opened = mdb_dbi_open(transaction, nullptr, 0, &environment->database);
  if (opened != MDB_SUCCESS) mdb_txn_abort(transaction);
  CheckLmdb(opened, "cannot read LMDB '" + path + "'");
  CheckLmdb(mdb_txn_commit(transaction), "cannot read LMDB '" + path + "'");

  open_environments[resolved] = environment;
  return environment;
}

LmdbReader::LmdbReader(const std::string& path) : path_(path), environment_(OpenEnvironment(path)) {
  CheckLmdb(mdb_txn_begin(environment_->handle, nullptr, MDB_RDONLY, &transaction_),
            "cannot read LMDB '" + path_ + "'");
  const int opened = mdb_cursor_open(transaction_, environment_->database, &cursor_);
  if (opened != MDB_SUCCESS) {
    mdb_txn_abort(transaction_);
    CheckLmdb(opened, "cannot read LMDB '" + path_ + "'");
  }
  SeekToFirst();
}

LmdbReader::~LmdbReader() {
  if (cursor_ != nullptr) mdb_cursor_close(cursor_);
  if (transaction_ != nullptr) mdb_txn_abort(transaction_);
}

size_t LmdbReader::size() const {
  MDB_stat statistics;
  CheckLmdb(mdb_stat(transaction_, environment_->database, &statistics), "cannot read LMDB '" + path_ + "'");
  return statistics.ms_entries;
}

bool LmdbReader::Move(MDB_cursor_op operation, MDB_val* key, MDB_val* value) {
  const int status = mdb_cursor_get(cursor_, key, value, operation);
  if (status == MDB_NOTFOUND) return false;
  CheckLmdb(status, "cannot read LMDB '" + path_ + "'");
  return true;
}

void LmdbReader::SeekToFirst() { valid_ = Move(MDB_FIRST, &key_, &value_); }

void LmdbReader::Next() {
  CREMA_CHECK(valid_) << "LMDB '" << path_ << "': Next() past the last record";
  valid_ = Move(MDB_NEXT, &key_, &value_);
}

void LmdbReader::Seek(const std::string& key) {
  MDB_val wanted{key.size(), const_cast<char*>(key.data())};
  valid_ = Move(MDB_SET_KEY, &wanted, &value_);
  CREMA_CHECK(valid_) << "LMDB '" << path_ << "' has no record with key '" << PrintableKey(key) << "'";
  key_ = wanted;  // MDB_SET_KEY points the key at the database's copy
}

std::string LmdbReader::key() const {
  CREMA_CHECK(valid_) << "LMDB '" << path_ << "': no current record";
  return std::string(static_cast<const char*>(key_.mv_data), key_.mv_size);
}

std::string LmdbReader::value() const {
  CREMA_CHECK(valid_) << "LMDB '" << path_ << "': no current record";
  return std::string(static_cast<const char*>(value_.mv_data), value_.mv_size);
}

// ---- writing ---------------------------------------------------------------------------------------------

LmdbWriter::LmdbWriter(const std::string& path, size_t batch_size)
    : path_(path), map_size_(kInitialMapSize), batch_size_(batch_size == 0 ? 1 : batch_size) {
  if (mkdir(path.c_str(), 0755) != 0) {
    CREMA_CHECK(errno != EEXIST) << "cannot create LMDB '" << path
                                 << "': it already exists; remove it or choose another path";
    CREMA_FAIL() << "cannot create LMDB '" << path << "': " << std::strerror(errno);
  }
  CheckLmdb(mdb_env_create(&environment_), "cannot create LMDB '" + path + "'");
  int status = mdb_env_set_mapsize(environment_, map_size_);
  if (status == MDB_SUCCESS) status = mdb_env_open(environment_, path.c_str(), 0, 0664);
  if (status != MDB_SUCCESS) {
    mdb_env_close(environment_);
    environment_ = nullptr;
    CheckLmdb(status, "cannot create LMDB '" + path + "'");
  }
}

LmdbWriter::~LmdbWriter() {
  if (environment_ == nullptr) return;  // a write failed, and the database is gone
  try {
    Commit();
  } catch (const std::exception& error) {
    LOG(ERROR) << error.what();
  }
  if (environment_ != nullptr) mdb_env_close(environment_);
}

void LmdbWriter::Put(const std::string& key, const std::string& value) {
  pending_.emplace_back(key, value);
  ++records_;
  if (pending_.size() >= batch_size_) Commit();
}

void LmdbWriter::Commit() {
  CREMA_CHECK(environment_ != nullptr || pending_.empty())
      << "cannot write LMDB '" << path_ << "': an earlier write failed and the database was removed";
  if (pending_.empty()) return;
  // Writes the whole batch in one transaction; returns LMDB's status (the transaction is gone either way).
  auto write_batch = [this]() {
    MDB_txn* transaction = nullptr;
    int status = mdb_txn_begin(environment_, nullptr, 0, &transaction);
    if (status != MDB_SUCCESS) return status;
    MDB_dbi database;
    status = mdb_dbi_open(transaction, nullptr, 0, &database);
    for (size_t i = 0; i < pending_.size() && status == MDB_SUCCESS; ++i) {
      MDB_val key{pending_[i].first.size(), const_cast<char*>(pending_[i].first.data())};
      MDB_val value{pending_[i].second.size(), const_cast<char*>(pending_[i].second.data())};
      status = mdb_put(transaction, database, &key, &value, 0);
    }
    if (status != MDB_SUCCESS) {
      mdb_txn_abort(transaction);
      return status;
    }
    return mdb_txn_commit(transaction);
  };
  for (;;) {
    const int status = write_batch();
    if (status == MDB_SUCCESS) break;
    if (status != MDB_MAP_FULL) {
      // The database is incomplete and no later write can mend it: it is removed (this writer created it), and
      // the destructor, finding no environment, neither retries the batch nor reports the failure again.
      const std::string reason = WriteFailure(status, path_);
      mdb_env_close(environment_);
      environment_ = nullptr;
      pending_.clear();
      for (const char* file : {"/data.mdb", "/lock.mdb"}) unlink((path_ + file).c_str());
      const bool removed = rmdir(path_.c_str()) == 0;
      CREMA_FAIL() << "cannot write LMDB '" << path_ << "': " << reason
                   << (removed ? " (the incomplete database was removed)" : "");
    }
    // The map is full: grow it (allowed now that no transaction is open) and write the batch again.
    map_size_ *= 2;
    CheckLmdb(mdb_env_set_mapsize(environment_, map_size_), "cannot grow LMDB '" + path_ + "'");
  }
  pending_.clear();
}

}  // namespace crema
