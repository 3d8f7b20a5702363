#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/context.hpp"
#include "io/db.hpp"
#include "io/image_io.hpp"
#include "io/lmdb.hpp"
#include "layers/data/data.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// The value of pixel p of record i in the data sets below.
float Pixel(int record, int p) { return static_cast<float>((record * 16 + p) % 251); }

Datum MakeDatum(int record, int channels, int height, int width) {
  Datum datum;
  datum.set_channels(channels);
  datum.set_height(height);
  datum.set_width(width);
  std::string bytes;
  for (int p = 0; p < channels * height * width; ++p)
    bytes += static_cast<char>(static_cast<unsigned char>(Pixel(record, p)));  // 0..250: as a byte, not a char
  datum.set_data(bytes);
  datum.set_label(100 + record);
  return datum;
}

// A database (an LMDB unless told) of `count` records of shape C x H x W under Caffe's keys; record i has
// label 100 + i.
std::string WriteDataSet(const test::TempDir& dir, int count, int channels, int height, int width,
                         DataParameter::DB backend = DataParameter::LMDB) {
  const std::string path = dir.file(backend == DataParameter::LMDB ? "lmdb" : "leveldb");
  const std::unique_ptr<DbWriter> writer = CreateDbWriter(backend, path, 3);
  for (int i = 0; i < count; ++i) writer->Put(RecordKey(i), MakeDatum(i, channels, height, width).SerializeAsString());
  writer->Commit();
  return path;
}

LayerParameter DataLayerParam(const std::string& source, const std::string& data_extra = "batch_size: 2",
                              const std::string& rest = "phase: TEST", const std::string& backend = "LMDB") {
  return test::ParseLayer("name: 'data' type: 'Data' " + rest + " data_param { source: '" + source +
                          "' backend: " + backend + " " + data_extra + " }");
}

// A set-up layer with its data and label tops, on a context with `seed`, as replica `rank` of `replicas`.
struct Fixture {
  explicit Fixture(const LayerParameter& param, int tops = 2, uint64_t seed = Context::kDefaultSeed, int rank = 0,
                   int replicas = 1)
      : layer(param, MakeContext(seed, rank, replicas)) {
    for (int i = 0; i < tops; ++i) blobs.Add({});
    layer.SetUp({}, blobs.pointers);
  }
  // One batch: the data values followed by the labels.
  std::vector<float> Next() {
    layer.Forward({}, blobs.pointers);
    std::vector<float> values;
    for (Blob* blob : blobs.pointers) values.insert(values.end(), blob->cpu_data(), blob->cpu_data() + blob->count());
    return values;
  }
  std::vector<std::vector<float>> Next(int batches) {
    std::vector<std::vector<float>> result;
    for (int i = 0; i < batches; ++i) result.push_back(Next());
    return result;
  }
  static std::shared_ptr<Context> MakeContext(uint64_t seed, int rank, int replicas) {
    auto context = std::make_shared<Context>(Device::kCPU, 0, seed);
    context->set_replica(rank, replicas);
    return context;
  }
  DataLayer layer;
  test::BlobList blobs;
};

TEST(DataLayerTest, BatchesHoldTheRecordsInOrderAndWrapAround) {
  test::TempDir dir;
  const std::string source = WriteDataSet(dir, 5, 1, 2, 3);
  Fixture fixture(DataLayerParam(source));
  Blob& data = *fixture.blobs.pointers[0];
  Blob& label = *fixture.blobs.pointers[1];
  EXPECT_EQ(data.shape(), (std::vector<int>{2, 1, 2, 3}));
  EXPECT_EQ(label.shape(), (std::vector<int>{2}));
  // Five records in batches of two: the third batch takes the last record and the first again.
  const std::vector<std::vector<int>> expected = {{0, 1}, {2, 3}, {4, 0}, {1, 2}, {3, 4}};
  for (const auto& records : expected) {
    fixture.layer.Forward({}, fixture.blobs.pointers);
    for (int n = 0; n < 2; ++n) {
      EXPECT_EQ(label.cpu_data()[n], 100 + records[n]);
      for (int p = 0; p < 6; ++p) EXPECT_EQ(data.cpu_data()[n * 6 + p], Pixel(records[n], p)) << n << " " << p;
    }
  }
}

TEST(DataLayerTest, DataTopAlone) {
  test::TempDir dir;
  const std::string source = WriteDataSet(dir, 3, 2, 1, 1);
  Fixture fixture(DataLayerParam(source, "batch_size: 3"), /*tops=*/1);
  EXPECT_EQ(fixture.Next(), (std::vector<float>{0, 1, 16, 17, 32, 33}));
}

// The batches read ahead are memory outside the net's plan: the layer lists them, at up to `prefetch` batches of
// data and labels.
TEST(DataLayerTest, ListsTheBatchesItReadsAhead) {
  test::TempDir dir;
  const std::string source = WriteDataSet(dir, 4, 2, 3, 5);
  Fixture fixture(DataLayerParam(source, "batch_size: 2 prefetch: 3"));
  fixture.Next();
  const std::vector<Layer::HeldBuffer> held = fixture.layer.HeldBuffers();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].bytes, 3 * sizeof(float) * (2 * 2 * 3 * 5 + 2));
  EXPECT_EQ(held[0].device, Device::kCPU);
  EXPECT_NE(held[0].what.find("read ahead (up to 3)"), std::string::npos) << held[0].what;
}

TEST(DataLayerTest, AppliesTheTransformation) {
  test::TempDir dir;
  const std::string source = WriteDataSet(dir, 2, 1, 3, 4);
  // TEST phase: centre crop at rows (3-2)/2 = 0, columns (4-2)/2 = 1; then (x - 1) * 0.5.
  Fixture fixture(
      DataLayerParam(source, "batch_size: 2", "phase: TEST transform_param { crop_size: 2 mean_value: 1 scale: 0.5 }"));
  EXPECT_EQ(fixture.blobs.pointers[0]->shape(), (std::vector<int>{2, 1, 2, 2}));
  std::vector<float> expected;
  for (int record = 0; record < 2; ++record) {
    for (int p : {1, 2, 5, 6}) expected.push_back((Pixel(record, p) - 1) * 0.5f);
  }
  expected.insert(expected.end(), {100, 101});
  EXPECT_EQ(fixture.Next(), expected);
}

TEST(DataLayerTest, DeprecatedDataParamFieldsApplyUnlessTransformParamSetsThem) {
  test::TempDir dir;
  const std::string source = WriteDataSet(dir, 1, 1, 3, 3);
  Fixture old_style(DataLayerParam(source, "batch_size: 1 scale: 2 crop_size: 1"));
  EXPECT_EQ(old_style.Next(), (std::vector<float>{2 * Pixel(0, 4), 100}));
  Fixture both(DataLayerParam(source, "batch_size: 1 scale: 2", "phase: TEST transform_param { scale: 3 }"));
  EXPECT_EQ(both.Next()[1], 3 * Pixel(0, 1));
}

TEST(DataLayerTest, ConfigurationErrorsNameTheProblem) {
  test::TempDir dir;
  const std::string source = WriteDataSet(dir, 2, 1, 3, 3);
  const std::string missing = dir.file("no_such_lmdb");
  test::ExpectErrorContaining([&] { Fixture f(DataLayerParam(missing)); },
                              {"layer 'data'", missing, "No such file or directory"});
  test::ExpectErrorContaining([&] { Fixture f(DataLayerParam(source, "")); }, {"data_param.batch_size"});
  test::ExpectErrorContaining(
      [&] { Fixture f(test::ParseLayer("name: 'data' type: 'Data' data_param { batch_size: 2 }")); },
      {"data_param.source"});
  test::ExpectErrorContaining(
      [&] { Fixture f(DataLayerParam(source, "batch_size: 2", "transform_param { crop_size: 4 }")); },
      {"layer 'data'", "00000000", "crop_size 4", "3x3"});
  test::ExpectErrorContaining([&] { Fixture f(DataLayerParam(source, "batch_size: 2 prefetch: 0")); }, {"prefetch"});
  // Declared arity: one or two tops.
  test::ExpectErrorContaining([&] { Fixture f(DataLayerParam(source), 0); }, {"at least 1"});
  test::ExpectErrorContaining([&] { Fixture f(DataLayerParam(source), 3); }, {"at most 2"});
}

TEST(DataLayerTest, ErrorsInThePrefetchThreadReachForward) {
  test::TempDir dir;
  const std::string source = dir.file("lmdb");
  {
    LmdbWriter writer(source);
    for (int i = 0; i < 6; ++i) {
      writer.Put(RecordKey(i), i == 3 ? std::string("not a datum \xff") : MakeDatum(i, 1, 2, 2).SerializeAsString());
    }
  }
  Fixture fixture(DataLayerParam(source, "batch_size: 2 prefetch: 1"));
  EXPECT_EQ(fixture.Next().back(), 101);           // records 0 and 1 are fine
  for (int attempt = 0; attempt < 2; ++attempt) {  // the batch with record 3 fails, and keeps failing
    test::ExpectErrorContaining([&] { fixture.Next(); }, {"layer 'data'", "'00000003'", source, "not a Datum"});
  }

  test::TempDir other;
  const std::string mixed = other.file("lmdb");
  {
    LmdbWriter writer(mixed);
    writer.Put(RecordKey(0), MakeDatum(0, 1, 2, 2).SerializeAsString());
    writer.Put(RecordKey(1), MakeDatum(1, 1, 3, 2).SerializeAsString());
  }
  Fixture shapes(DataLayerParam(mixed, "batch_size: 2"));
  test::ExpectErrorContaining([&] { shapes.Next(); }, {"'00000001'", "1 3 2", "1 2 2"});
}

TEST(DataLayerTest, RandSkipSkipsWhatTheLayersStreamDraws) {
  test::TempDir dir;
  const std::string source = WriteDataSet(dir, 10, 1, 1, 1);
  int skipped_somewhere = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    Fixture fixture(DataLayerParam(source, "batch_size: 1 rand_skip: 5"), 2, seed);
    RandomStream replay(RandomStream::DeriveSeed(seed, "data"));
    const int skip = static_cast<int>(replay.UniformInt(5));
    EXPECT_EQ(fixture.Next().back(), 100 + skip) << "seed " << seed;
    LayerRuntimeState state;
    fixture.layer.SaveRuntimeState(&state);
    EXPECT_EQ(state.records_read(), static_cast<uint64_t>(skip + 1));
    skipped_somewhere += skip > 0;
  }
  EXPECT_GT(skipped_somewhere, 0);
}

// Data parallelism: replica r of N reads part r of each global batch, so the batches of replicas 0..N-1, put
// side by side, are the batches of one layer reading N times the batch size (across the wrap-around too).
TEST(DataLayerTest, ReplicasReadTheirShareOfEachGlobalBatch) {
  test::TempDir dir;
  const std::string source = WriteDataSet(dir, 7, 1, 2, 3);
  const int replicas = 3, batch = 2, batches = 5;  // 30 records from 7: wraps around four times
  Fixture whole(DataLayerParam(source, "batch_size: " + std::to_string(replicas * batch)));
  std::vector<std::unique_ptr<Fixture>> parts;
  for (int rank = 0; rank < replicas; ++rank)
    parts.push_back(std::make_unique<Fixture>(DataLayerParam(source, "batch_size: " + std::to_string(batch)), 2,
                                              Context::kDefaultSeed, rank, replicas));
  const int item = 1 * 2 * 3;
  for (int b = 0; b < batches; ++b) {
    const std::vector<float> expected = whole.Next();
    std::vector<float> data, labels;
    for (auto& part : parts) {
      const std::vector<float> values = part->Next();
      data.insert(data.end(), values.begin(), values.begin() + batch * item);
      labels.insert(labels.end(), values.begin() + batch * item, values.end());
    }
    data.insert(data.end(), labels.begin(), labels.end());
    EXPECT_EQ(data, expected) << "global batch " << b;
  }
  LayerRuntimeState state;
  parts[1]->layer.SaveRuntimeState(&state);
  EXPECT_EQ(state.records_read(), static_cast<uint64_t>(batches * replicas * batch));
  test::ExpectErrorContaining([] { Context().set_replica(3, 3); }, {"replica 3 of 3"});
}

// The layer used by the resume tests: random crops and mirrors of 2 x 4 x 5 records, in TRAIN.
LayerParameter RandomTrainParam(const std::string& source, int prefetch, const std::string& backend = "LMDB") {
  return DataLayerParam(source, "batch_size: 3 prefetch: " + std::to_string(prefetch),
                        "phase: TRAIN transform_param { crop_size: 3 mirror: true scale: 0.5 }", backend);
}

// Whether `item` (2 x 3 x 3 values) is a crop of record `record`, mirrored or not; sets *mirrored.
bool IsTransformOf(const float* item, int record, bool* mirrored) {
  for (int mirror = 0; mirror < 2; ++mirror) {
    for (int row = 0; row <= 1; ++row) {
      for (int column = 0; column <= 2; ++column) {
        bool same = true;
        for (int c = 0; c < 2 && same; ++c) {
          for (int h = 0; h < 3 && same; ++h) {
            for (int w = 0; w < 3 && same; ++w) {
              const int source_w = column + (mirror ? 2 - w : w);
              const float expected = 0.5f * Pixel(record, (c * 4 + row + h) * 5 + source_w);
              same = item[(c * 3 + h) * 3 + w] == expected;
            }
          }
        }
        if (same) {
          *mirrored = mirror == 1;
          return true;
        }
      }
    }
  }
  return false;
}

TEST(DataLayerTest, TrainBatchesAreRandomCropsAndMirrorsOfTheRightRecords) {
  test::TempDir dir;
  const std::string source = WriteDataSet(dir, 7, 2, 4, 5);
  Fixture fixture(RandomTrainParam(source, 2));
  EXPECT_EQ(fixture.blobs.pointers[0]->shape(), (std::vector<int>{3, 2, 3, 3}));
  int mirrored_count = 0;
  for (int batch = 0; batch < 10; ++batch) {
    const std::vector<float> values = fixture.Next();
    for (int n = 0; n < 3; ++n) {
      const int record = (batch * 3 + n) % 7;
      bool mirrored = false;
      EXPECT_TRUE(IsTransformOf(values.data() + n * 18, record, &mirrored)) << "batch " << batch << " item " << n;
      EXPECT_EQ(values[54 + n], 100 + record);
      mirrored_count += mirrored;
    }
  }
  EXPECT_GT(mirrored_count, 5);
  EXPECT_LT(mirrored_count, 25);

  // Same seed (whatever the prefetch depth), same batches; another seed, other crops and mirrors.
  Fixture same_seed(RandomTrainParam(source, 3));
  Fixture other_seed(RandomTrainParam(source, 2), 2, 1702);
  Fixture reference(RandomTrainParam(source, 1));
  const auto reference_batches = reference.Next(5);
  EXPECT_EQ(same_seed.Next(5), reference_batches);
  EXPECT_NE(other_seed.Next(5), reference_batches);
}

// The exact-resume property: for every k, the batches after a state saved after k batches are the batches a
// fresh layer returns after restoring that state, whatever the prefetch depth and however far ahead the
// prefetch thread has read.
void ExpectRestoredLayerContinuesExactly(const std::string& source, const std::string& backend) {
  for (int prefetch : {1, 4}) {
    for (int k : {0, 1, 2, 3, 5, 9}) {
      SCOPED_TRACE("prefetch " + std::to_string(prefetch) + ", k " + std::to_string(k));
      Fixture original(RandomTrainParam(source, prefetch, backend));
      original.Next(k);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the thread fill its queue
      LayerRuntimeState state;
      original.layer.SaveRuntimeState(&state);
      EXPECT_EQ(state.layer(), "data");
      EXPECT_EQ(state.records_read(), static_cast<uint64_t>(3 * k));
      EXPECT_EQ(state.cursor_key(), RecordKey(3 * k % 7));
      EXPECT_TRUE(state.has_random_stream());
      const auto expected = original.Next(6);

      // A layer built under another seed, which has read (and prefetched) batches of its own.
      Fixture resumed(RandomTrainParam(source, 4 - prefetch + 1, backend), 2, 4242);
      resumed.Next(2);
      resumed.layer.RestoreRuntimeState(state);
      EXPECT_EQ(resumed.Next(6), expected);

      // The state also survives serialisation, as it does inside a .solverstate.
      LayerRuntimeState parsed;
      ASSERT_TRUE(parsed.ParseFromString(state.SerializeAsString()));
      original.layer.RestoreRuntimeState(parsed);  // rewinds the same layer
      EXPECT_EQ(original.Next(6), expected);
    }
  }
}

// The cursor is a key, which both stores seek to.
TEST(DataLayerTest, RestoredLayerContinuesExactly) {
  for (const DataParameter::DB backend : {DataParameter::LMDB, DataParameter::LEVELDB}) {
    SCOPED_TRACE(DbBackendName(backend));
    test::TempDir dir;
    ExpectRestoredLayerContinuesExactly(WriteDataSet(dir, 7, 2, 4, 5, backend), DataParameter::DB_Name(backend));
  }
}

TEST(DataLayerTest, RestoringAMissingKeyNamesItAndTheSource) {
  for (const DataParameter::DB backend : {DataParameter::LMDB, DataParameter::LEVELDB}) {
    SCOPED_TRACE(DbBackendName(backend));
    test::TempDir dir;
    const std::string source = WriteDataSet(dir, 4, 1, 2, 2, backend);
    Fixture fixture(DataLayerParam(source, "batch_size: 2", "phase: TEST", DataParameter::DB_Name(backend)));
    LayerRuntimeState state;
    fixture.layer.SaveRuntimeState(&state);
    EXPECT_EQ(state.cursor_key(), "00000000");
    EXPECT_EQ(state.records_read(), 0u);
    state.set_cursor_key("00000099");
    test::ExpectErrorContaining([&] { fixture.layer.RestoreRuntimeState(state); },
                                {"'00000099'", source, "layer 'data'", DbBackendName(backend)});
    test::ExpectErrorContaining([&] { fixture.Next(); }, {"'00000099'"});
    // A good state brings the layer back.
    state.set_cursor_key("00000002");
    fixture.layer.RestoreRuntimeState(state);
    EXPECT_EQ(fixture.Next().back(), 103);
    state.clear_cursor_key();
    test::ExpectErrorContaining([&] { fixture.layer.RestoreRuntimeState(state); }, {"cursor_key"});
    state.set_cursor_key("00000002");
    state.set_layer("other_data");
    test::ExpectErrorContaining([&] { fixture.layer.RestoreRuntimeState(state); }, {"'other_data'"});
  }
}

// The same records in a LevelDB and an LMDB make the same batches: in order and across the wrap-around, with
// random crops and mirrors in TRAIN, and as the parts of data-parallel replicas.
TEST(DataLayerTest, LevelDbGivesTheBatchesOfTheSameRecordsInLmdb) {
  test::TempDir dir;
  const std::string lmdb = WriteDataSet(dir, 7, 2, 4, 5, DataParameter::LMDB);
  const std::string leveldb = WriteDataSet(dir, 7, 2, 4, 5, DataParameter::LEVELDB);
  Fixture from_lmdb(DataLayerParam(lmdb, "batch_size: 3"));
  Fixture from_leveldb(DataLayerParam(leveldb, "batch_size: 3", "phase: TEST", "LEVELDB"));
  const auto expected = from_lmdb.Next(6);  // 18 records from 7: wraps around twice
  EXPECT_EQ(from_leveldb.Next(6), expected);
  EXPECT_EQ(expected[3].back(), 100 + (3 * 3 + 2) % 7);

  Fixture random_lmdb(RandomTrainParam(lmdb, 2, "LMDB"));
  Fixture random_leveldb(RandomTrainParam(leveldb, 3, "LEVELDB"));
  EXPECT_EQ(random_leveldb.Next(8), random_lmdb.Next(8));

  for (int rank = 0; rank < 2; ++rank) {
    Fixture part_lmdb(DataLayerParam(lmdb, "batch_size: 2"), 2, Context::kDefaultSeed, rank, 2);
    Fixture part_leveldb(DataLayerParam(leveldb, "batch_size: 2", "phase: TEST", "LEVELDB"), 2, Context::kDefaultSeed,
                         rank, 2);
    EXPECT_EQ(part_leveldb.Next(4), part_lmdb.Next(4)) << "replica " << rank;
  }
}

// A backend that does not match the source is named with the field to set, whichever way round (LEVELDB is
// what a prototxt without `backend` says, as in Caffe).
TEST(DataLayerTest, BackendThatDoesNotMatchTheSourceSaysWhatToSet) {
  test::TempDir dir;
  const std::string lmdb = WriteDataSet(dir, 2, 1, 2, 2, DataParameter::LMDB);
  const std::string leveldb = WriteDataSet(dir, 2, 1, 2, 2, DataParameter::LEVELDB);
  test::ExpectErrorContaining(
      [&] {
        Fixture f(test::ParseLayer("name: 'data' type: 'Data' data_param { source: '" + lmdb + "' batch_size: 2 }"));
      },
      {"layer 'data'", "data_param.backend is LEVELDB (Caffe's default when backend is unset), but '" + lmdb +
                           "' holds an LMDB database; set `backend: LMDB`"});
  test::ExpectErrorContaining([&] { Fixture f(DataLayerParam(lmdb, "batch_size: 2", "phase: TEST", "LEVELDB")); },
                              {"layer 'data'", "data_param.backend is LEVELDB, but '" + lmdb + "' holds an LMDB"});
  test::ExpectErrorContaining([&] { Fixture f(DataLayerParam(leveldb, "batch_size: 2", "phase: TEST", "LMDB")); },
                              {"layer 'data'", "data_param.backend is LMDB, but '" + leveldb +
                                                   "' holds a LevelDB database; set `backend: LEVELDB`"});
  // Left unset, LEVELDB is right for a LevelDB.
  Fixture unset(test::ParseLayer("name: 'data' type: 'Data' data_param { source: '" + leveldb + "' batch_size: 2 }"));
  EXPECT_EQ(unset.Next().back(), 101);
  // A directory that is neither store is reported by the declared store, naming the file it lacks.
  const std::string neither = dir.file("neither");
  std::filesystem::create_directory(neither);
  test::ExpectErrorContaining([&] { Fixture f(DataLayerParam(neither, "batch_size: 2", "phase: TEST", "LEVELDB")); },
                              {"layer 'data'", neither, "no CURRENT"});
  test::ExpectErrorContaining([&] { Fixture f(DataLayerParam(neither)); }, {"layer 'data'", neither, "no data.mdb"});
}

// Record i of an encoded data set: a 2 x 3 PNG with `channels` channels; channel c of pixel p is 20 i + 6 c + p.
Datum EncodedRecord(int record, int channels) {
  std::vector<unsigned char> pixels;
  for (int p = 0; p < 6; ++p)
    for (int c = 0; c < channels; ++c) pixels.push_back(static_cast<unsigned char>(20 * record + 6 * c + p));
  Datum datum;
  datum.set_data(EncodeImage(".png", pixels.data(), 2, 3, channels));
  datum.set_encoded(true);
  datum.set_label(100 + record);
  return datum;
}

TEST(DataLayerTest, EncodedRecordsAreDecoded) {
  if (!ImageCodecsAvailable()) GTEST_SKIP() << "built without OpenCV: encoded records cannot be decoded";
  test::TempDir dir;
  const std::string colour = dir.file("colour"), grey = dir.file("grey");
  {
    LmdbWriter writer(colour, 3);
    for (int i = 0; i < 3; ++i) writer.Put(RecordKey(i), EncodedRecord(i, 3).SerializeAsString());
    writer.Commit();
    LmdbWriter grey_writer(grey, 3);
    for (int i = 0; i < 2; ++i) grey_writer.Put(RecordKey(i), EncodedRecord(i, 1).SerializeAsString());
    grey_writer.Commit();
  }
  Fixture fixture(DataLayerParam(colour));
  EXPECT_EQ(fixture.blobs.pointers[0]->shape(), (std::vector<int>{2, 3, 2, 3}));
  for (const std::vector<int>& records : {std::vector<int>{0, 1}, {2, 0}}) {
    std::vector<float> expected;
    for (int r : records)
      for (int c = 0; c < 3; ++c)
        for (int p = 0; p < 6; ++p) expected.push_back(static_cast<float>(20 * r + 6 * c + p));
    expected.push_back(static_cast<float>(100 + records[0]));
    expected.push_back(static_cast<float>(100 + records[1]));
    EXPECT_EQ(fixture.Next(), expected);
  }
  // Grey records as colour (the older data_param field) and colour records as grey.
  Fixture as_colour(DataLayerParam(grey, "batch_size: 1 force_encoded_color: true"));
  EXPECT_EQ(as_colour.blobs.pointers[0]->shape(), (std::vector<int>{1, 3, 2, 3}));
  EXPECT_EQ(as_colour.Next(), (std::vector<float>{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 100}));
  Fixture as_grey(DataLayerParam(colour, "batch_size: 1", "phase: TEST transform_param { force_gray: true }"));
  EXPECT_EQ(as_grey.blobs.pointers[0]->shape(), (std::vector<int>{1, 1, 2, 3}));
}

}  // namespace
}  // namespace crema
