#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/context.hpp"
#include "layers/data/hdf5_data.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// Writes a dataset of doubles (HDF5 converts them to the layer's floats) to an open file.
void WriteDataset(hid_t file, const std::string& name, const std::vector<hsize_t>& dims,
                  const std::vector<double>& values) {
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t dataset = H5Dcreate2(file, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(dataset, 0);
  ASSERT_GE(H5Dwrite(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
  H5Dclose(dataset);
  H5Sclose(space);
}

// A file of the items first .. first + rows - 1: item i has data (1 x 2) {10 i, 10 i + 1} and label i.
void WriteItems(const std::string& path, int first, int rows, bool with_label = true, hsize_t item_width = 2) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  std::vector<double> data, label;
  for (int i = first; i < first + rows; ++i) {
    for (hsize_t v = 0; v < item_width; ++v) data.push_back(10.0 * i + v);
    label.push_back(i);
  }
  WriteDataset(file, "data", {static_cast<hsize_t>(rows), 1, item_width}, data);
  if (with_label) WriteDataset(file, "label", {static_cast<hsize_t>(rows)}, label);
  H5Fclose(file);
}

using test::WriteText;

LayerParameter H5Param(const std::string& source, const std::string& extra = "batch_size: 2") {
  return test::ParseLayer("name: 'h5' type: 'HDF5Data' top: 'data' top: 'label' hdf5_data_param { source: '" + source +
                          "' " + extra + " }");
}

struct Fixture {
  explicit Fixture(const LayerParameter& param, uint64_t seed = Context::kDefaultSeed, int rank = 0, int replicas = 1)
      : layer(param, MakeContext(seed, rank, replicas)) {
    blobs.Add({});
    blobs.Add({});
    layer.SetUp({}, blobs.pointers);
  }
  static std::shared_ptr<Context> MakeContext(uint64_t seed, int rank, int replicas) {
    auto context = std::make_shared<Context>(Device::kCPU, 0, seed);
    context->set_replica(rank, replicas);
    return context;
  }
  // The items (labels) of the next batch; the data is checked against them.
  std::vector<int> Next() {
    layer.Forward({}, blobs.pointers);
    const std::vector<float> data = test::DataOf(*blobs.pointers[0]);
    const std::vector<float> label = test::DataOf(*blobs.pointers[1]);
    std::vector<int> items;
    for (size_t i = 0; i < label.size(); ++i) {
      items.push_back(static_cast<int>(label[i]));
      EXPECT_EQ(data[2 * i], 10.f * label[i]) << "item " << i;
      EXPECT_EQ(data[2 * i + 1], 10.f * label[i] + 1) << "item " << i;
    }
    return items;
  }
  std::vector<int> NextItems(int batches) {
    std::vector<int> items;
    for (int b = 0; b < batches; ++b) {
      const std::vector<int> batch = Next();
      items.insert(items.end(), batch.begin(), batch.end());
    }
    return items;
  }
  HDF5DataLayer layer;
  test::BlobList blobs;
};

// Three files of four items each (0-3, 4-7, 8-11), listed by relative paths.
std::string WriteTwelveItems(const test::TempDir& dir) {
  WriteItems(dir.file("a.h5"), 0, 4);
  WriteItems(dir.file("b.h5"), 4, 4);
  WriteItems(dir.file("c.h5"), 8, 4);
  WriteText(dir.file("list.txt"), "a.h5\nb.h5\nc.h5\n");
  return dir.file("list.txt");
}

TEST(HDF5DataLayerTest, BatchesCrossFilesInListOrderAndWrapAround) {
  test::TempDir dir;
  WriteItems(dir.file("a.h5"), 0, 3);
  WriteItems(dir.file("b.h5"), 3, 2);
  // A relative name found beside the list, an absolute one, a blank line and spaces around a name.
  WriteText(dir.file("list.txt"), "a.h5\n\n  " + dir.file("b.h5") + "  \n");
  Fixture fixture(H5Param(dir.file("list.txt")));
  EXPECT_EQ(fixture.blobs.pointers[0]->shape(), (std::vector<int>{2, 1, 2}));
  EXPECT_EQ(fixture.blobs.pointers[1]->shape(), (std::vector<int>{2}));
  EXPECT_EQ(fixture.Next(), (std::vector<int>{0, 1}));
  EXPECT_EQ(fixture.Next(), (std::vector<int>{2, 3}));
  EXPECT_EQ(fixture.Next(), (std::vector<int>{4, 0}));
  EXPECT_EQ(fixture.Next(), (std::vector<int>{1, 2}));
}

TEST(HDF5DataLayerTest, ShuffleIsReproducibleFromTheSeedAndKeepsFilesTogether) {
  test::TempDir dir;
  const std::string list = WriteTwelveItems(dir);
  Fixture first(H5Param(list, "batch_size: 3 shuffle: true"), 5);
  const std::vector<int> epoch1 = first.NextItems(4), epoch2 = first.NextItems(4);
  std::vector<int> in_order(12);
  std::iota(in_order.begin(), in_order.end(), 0);
  for (const std::vector<int>* epoch : {&epoch1, &epoch2}) {
    std::vector<int> sorted = *epoch;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, in_order);  // each pass reads every item once
    EXPECT_NE(*epoch, in_order);
    for (int f = 0; f < 3; ++f) {  // the four items of one file come together
      for (int r = 1; r < 4; ++r) EXPECT_EQ((*epoch)[4 * f + r] / 4, (*epoch)[4 * f] / 4);
    }
  }
  EXPECT_NE(epoch1, epoch2);

  Fixture same(H5Param(list, "batch_size: 3 shuffle: true"), 5);
  EXPECT_EQ(same.NextItems(8), [&] {
    std::vector<int> both = epoch1;
    both.insert(both.end(), epoch2.begin(), epoch2.end());
    return both;
  }());
  Fixture other(H5Param(list, "batch_size: 3 shuffle: true"), 6);
  EXPECT_NE(other.NextItems(4), epoch1);
}

TEST(HDF5DataLayerTest, RestoredLayerContinuesExactly) {
  test::TempDir dir;
  const std::string list = WriteTwelveItems(dir);
  for (const std::string extra : {"batch_size: 5", "batch_size: 5 shuffle: true"}) {
    SCOPED_TRACE(extra);
    Fixture original(H5Param(list, extra));
    original.NextItems(3);  // ends inside the second pass
    LayerRuntimeState saved;
    original.layer.SaveRuntimeState(&saved);
    EXPECT_EQ(saved.records_read(), 15u);
    LayerRuntimeState parsed;
    ASSERT_TRUE(parsed.ParseFromString(saved.SerializeAsString()));
    const std::vector<int> expected = original.NextItems(6);

    Fixture resumed(H5Param(list, extra));
    resumed.layer.RestoreRuntimeState(parsed);
    EXPECT_EQ(resumed.NextItems(6), expected);
    original.layer.RestoreRuntimeState(parsed);  // rewinds the same layer
    EXPECT_EQ(original.NextItems(6), expected);
  }
}

TEST(HDF5DataLayerTest, ReplicasReadTheirShareOfEachGlobalBatch) {
  test::TempDir dir;
  const std::string list = WriteTwelveItems(dir);
  Fixture whole(H5Param(list, "batch_size: 4"));
  Fixture part0(H5Param(list), Context::kDefaultSeed, 0, 2);
  Fixture part1(H5Param(list), Context::kDefaultSeed, 1, 2);
  for (int b = 0; b < 5; ++b) {
    const std::vector<int> global = whole.Next();
    EXPECT_EQ(part0.Next(), std::vector<int>(global.begin(), global.begin() + 2));
    EXPECT_EQ(part1.Next(), std::vector<int>(global.begin() + 2, global.end()));
  }
}

TEST(HDF5DataLayerTest, ErrorsNameTheFileTheDatasetAndTheShapes) {
  test::TempDir dir;
  test::ExpectErrorContaining([&] { Fixture f(H5Param(dir.file("none.txt"))); },
                              {"'h5' (HDF5Data)", dir.file("none.txt")});
  WriteText(dir.file("empty.txt"), "\n  \n");
  test::ExpectErrorContaining([&] { Fixture f(H5Param(dir.file("empty.txt"))); }, {"names no HDF5 files"});
  WriteItems(dir.file("a.h5"), 0, 3);
  WriteText(dir.file("missing.txt"), "a.h5\nmissing.h5\n");
  test::ExpectErrorContaining([&] { Fixture f(H5Param(dir.file("missing.txt"))); },
                              {"missing.h5", "line 2", "cannot open HDF5 file"});
  WriteText(dir.file("notes.txt"), "a.h5\nnotes.txt\n");  // not an HDF5 file
  test::ExpectErrorContaining([&] { Fixture f(H5Param(dir.file("notes.txt"))); }, {"notes.txt", "line 2"});
  WriteItems(dir.file("nolabel.h5"), 3, 2, false);
  WriteText(dir.file("nolabel.txt"), "a.h5\nnolabel.h5\n");
  test::ExpectErrorContaining([&] { Fixture f(H5Param(dir.file("nolabel.txt"))); },
                              {"nolabel.h5", "no dataset 'label'"});
  WriteItems(dir.file("wide.h5"), 3, 2, true, 3);
  WriteText(dir.file("wide.txt"), "a.h5\nwide.h5\n");
  test::ExpectErrorContaining([&] { Fixture f(H5Param(dir.file("wide.txt"))); },
                              {"wide.h5", "dataset 'data'", "(2, 1, 3)", "(3, 1, 2)"});
  {
    const hid_t file = H5Fcreate(dir.file("rows.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    WriteDataset(file, "data", {2, 1, 2}, {0, 1, 10, 11});
    WriteDataset(file, "label", {3}, {0, 1, 2});
    H5Fclose(file);
  }
  WriteText(dir.file("rows.txt"), "rows.h5\n");
  test::ExpectErrorContaining([&] { Fixture f(H5Param(dir.file("rows.txt"))); },
                              {"rows.h5", "dataset 'label' has shape (3)", "2 rows"});
  WriteText(dir.file("list.txt"), "a.h5\n");
  test::ExpectErrorContaining([&] { Fixture f(H5Param(dir.file("list.txt"), "batch_size: 0")); },
                              {"hdf5_data_param.batch_size"});

  Fixture fixture(H5Param(dir.file("list.txt")));
  LayerRuntimeState state;
  state.set_cursor_key("files=0;file=0;row=7;rows=");
  test::ExpectErrorContaining([&] { fixture.layer.RestoreRuntimeState(state); },
                              {"'h5'", "row is out of range", dir.file("list.txt")});
  state.set_cursor_key("files=0,1;file=0;row=0;rows=");
  test::ExpectErrorContaining([&] { fixture.layer.RestoreRuntimeState(state); }, {"file order"});
  state.set_cursor_key("garbage");
  test::ExpectErrorContaining([&] { fixture.layer.RestoreRuntimeState(state); }, {"cannot parse"});
}

}  // namespace
}  // namespace crema
