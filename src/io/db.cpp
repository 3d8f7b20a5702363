#include "io/db.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "io/leveldb.hpp"
#include "io/lmdb.hpp"

namespace crema {

std::string PrintableKey(const std::string& key) {
  std::string printable;
  for (unsigned char c : key) {
    if (std::isprint(c) && c != '\\') {
      printable += static_cast<char>(c);
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", c);
      printable += escaped;
    }
  }
  return printable;
}

std::string RecordKey(int64_t index) {
  char key[24];
  std::snprintf(key, sizeof(key), "%08lld", static_cast<long long>(index));
  return key;
}

const char* DbBackendName(DataParameter::DB backend) { return backend == DataParameter::LMDB ? "LMDB" : "LevelDB"; }

DataParameter::DB ParseDbBackend(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "lmdb") return DataParameter::LMDB;
  if (lower == "leveldb") return DataParameter::LEVELDB;
  CREMA_FAIL() << "unknown database backend '" << name << "'; use lmdb or leveldb";
  return DataParameter::LMDB;  // not reached: the line above throws
}

std::optional<DataParameter::DB> DetectDbBackend(const std::string& path) {
  auto exists = [&path](const char* file) {
    struct stat info;
    return stat((path + "/" + file).c_str(), &info) == 0;
  };
  const bool lmdb = exists("data.mdb"), leveldb = exists("CURRENT");
  if (lmdb == leveldb) return std::nullopt;  // neither, or (oddly) both: let opening it as declared decide
  return lmdb ? DataParameter::LMDB : DataParameter::LEVELDB;
}

std::unique_ptr<DbReader> OpenDbReader(DataParameter::DB backend, const std::string& path) {
  if (backend == DataParameter::LMDB) return std::make_unique<LmdbReader>(path);
  return std::make_unique<LevelDbReader>(path);
}

std::unique_ptr<DbWriter> CreateDbWriter(DataParameter::DB backend, const std::string& path, size_t batch_size) {
  if (backend == DataParameter::LMDB) return std::make_unique<LmdbWriter>(path, batch_size);
  return std::make_unique<LevelDbWriter>(path, batch_size);
}

}  // namespace crema
