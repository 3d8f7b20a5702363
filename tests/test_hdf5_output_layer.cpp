#include <gtest/gtest.h>
#include <hdf5.h>

#include <string>
#include <vector>

#include "layers/data/hdf5_output.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// Dataset `name` of an HDF5 file, read with the HDF5 C API: its dims and its values.
struct Dataset {
  std::vector<hsize_t> dims;
  std::vector<float> values;
};
Dataset ReadBack(const std::string& path, const std::string& name) {
  Dataset result;
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(file, 0) << path;
  if (file < 0) return result;
  const hid_t dataset = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  EXPECT_GE(dataset, 0) << name;
  if (dataset >= 0) {
    const hid_t space = H5Dget_space(dataset);
    result.dims.resize(H5Sget_simple_extent_ndims(space));
    H5Sget_simple_extent_dims(space, result.dims.data(), nullptr);
    hsize_t count = 1;
    for (hsize_t d : result.dims) count *= d;
    result.values.resize(count);
    EXPECT_GE(H5Dread(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, result.values.data()), 0);
    H5Sclose(space);
    H5Dclose(dataset);
  }
  H5Fclose(file);
  return result;
}

LayerParameter OutputParam(const std::string& file) {
  return test::ParseLayer(
      "name: 'out' type: 'HDF5Output' bottom: 'data' bottom: 'label' "
      "hdf5_output_param { file_name: '" +
      file + "' }");
}

void Fill(Blob* blob, float first) {
  float* values = blob->mutable_cpu_data();
  for (int i = 0; i < blob->count(); ++i) values[i] = first + i;
}

TEST(HDF5OutputLayerTest, EveryPassAppendsAndTheFileIsReadableAfterEach) {
  test::TempDir dir;
  const std::string path = dir.file("out.h5");
  HDF5OutputLayer layer(OutputParam(path));
  test::BlobList bottoms;
  Blob* data = bottoms.Add({2, 3, 1, 2});
  Blob* label = bottoms.Add({2});
  layer.SetUp(bottoms.pointers, {});

  Fill(data, 0.f);
  Fill(label, 100.f);
  layer.Forward(bottoms.pointers, {});
  Dataset written = ReadBack(path, "data");
  EXPECT_EQ(written.dims, (std::vector<hsize_t>{2, 3, 1, 2}));
  EXPECT_EQ(written.values, test::DataOf(*data));
  EXPECT_EQ(ReadBack(path, "label").values, (std::vector<float>{100, 101}));

  // A second pass with another batch size appends its rows.
  data->Reshape({1, 3, 1, 2});
  label->Reshape({1});
  Fill(data, 50.f);
  Fill(label, 200.f);
  layer.Forward(bottoms.pointers, {});
  written = ReadBack(path, "data");
  EXPECT_EQ(written.dims, (std::vector<hsize_t>{3, 3, 1, 2}));
  std::vector<float> expected;
  for (int i = 0; i < 12; ++i) expected.push_back(static_cast<float>(i));
  for (int i = 0; i < 6; ++i) expected.push_back(50.f + i);
  EXPECT_EQ(written.values, expected);
  const Dataset labels = ReadBack(path, "label");
  EXPECT_EQ(labels.dims, (std::vector<hsize_t>{3}));
  EXPECT_EQ(labels.values, (std::vector<float>{100, 101, 200}));

  // Setting up again starts a new file.
  HDF5OutputLayer again(OutputParam(path));
  again.SetUp(bottoms.pointers, {});
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_EQ(H5Lexists(file, "data", H5P_DEFAULT), 0);
  H5Fclose(file);
}

TEST(HDF5OutputLayerTest, ErrorsNameTheFileTheDatasetAndTheShapes) {
  test::TempDir dir;
  test::BlobList bottoms;
  Blob* data = bottoms.Add({2, 3});
  Blob* label = bottoms.Add({2});
  test::ExpectErrorContaining([&] { HDF5OutputLayer(OutputParam("")).SetUp(bottoms.pointers, {}); },
                              {"'out' (HDF5Output)", "file_name"});
  const std::string unwritable = dir.file("no/such/dir/out.h5");
  test::ExpectErrorContaining([&] { HDF5OutputLayer(OutputParam(unwritable)).SetUp(bottoms.pointers, {}); },
                              {"'out'", unwritable});

  HDF5OutputLayer layer(OutputParam(dir.file("out.h5")));
  layer.SetUp(bottoms.pointers, {});
  layer.Forward(bottoms.pointers, {});
  data->Reshape({2, 4});
  test::ExpectErrorContaining([&] { layer.Forward(bottoms.pointers, {}); },
                              {"'out'", "dataset 'data'", "(2, 4)", "(2, 3)", dir.file("out.h5")});
  EXPECT_EQ(ReadBack(dir.file("out.h5"), "data").dims, (std::vector<hsize_t>{2, 3}));  // the refused pass wrote nothing
  data->Reshape({2, 3});
  label->Reshape({2, 2});
  test::ExpectErrorContaining([&] { layer.Forward(bottoms.pointers, {}); }, {"dataset 'label'", "(2, 2)", "(2)"});
  EXPECT_EQ(ReadBack(dir.file("out.h5"), "data").dims, (std::vector<hsize_t>{2, 3}));
  label->Reshape({3});
  test::ExpectErrorContaining([&] { HDF5OutputLayer(OutputParam(dir.file("x.h5"))).SetUp(bottoms.pointers, {}); },
                              {"'out'", "same number of rows"});
}

}  // namespace
}  // namespace crema
