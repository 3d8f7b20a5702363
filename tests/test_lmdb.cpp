#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "io/lmdb.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

std::vector<std::pair<std::string, std::string>> ReadAll(LmdbReader* reader) {
  std::vector<std::pair<std::string, std::string>> records;
  for (reader->SeekToFirst(); reader->Valid(); reader->Next()) records.emplace_back(reader->key(), reader->value());
  return records;
}

TEST(LmdbTest, WritesAcrossTransactionsAndReadsInKeyOrder) {
  test::TempDir dir;
  const std::string db = dir.file("db");
  {
    LmdbWriter writer(db, /*batch_size=*/2);  // three records: two commits
    writer.Put("c", "three");
    writer.Put("a", std::string("one\0with nul", 12));
    writer.Put("b", "two");
    EXPECT_EQ(writer.records(), 3u);
  }  // the destructor commits the last, partial batch
  LmdbReader reader(db);
  EXPECT_EQ(reader.size(), 3u);
  ASSERT_TRUE(reader.Valid());  // opens on the first record
  EXPECT_EQ(reader.key(), "a");
  const auto records = ReadAll(&reader);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0], std::make_pair(std::string("a"), std::string("one\0with nul", 12)));
  EXPECT_EQ(records[1], std::make_pair(std::string("b"), std::string("two")));
  EXPECT_EQ(records[2], std::make_pair(std::string("c"), std::string("three")));
  EXPECT_FALSE(reader.Valid());
  EXPECT_THROW(reader.Next(), Error);
  EXPECT_THROW(reader.key(), Error);
}

TEST(LmdbTest, SeekFindsExactKeysAndNamesMissingOnes) {
  test::TempDir dir;
  const std::string db = dir.file("db");
  {
    LmdbWriter writer(db);
    for (int i = 0; i < 10; ++i) writer.Put("key" + std::to_string(i), "value" + std::to_string(i));
    writer.Commit();
  }
  LmdbReader reader(db);
  reader.Seek("key7");
  ASSERT_TRUE(reader.Valid());
  EXPECT_EQ(reader.key(), "key7");
  EXPECT_EQ(reader.value(), "value7");
  reader.Next();
  EXPECT_EQ(reader.key(), "key8");
  // "key" is a prefix of every key but not one of them: Seek is exact, not "the first key at or after".
  test::ExpectErrorContaining([&] { reader.Seek("key"); }, {"'key'", db});
  EXPECT_FALSE(reader.Valid());
  reader.SeekToFirst();
  EXPECT_EQ(reader.key(), "key0");
}

TEST(LmdbTest, EmptyDatabaseHasNoRecords) {
  test::TempDir dir;
  { LmdbWriter writer(dir.file("db")); }
  LmdbReader reader(dir.file("db"));
  EXPECT_EQ(reader.size(), 0u);
  EXPECT_FALSE(reader.Valid());
}

TEST(LmdbTest, MapGrowsWhenFull) {
  test::TempDir dir;
  const std::string db = dir.file("db");
  // 80 MiB of values: more than the first map (64 MiB), so the writer must grow it.
  const std::string megabyte(1 << 20, 'x');
  {
    LmdbWriter writer(db, /*batch_size=*/8);
    for (int i = 0; i < 80; ++i) writer.Put("record" + std::to_string(100 + i), megabyte + std::to_string(i));
  }
  LmdbReader reader(db);
  EXPECT_EQ(reader.size(), 80u);
  reader.Seek("record179");
  EXPECT_EQ(reader.value(), megabyte + "79");
}

TEST(LmdbTest, BadPathsGiveErrorsNamingThem) {
  test::TempDir dir;
  const std::string missing = dir.file("no_such_db");
  test::ExpectErrorContaining([&] { LmdbReader reader(missing); },
                              {"cannot open LMDB '" + missing + "'", "No such file or directory"});
  const std::string file = dir.file("a_file");
  std::ofstream(file) << "not a database";
  test::ExpectErrorContaining([&] { LmdbReader reader(file); }, {file, "not an LMDB directory"});
  const std::string empty = dir.file("empty_dir");
  std::filesystem::create_directory(empty);
  test::ExpectErrorContaining([&] { LmdbReader reader(empty); }, {empty, "no data.mdb"});
  const std::string garbage = dir.file("garbage");
  std::filesystem::create_directory(garbage);
  std::ofstream(garbage + "/data.mdb") << std::string(10000, 'g');
  test::ExpectErrorContaining([&] { LmdbReader reader(garbage); }, {garbage, "not an LMDB file"});
}

TEST(LmdbTest, WriterRefusesAnExistingPath) {
  test::TempDir dir;
  { LmdbWriter writer(dir.file("db")); }
  test::ExpectErrorContaining([&] { LmdbWriter writer(dir.file("db")); }, {dir.file("db"), "already exists"});
}

TEST(LmdbTest, SeveralReadersAndThreadsShareOneDatabase) {
  test::TempDir dir;
  const std::string db = dir.file("db");
  {
    LmdbWriter writer(db, 7);
    for (int i = 0; i < 100; ++i)
      writer.Put(std::string(1, static_cast<char>('A' + i / 26)) + std::to_string(i), std::to_string(i * i));
  }
  LmdbReader first(db);
  const auto expected = ReadAll(&first);
  ASSERT_EQ(expected.size(), 100u);
  // Readers created here and used on other threads (as a prefetch thread does), and one open here meanwhile.
  std::vector<std::unique_ptr<LmdbReader>> readers;
  for (int t = 0; t < 4; ++t) readers.push_back(std::make_unique<LmdbReader>(db));
  std::vector<std::vector<std::pair<std::string, std::string>>> results(readers.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < readers.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 20; ++repeat) results[t] = ReadAll(readers[t].get());
    });
  }
  LmdbReader meanwhile(db);
  EXPECT_EQ(ReadAll(&meanwhile), expected);
  for (auto& thread : threads) thread.join();
  for (const auto& result : results) EXPECT_EQ(result, expected);
}

TEST(LmdbTest, PrintableKeyEscapesBinaryBytes) {
  EXPECT_EQ(PrintableKey("00000042"), "00000042");
  EXPECT_EQ(PrintableKey(std::string("a\x01\xff\\", 4)), "a\\x01\\xff\\x5c");
}

}  // namespace
}  // namespace crema
