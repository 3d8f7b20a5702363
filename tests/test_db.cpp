// The database interface (io/db.hpp) over both stores: every test runs once on LMDB and once on LevelDB.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "io/db.hpp"
#include "io/leveldb.hpp"
#include "io/lmdb.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

using Records = std::vector<std::pair<std::string, std::string>>;

Records ReadAll(DbReader* reader) {
  Records records;
  for (reader->SeekToFirst(); reader->Valid(); reader->Next()) records.emplace_back(reader->key(), reader->value());
  return records;
}

class DbTest : public ::testing::TestWithParam<DataParameter::DB> {
 protected:
  DataParameter::DB backend() const { return GetParam(); }
  std::string name() const { return DbBackendName(backend()); }
  // A new database at `path` holding `records`, written `batch_size` at a time.
  void Write(const std::string& path, const Records& records, size_t batch_size = 1000) {
    const std::unique_ptr<DbWriter> writer = CreateDbWriter(backend(), path, batch_size);
    for (const auto& [key, value] : records) writer->Put(key, value);
    EXPECT_EQ(writer->records(), records.size());
  }  // the writer's destructor writes the last, partial batch
};

TEST_P(DbTest, WritesInBatchesAndReadsInKeyOrder) {
  test::TempDir dir;
  const std::string db = dir.file("db");
  // Out of key order, five records in batches of two (three writes), a value with a NUL byte in it.
  Write(db, {{"c", "three"}, {"a", std::string("one\0with nul", 12)}, {"e", "five"}, {"b", "two"}, {"d", ""}}, 2);
  EXPECT_EQ(DetectDbBackend(db), backend());
  const std::unique_ptr<DbReader> reader = OpenDbReader(backend(), db);
  EXPECT_EQ(reader->path(), db);
  EXPECT_EQ(reader->size(), 5u);
  EXPECT_EQ(reader->size(), 5u);  // LevelDB's count is remembered; asking again changes nothing
  ASSERT_TRUE(reader->Valid());   // opens on the first record
  EXPECT_EQ(reader->key(), "a");
  const Records expected = {
      {"a", std::string("one\0with nul", 12)}, {"b", "two"}, {"c", "three"}, {"d", ""}, {"e", "five"}};
  EXPECT_EQ(ReadAll(reader.get()), expected);
  EXPECT_FALSE(reader->Valid());
  test::ExpectErrorContaining([&] { reader->Next(); }, {name(), db, "past the last record"});
  test::ExpectErrorContaining([&] { reader->key(); }, {name(), db, "no current record"});
  test::ExpectErrorContaining([&] { reader->value(); }, {db});
  // Caffe's keys sort in record order.
  EXPECT_LT(RecordKey(9), RecordKey(10));
}

TEST_P(DbTest, SeekFindsExactKeysAndNamesMissingOnes) {
  test::TempDir dir;
  const std::string db = dir.file("db");
  Records records;
  for (int i = 0; i < 20; ++i) records.emplace_back(RecordKey(i), "value" + std::to_string(i));
  Write(db, records, 7);
  const std::unique_ptr<DbReader> reader = OpenDbReader(backend(), db);
  reader->Seek(RecordKey(13));
  ASSERT_TRUE(reader->Valid());
  EXPECT_EQ(reader->key(), "00000013");
  EXPECT_EQ(reader->value(), "value13");
  reader->Next();
  EXPECT_EQ(reader->key(), "00000014");
  reader->Seek(RecordKey(19));
  reader->Next();
  EXPECT_FALSE(reader->Valid());
  // "0000001" comes before "00000010" but is not a key: Seek is exact, not "the first key at or after".
  test::ExpectErrorContaining([&] { reader->Seek("0000001"); }, {"no record with key '0000001'", name(), db});
  EXPECT_FALSE(reader->Valid());
  test::ExpectErrorContaining([&] { reader->Seek("zzz"); }, {"'zzz'", db});  // after the last key
  test::ExpectErrorContaining([&] { reader->Seek(std::string("\x01", 1)); }, {"'\\x01'", db});
  reader->SeekToFirst();
  EXPECT_EQ(reader->key(), "00000000");
}

TEST_P(DbTest, EmptyDatabaseHasNoRecords) {
  test::TempDir dir;
  Write(dir.file("db"), {});
  const std::unique_ptr<DbReader> reader = OpenDbReader(backend(), dir.file("db"));
  EXPECT_EQ(reader->size(), 0u);
  EXPECT_FALSE(reader->Valid());
  reader->SeekToFirst();
  EXPECT_FALSE(reader->Valid());
}

TEST_P(DbTest, WriterRefusesAnExistingPath) {
  test::TempDir dir;
  Write(dir.file("db"), {{"k", "v"}});
  test::ExpectErrorContaining([&] { CreateDbWriter(backend(), dir.file("db")); },
                              {"cannot create " + name() + " '" + dir.file("db") + "'", "already exists"});
  std::filesystem::create_directory(dir.file("empty"));
  test::ExpectErrorContaining([&] { CreateDbWriter(backend(), dir.file("empty")); }, {"already exists"});
  // The refused writer left the database as it was.
  EXPECT_EQ(ReadAll(OpenDbReader(backend(), dir.file("db")).get()), (Records{{"k", "v"}}));
}

TEST_P(DbTest, BadPathsGiveErrorsNamingThem) {
  test::TempDir dir;
  const std::string missing = dir.file("no_such_db");
  test::ExpectErrorContaining([&] { OpenDbReader(backend(), missing); },
                              {"cannot open " + name() + " '" + missing + "'", "No such file or directory"});
  EXPECT_EQ(DetectDbBackend(missing), std::nullopt);
  const std::string file = dir.file("a_file");
  std::ofstream(file) << "not a database";
  test::ExpectErrorContaining([&] { OpenDbReader(backend(), file); }, {file, "not a", name() + " directory"});
  const std::string empty = dir.file("empty_dir");
  std::filesystem::create_directory(empty);
  EXPECT_EQ(DetectDbBackend(empty), std::nullopt);
  test::ExpectErrorContaining([&] { OpenDbReader(backend(), empty); },
                              {empty, backend() == DataParameter::LMDB ? "no data.mdb" : "no CURRENT"});
}

TEST(DbNamesTest, BackendNamesAndFlags) {
  EXPECT_STREQ(DbBackendName(DataParameter::LMDB), "LMDB");
  EXPECT_STREQ(DbBackendName(DataParameter::LEVELDB), "LevelDB");
  EXPECT_EQ(ParseDbBackend("lmdb"), DataParameter::LMDB);
  EXPECT_EQ(ParseDbBackend("LevelDB"), DataParameter::LEVELDB);
  test::ExpectErrorContaining([] { ParseDbBackend("rocksdb"); }, {"'rocksdb'", "lmdb", "leveldb"});
}

TEST_P(DbTest, ReadersOfOnePathAtOnceOnSeveralThreads) {
  test::TempDir dir;
  const std::string db = dir.file("db");
  Records records;
  for (int i = 0; i < 300; ++i) records.emplace_back(RecordKey(i), std::string(i % 50, 'a' + i % 26));
  Write(db, records, 64);

  // Two readers at once on this thread, with cursors of their own.
  const std::unique_ptr<DbReader> first = OpenDbReader(backend(), db);
  const std::unique_ptr<DbReader> second = OpenDbReader(backend(), db);
  first->Seek(RecordKey(100));
  EXPECT_EQ(second->key(), RecordKey(0));
  second->Next();
  EXPECT_EQ(first->key(), RecordKey(100));
  EXPECT_EQ(second->key(), RecordKey(1));
  EXPECT_EQ(first->size(), 300u);

  // Readers made here and used on other threads (as a prefetch thread does), while others open and close.
  std::vector<std::unique_ptr<DbReader>> readers;
  for (int t = 0; t < 4; ++t) readers.push_back(OpenDbReader(backend(), db));
  std::vector<Records> results(readers.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < readers.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 10; ++repeat) results[t] = ReadAll(readers[t].get());
    });
  }
  // Threads that open and close readers of their own, so the shared handle is taken and given back meanwhile.
  std::vector<Records> opened(2);
  for (size_t t = 0; t < opened.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 10; ++repeat) opened[t] = ReadAll(OpenDbReader(backend(), db).get());
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& result : results) EXPECT_EQ(result, records);
  for (const auto& result : opened) EXPECT_EQ(result, records);

  // Once every reader is gone the database can be opened again (LevelDB's lock was given back).
  readers.clear();
  EXPECT_EQ(OpenDbReader(backend(), db)->size(), 300u);
}

INSTANTIATE_TEST_SUITE_P(BothStores, DbTest, ::testing::Values(DataParameter::LMDB, DataParameter::LEVELDB),
                         [](const ::testing::TestParamInfo<DataParameter::DB>& info) {
                           return std::string(DbBackendName(info.param));
                         });

// The two stores side by side: each refuses the other's directory with its own file named.
TEST(DbStoresTest, EachRefusesTheOthersDirectory) {
  test::TempDir dir;
  { LmdbWriter writer(dir.file("lmdb")); }
  { LevelDbWriter writer(dir.file("leveldb")); }
  EXPECT_EQ(DetectDbBackend(dir.file("lmdb")), DataParameter::LMDB);
  EXPECT_EQ(DetectDbBackend(dir.file("leveldb")), DataParameter::LEVELDB);
  test::ExpectErrorContaining([&] { LevelDbReader reader(dir.file("lmdb")); }, {dir.file("lmdb"), "no CURRENT"});
  test::ExpectErrorContaining([&] { LmdbReader reader(dir.file("leveldb")); }, {dir.file("leveldb"), "no data.mdb"});
}

// A LevelDB whose files are damaged fails with LevelDB's reason and the path, not a crash.
TEST(DbStoresTest, DamagedLevelDbNamesThePath) {
  test::TempDir dir;
  const std::string db = dir.file("db");
  { LevelDbWriter writer(db); }
  std::ofstream(db + "/CURRENT", std::ios::trunc) << "MANIFEST-999999\n";  // names a manifest that is not there
  test::ExpectErrorContaining([&] { LevelDbReader reader(db); }, {"cannot open LevelDB '" + db + "'"});
}

}  // namespace
}  // namespace crema
