// Snapshot files: Caffe's HDF5 layout both ways, exact resume from HDF5 states, the checks of the snapshot folder
// before training, and what a failed write leaves behind.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "io/hdf5.hpp"
#include "io/proto_io.hpp"
#include "io/snapshot_io.hpp"
#include "net/net.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

BlobProto MakeBlob(const std::vector<int>& shape, float first, bool with_diff = false) {
  BlobProto blob;
  blob.mutable_shape();  // present even with no axes
  int count = 1;
  for (int d : shape) {
    blob.mutable_shape()->add_dim(d);
    count *= d;
  }
  for (int i = 0; i < count; ++i) blob.add_data(first + 0.25f * i);
  if (with_diff)
    for (int i = 0; i < count; ++i) blob.add_diff(-first - 0.5f * i);
  return blob;
}

// The layers of `weights` that have blobs, by name.
std::map<std::string, LayerParameter> WithBlobs(const NetParameter& weights) {
  std::map<std::string, LayerParameter> layers;
  for (const auto& layer : weights.layer())
    if (layer.blobs_size() > 0) layers[layer.name()] = layer;
  return layers;
}

std::vector<std::string> Files(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Hdf5SnapshotTest, WeightsRoundTripKeepsShapesValuesAndGradients) {
  test::TempDir dir;
  NetParameter weights;
  weights.set_name("round");
  LayerParameter* conv = weights.add_layer();
  conv->set_name("conv1");
  *conv->add_blobs() = MakeBlob({4, 3, 2, 2}, 1.f, true);
  *conv->add_blobs() = MakeBlob({4}, -2.f, true);
  weights.add_layer()->set_name("relu1");  // no parameters: a group with no datasets
  LayerParameter* nested = weights.add_layer();
  nested->set_name("inception_3a/1x1");  // '/' makes nested groups
  *nested->add_blobs() = MakeBlob({2, 5}, 3.f, true);
  LayerParameter* empty = weights.add_layer();
  empty->set_name("empty");
  *empty->add_blobs() = MakeBlob({0, 3}, 0.f, true);
  LayerParameter* scalar = weights.add_layer();
  scalar->set_name("scale");
  *scalar->add_blobs() = MakeBlob({}, 7.f, true);

  const std::string path = dir.file("w.caffemodel.h5");
  WriteNetParameterToHdf5File(weights, path);
  ASSERT_TRUE(IsHdf5File(path));
  NetParameter read;
  ReadWeightsFile(path, &read);
  const auto expected = WithBlobs(weights), actual = WithBlobs(read);
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, layer] : expected) {
    ASSERT_TRUE(actual.count(name)) << name;
    const LayerParameter& got = actual.at(name);
    ASSERT_EQ(got.blobs_size(), layer.blobs_size()) << name;
    for (int j = 0; j < layer.blobs_size(); ++j) {
      EXPECT_EQ(Blob::ShapeOf(got.blobs(j)), Blob::ShapeOf(layer.blobs(j))) << name << " " << j;
      EXPECT_EQ(std::vector<float>(got.blobs(j).data().begin(), got.blobs(j).data().end()),
                std::vector<float>(layer.blobs(j).data().begin(), layer.blobs(j).data().end()));
      EXPECT_EQ(std::vector<float>(got.blobs(j).diff().begin(), got.blobs(j).diff().end()),
                std::vector<float>(layer.blobs(j).diff().begin(), layer.blobs(j).diff().end()));
    }
  }
  // Nothing but the file itself in the folder: the temporary file was renamed, not left behind.
  EXPECT_EQ(Files(dir.path()), std::vector<std::string>{"w.caffemodel.h5"});
}

// Our files, read with the HDF5 library directly as Caffe reads them: the groups, the dataset names, float data
// in each blob's shape, "iter" and "current_step" as one integer, "learned_net" as a string.
TEST(Hdf5SnapshotTest, FilesHaveCaffesLayoutAndTypes) {
  test::TempDir dir;
  NetParameter weights;
  LayerParameter* ip = weights.add_layer();
  ip->set_name("ip");
  *ip->add_blobs() = MakeBlob({2, 3}, 0.5f);
  *ip->add_blobs() = MakeBlob({2}, 0.f);
  weights.add_layer()->set_name("loss");
  WriteNetParameterToHdf5File(weights, dir.file("w.caffemodel.h5"));
  SolverState state;
  state.set_iter(17);
  state.set_learned_net(dir.file("w.caffemodel.h5"));
  state.set_current_step(2);
  *state.add_history() = MakeBlob({2, 3}, 0.1f);
  *state.add_history() = MakeBlob({2}, 0.2f);
  state.add_loss_window(1.5f);
  WriteSolverStateToHdf5File(state, dir.file("s.solverstate.h5"));

  auto dataset_class_and_dims = [](hid_t file, const char* name, std::vector<hsize_t>* dims) {
    hid_t dataset = H5Dopen2(file, name, H5P_DEFAULT);
    EXPECT_GE(dataset, 0) << name;
    if (dataset < 0) return H5T_NO_CLASS;
    hid_t type = H5Dget_type(dataset), space = H5Dget_space(dataset);
    const H5T_class_t type_class = H5Tget_class(type);
    dims->assign(static_cast<size_t>(std::max(0, H5Sget_simple_extent_ndims(space))), 0);
    if (!dims->empty()) H5Sget_simple_extent_dims(space, dims->data(), nullptr);
    H5Sclose(space);
    H5Tclose(type);
    H5Dclose(dataset);
    return type_class;
  };
  std::vector<hsize_t> dims;
  hid_t file = H5Fopen(dir.file("w.caffemodel.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_EQ(dataset_class_and_dims(file, "data/ip/0", &dims), H5T_FLOAT);
  EXPECT_EQ(dims, (std::vector<hsize_t>{2, 3}));
  EXPECT_EQ(dataset_class_and_dims(file, "data/ip/1", &dims), H5T_FLOAT);
  EXPECT_EQ(dims, (std::vector<hsize_t>{2}));
  // Caffe writes a group for every layer, with parameters or not.
  EXPECT_GT(H5Lexists(file, "data/loss", H5P_DEFAULT), 0);
  EXPECT_LE(H5Lexists(file, "diff", H5P_DEFAULT), 0) << "no gradients were given, so no 'diff' group";
  H5Fclose(file);

  file = H5Fopen(dir.file("s.solverstate.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_EQ(dataset_class_and_dims(file, "iter", &dims), H5T_INTEGER);
  EXPECT_EQ(dims, (std::vector<hsize_t>{1}));
  int iter = 0;
  hid_t dataset = H5Dopen2(file, "iter", H5P_DEFAULT);
  H5Dread(dataset, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &iter);
  H5Dclose(dataset);
  EXPECT_EQ(iter, 17);
  EXPECT_EQ(dataset_class_and_dims(file, "current_step", &dims), H5T_INTEGER);
  EXPECT_EQ(dataset_class_and_dims(file, "learned_net", &dims), H5T_STRING);
  EXPECT_EQ(dataset_class_and_dims(file, "history/0", &dims), H5T_FLOAT);
  EXPECT_EQ(dims, (std::vector<hsize_t>{2, 3}));
  EXPECT_EQ(dataset_class_and_dims(file, "history/1", &dims), H5T_FLOAT);
  H5Fclose(file);

  SolverState read;
  ReadSolverStateFile(dir.file("s.solverstate.h5"), &read);
  EXPECT_EQ(read.SerializeAsString(), state.SerializeAsString()) << read.DebugString();
}

// A solver state and weights written the way Caffe writes them (only Caffe's datasets; a parameter shared by
// name stored once, under its owner; h5py-style variable-length strings read too).
TEST(Hdf5SnapshotTest, ReadsFilesWrittenInCaffesLayout) {
  test::TempDir dir;
  const std::string weights_path = dir.file("caffe.caffemodel.h5");
  auto write_floats = [](hid_t where, const char* name, std::vector<hsize_t> dims, const std::vector<float>& values) {
    hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    hid_t dataset = H5Dcreate2(where, name, H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    H5Dclose(dataset);
    H5Sclose(space);
  };
  hid_t file = H5Fcreate(weights_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t data = H5Gcreate2(file, "data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t ip1 = H5Gcreate2(data, "ip1", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  write_floats(ip1, "0", {2, 3}, {1, 2, 3, 4, 5, 6});
  write_floats(ip1, "1", {2}, {7, 8});
  hid_t ip2 = H5Gcreate2(data, "ip2", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  write_floats(ip2, "1", {2}, {9, 10});  // "0" is shared with ip1: Caffe stores it there only
  H5Gclose(ip2);
  H5Gclose(ip1);
  H5Gclose(data);
  H5Fclose(file);

  const char net_text[] = R"(
    layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 1 dim: 3 } } }
    layer { name: 'ip1' type: 'InnerProduct' bottom: 'data' top: 'a' param { name: 'shared' } param { }
            inner_product_param { num_output: 2 } }
    layer { name: 'ip2' type: 'InnerProduct' bottom: 'data' top: 'b' param { name: 'shared' } param { }
            inner_product_param { num_output: 2 } }
  )";
  Net net(test::ParseNet(net_text));
  const std::vector<std::string> copied = net.CopyTrainedLayersFrom(weights_path);
  EXPECT_EQ(copied, (std::vector<std::string>{"ip1", "ip2"}));
  EXPECT_EQ(test::DataOf(*net.layer_by_name("ip2")->params()[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(test::DataOf(*net.layer_by_name("ip2")->params()[1]), (std::vector<float>{9, 10}));
  EXPECT_TRUE(net.LayersNotCopied(copied).empty());
  // Where the net does not share that parameter, the missing dataset is an error naming the layer.
  Net unshared(test::ParseNet(std::regex_replace(net_text, std::regex("param \\{ name: 'shared' \\}"), "param { }")));
  test::ExpectErrorContaining([&] { unshared.CopyTrainedLayersFrom(weights_path); },
                              {weights_path, "'ip2'", "no values for its parameter blob 0"});

  const std::string state_path = dir.file("caffe.solverstate.h5");
  file = H5Fcreate(state_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t one = 1;
  for (const auto& [name, value] : std::vector<std::pair<const char*, int>>{{"iter", 30}, {"current_step", 1}}) {
    hid_t space = H5Screate_simple(1, &one, nullptr);
    hid_t dataset = H5Dcreate2(file, name, H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(dataset, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value);
    H5Dclose(dataset);
    H5Sclose(space);
  }
  {
    // h5py writes strings with variable length.
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t dataset = H5Dcreate2(file, "learned_net", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const char* text = "caffe.caffemodel.h5";
    H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &text);
    H5Dclose(dataset);
    H5Sclose(space);
    H5Tclose(type);
  }
  hid_t history = H5Gcreate2(file, "history", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  write_floats(history, "0", {2, 3}, {0.5f, 0, 0, 0, 0, 0});
  write_floats(history, "1", {2}, {0, 0.25f});
  write_floats(history, "2", {2}, {0.125f, 0});
  H5Gclose(history);
  H5Fclose(file);
  SolverState state;
  ReadSolverStateFile(state_path, &state);
  EXPECT_EQ(state.iter(), 30);
  EXPECT_EQ(state.current_step(), 1);
  EXPECT_EQ(state.learned_net(), "caffe.caffemodel.h5");
  ASSERT_EQ(state.history_size(), 3);
  EXPECT_EQ(Blob::ShapeOf(state.history(0)), (std::vector<int>{2, 3}));
  EXPECT_EQ(state.history(2).data(0), 0.125f);
  EXPECT_EQ(state.layer_state_size(), 0);
}

TEST(Hdf5SnapshotTest, MisnamedAndForeignFilesAreExplained) {
  test::TempDir dir;
  NetParameter weights;
  LayerParameter* ip = weights.add_layer();
  ip->set_name("ip");
  *ip->add_blobs() = MakeBlob({2}, 1.f);
  // HDF5 under a binary name still loads: the content decides.
  WriteNetParameterToHdf5File(weights, dir.file("renamed.caffemodel"));
  NetParameter read;
  ReadWeightsFile(dir.file("renamed.caffemodel"), &read);
  EXPECT_EQ(WithBlobs(read).size(), 1u);
  // A binary file under an .h5 name is refused, saying why.
  WriteProtoToBinaryFile(weights, dir.file("binary.caffemodel.h5"));
  test::ExpectErrorContaining([&] { ReadWeightsFile(dir.file("binary.caffemodel.h5"), &read); },
                              {"binary.caffemodel.h5", "not an HDF5 file"});
  test::ExpectErrorContaining([&] { ReadWeightsFile(dir.file("absent.caffemodel.h5"), &read); },
                              {"absent.caffemodel.h5", "does not exist"});
  // An HDF5 file without Caffe's groups (an HDF5Data source, say) is not weights.
  { Hdf5File other(dir.file("data.h5"), Hdf5File::Mode::kCreate); other.WriteInt("label", 1); other.Flush(); }
  test::ExpectErrorContaining([&] { ReadWeightsFile(dir.file("data.h5"), &read); }, {"data.h5", "group 'data'"});
  SolverState state;
  test::ExpectErrorContaining([&] { ReadSolverStateFile(dir.file("data.h5"), &state); }, {"data.h5", "'iter'"});
}

const char kTwoLayerNet[] = R"(
  name: 'shapes'
  layer { name: 'input' type: 'Input' top: 'data' input_param { shape { dim: 2 dim: 3 } } }
  layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip'
          inner_product_param { num_output: OUTPUTS weight_filler { type: 'gaussian' } } }
  layer { name: 'ip_out' type: 'InnerProduct' bottom: 'ip' top: 'out'
          inner_product_param { num_output: 2 weight_filler { type: 'gaussian' } } }
)";

NetParameter TwoLayerNet(int outputs) {
  return test::ParseNet(std::regex_replace(kTwoLayerNet, std::regex("OUTPUTS"), std::to_string(outputs)));
}

TEST(Hdf5SnapshotTest, NetWeightsWrittenAndReadBackAreEqual) {
  test::TempDir dir;
  Net net(TwoLayerNet(4));
  NetParameter weights;
  net.ToProto(&weights);
  WriteWeightsFile(weights, dir.file("n.caffemodel.h5"), SolverParameter::HDF5);
  Net copy(TwoLayerNet(4));
  copy.CopyTrainedLayersFrom(dir.file("n.caffemodel.h5"));
  for (const char* layer : {"ip", "ip_out"})
    for (size_t j = 0; j < 2; ++j)
      EXPECT_EQ(test::DataOf(*copy.layer_by_name(layer)->params()[j]),
                test::DataOf(*net.layer_by_name(layer)->params()[j]))
          << layer << " " << j;
}

TEST(Hdf5SnapshotTest, ShapeMismatchNamesTheLayerAndBothShapes) {
  test::TempDir dir;
  Net net(TwoLayerNet(4));
  NetParameter weights;
  net.ToProto(&weights);
  WriteWeightsFile(weights, dir.file("n.caffemodel.h5"), SolverParameter::HDF5);
  Net other(TwoLayerNet(5));
  test::ExpectErrorContaining([&] { other.CopyTrainedLayersFrom(dir.file("n.caffemodel.h5")); },
                              {"n.caffemodel.h5", "layer 'ip'", "4 3 (12)", "5 3 (15)"});
}

// The resume net of test_solver.cpp: LMDB data with random crops and mirrors, and Dropout, so that the runtime
// state (cursors, random streams) must survive in the HDF5 state for the runs to agree.
SolverParameter ResumeSolver(const std::string& source, const std::string& prefix, int max_iter,
                             SolverParameter::SnapshotFormat format) {
  SolverParameter param = test::ResumeSolver(test::ResumeNet(source), prefix, max_iter, 10);
  param.set_snapshot_format(format);
  return param;
}

// Every parameter value of a weights file, in order.
std::vector<float> AllValues(const std::string& path) {
  NetParameter weights;
  ReadWeightsFile(path, &weights);
  std::vector<float> values;
  for (const auto& layer : weights.layer())
    for (const auto& blob : layer.blobs()) values.insert(values.end(), blob.data().begin(), blob.data().end());
  return values;
}

TEST(Hdf5SnapshotTest, ResumingFromAnHdf5StateMatchesTheUninterruptedRunExactly) {
  test::TempDir dir;
  const std::string source = dir.file("train_lmdb");
  test::WriteRandomDatums(source, 70, 8, 8, 4, 11);
  CreateSolver(ResumeSolver(source, dir.file("straight"), 40, SolverParameter::BINARYPROTO))->Solve();
  const std::vector<float> straight = AllValues(dir.file("straight_iter_40.caffemodel"));
  ASSERT_FALSE(straight.empty());

  CreateSolver(ResumeSolver(source, dir.file("split"), 20, SolverParameter::HDF5))->Solve();
  ASSERT_TRUE(FileExists(dir.file("split_iter_20.solverstate.h5")));
  ASSERT_TRUE(FileExists(dir.file("split_iter_20.caffemodel.h5")));
  auto resumed = CreateSolver(ResumeSolver(source, dir.file("split"), 40, SolverParameter::HDF5));
  resumed->Solve(dir.file("split_iter_20.solverstate.h5"));
  EXPECT_EQ(resumed->iter(), 40);
  const std::vector<float> split = AllValues(dir.file("split_iter_40.caffemodel.h5"));
  ASSERT_EQ(split.size(), straight.size());
  EXPECT_EQ(std::memcmp(split.data(), straight.data(), split.size() * sizeof(float)), 0)
      << "the run resumed from the HDF5 state differs from the uninterrupted one";
  EXPECT_NE(AllValues(dir.file("split_iter_20.caffemodel.h5")), straight);

  // Moved elsewhere, the pair still resumes: the weights are found beside the state.
  std::filesystem::create_directory(dir.file("moved"));
  for (const char* name : {"split_iter_20.caffemodel.h5", "split_iter_20.solverstate.h5"})
    std::filesystem::rename(dir.file(name), dir.file(std::string("moved/") + name));
  auto moved = CreateSolver(ResumeSolver(source, dir.file("moved_run"), 40, SolverParameter::HDF5));
  moved->Solve(dir.file("moved/split_iter_20.solverstate.h5"));
  EXPECT_EQ(AllValues(dir.file("moved_run_iter_40.caffemodel.h5")), straight);
}

SolverParameter TinySolver(const std::string& prefix) {
  SolverParameter param;
  ReadProtoFromText("base_lr: 0.1 lr_policy: 'fixed' max_iter: 2 snapshot: 1 solver_mode: CPU", "solver", &param);
  *param.mutable_net_param() = TwoLayerNet(3);
  // A train net needs a loss: the output's sum serves.
  param.mutable_net_param()->mutable_layer(2)->add_loss_weight(1.f);
  param.set_snapshot_prefix(prefix);
  return param;
}

TEST(SnapshotFolderTest, AMissingFolderOrAFileInItsPlaceIsAnErrorBeforeTraining) {
  test::TempDir dir;
  test::ExpectErrorContaining([&] { CreateSolver(TinySolver(dir.file("absent/run"))); },
                              {"snapshot_prefix", dir.file("absent"), "does not exist"});
  std::ofstream(dir.file("plain_file")) << "x";
  test::ExpectErrorContaining([&] { CreateSolver(TinySolver(dir.file("plain_file/run"))); },
                              {dir.file("plain_file"), "is not a folder"});
  // A prefix without a folder part means the working directory.
  const std::filesystem::path previous = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  EXPECT_NO_THROW(CreateSolver(TinySolver("run_in_working_directory")));
  std::filesystem::current_path(previous);
  // Without a prefix, training that would snapshot at its end stops before the first iteration.
  SolverParameter no_prefix = TinySolver("x");
  no_prefix.clear_snapshot_prefix();
  no_prefix.set_snapshot(0);
  auto solver = CreateSolver(no_prefix);
  test::ExpectErrorContaining([&] { solver->Solve(); }, {"snapshot_after_train", "snapshot_prefix"});
  EXPECT_EQ(solver->iter(), 0);
}

TEST(SnapshotFolderTest, ASolverFileWithoutAPrefixSnapshotsBesideItselfAndAFolderPrefixGetsItsName) {
  test::TempDir dir;
  SolverParameter param = TinySolver("unused");
  param.clear_snapshot_prefix();
  WriteProtoToTextFile(param, dir.file("tiny_solver.prototxt"));
  auto beside = CreateSolverFromFile(dir.file("tiny_solver.prototxt"));
  EXPECT_EQ(beside->param().snapshot_prefix(), dir.file("tiny_solver"));
  beside->Solve();
  EXPECT_TRUE(FileExists(dir.file("tiny_solver_iter_2.caffemodel")));
  EXPECT_TRUE(FileExists(dir.file("tiny_solver_iter_1.solverstate")));

  std::filesystem::create_directory(dir.file("snapshots"));
  param.set_snapshot_prefix(dir.file("snapshots"));
  WriteProtoToTextFile(param, dir.file("tiny_solver.prototxt"));
  auto in_folder = CreateSolverFromFile(dir.file("tiny_solver.prototxt"));
  EXPECT_EQ(in_folder->param().snapshot_prefix(), dir.file("snapshots/tiny_solver"));
  in_folder->Solve();
  EXPECT_TRUE(FileExists(dir.file("snapshots/tiny_solver_iter_2.caffemodel")));
  // A prefix that is not a folder stays as it is.
  param.set_snapshot_prefix(dir.file("snapshots/run"));
  WriteProtoToTextFile(param, dir.file("tiny_solver.prototxt"));
  EXPECT_EQ(CreateSolverFromFile(dir.file("tiny_solver.prototxt"))->param().snapshot_prefix(),
            dir.file("snapshots/run"));
}

// A pid that no process has: a child's, once it has exited and been reaped.
pid_t DeadPid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}

TEST(SnapshotFolderTest, TheNextStartRemovesTheTemporaryFilesOfAKilledRunAndNothingElse) {
  test::TempDir dir;
  const std::string dead = std::to_string(DeadPid());
  const std::string alive = std::to_string(getpid());
  const std::vector<std::string> abandoned = {".run_iter_5.caffemodel." + dead + ".tmp",
                                              ".run_iter_5.solverstate.h5." + dead + ".tmp"};
  const std::vector<std::string> kept = {
      ".run_iter_6.caffemodel." + alive + ".tmp",   // its writer is alive
      ".other_iter_5.caffemodel." + dead + ".tmp",  // another prefix's
      ".run_iter_5.caffemodel." + dead + ".bak",    // not a temporary
      ".run_iter_5.caffemodel.12x4.tmp",            // no pid
      "run_iter_5.caffemodel"};                     // a snapshot
  for (const auto& name : abandoned) std::ofstream(dir.file(name)) << "partial";
  for (const auto& name : kept) std::ofstream(dir.file(name)) << "kept";
  CreateSolver(TinySolver(dir.file("run")));
  for (const auto& name : abandoned) EXPECT_FALSE(FileExists(dir.file(name))) << name;
  for (const auto& name : kept) EXPECT_TRUE(FileExists(dir.file(name))) << name;
}

TEST(SnapshotFolderTest, AReadOnlyFolderIsAnErrorBeforeTraining) {
  test::TempDir dir;
  const std::string locked = dir.file("read_only");
  std::filesystem::create_directory(locked);
  ASSERT_EQ(chmod(locked.c_str(), 0555), 0);
  if (access(locked.c_str(), W_OK) == 0) {
    chmod(locked.c_str(), 0755);
    GTEST_SKIP() << "running as root: a read-only folder is still writable, so that case cannot be checked here";
  }
  test::ExpectErrorContaining([&] { CreateSolver(TinySolver(locked + "/run")); },
                              {"cannot write in the folder", locked, "Permission denied"});
  chmod(locked.c_str(), 0755);
}

// A full disk, simulated with the file size limit (a write past it fails with EFBIG as ENOSPC would): the error
// names the file and the reason, no temporary file stays, and the earlier file of that name is untouched.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    previous_handler_ = signal(SIGXFSZ, SIG_IGN);
    rlimit limited = saved_;
    limited.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limited);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    signal(SIGXFSZ, previous_handler_);
  }

 private:
  rlimit saved_;
  void (*previous_handler_)(int);
};

TEST(SnapshotWriteFailureTest, AFailedWriteNamesTheFileKeepsTheOldOneAndLeavesNoTemporaryFile) {
  test::TempDir dir;
  const std::string path = dir.file("state.solverstate");
  WriteStringToFileAtomically("the earlier snapshot", path);
  {
    FileSizeLimit limit(4096);
    test::ExpectErrorContaining([&] { WriteStringToFileAtomically(std::string(1 << 20, 'x'), path); },
                                {"cannot write '" + path + "'", std::strerror(EFBIG)});
  }
  EXPECT_EQ(test::FileBytes(path), "the earlier snapshot");
  EXPECT_EQ(Files(dir.path()), std::vector<std::string>{"state.solverstate"});

  // The HDF5 writers go through the same atomic write.
  NetParameter small, large;
  LayerParameter* layer = small.add_layer();
  layer->set_name("ip");
  *layer->add_blobs() = MakeBlob({4}, 1.f);
  layer = large.add_layer();
  layer->set_name("ip");
  *layer->add_blobs() = MakeBlob({256, 1024}, 2.f);
  const std::string weights = dir.file("w.caffemodel.h5");
  WriteNetParameterToHdf5File(small, weights);
  {
    FileSizeLimit limit(64 * 1024);
    test::ExpectErrorContaining([&] { WriteNetParameterToHdf5File(large, weights); },
                                {"cannot write '" + weights + "'", std::strerror(EFBIG)});
  }
  NetParameter read;
  ReadWeightsFile(weights, &read);
  ASSERT_EQ(read.layer_size(), 1);
  EXPECT_EQ(read.layer(0).blobs(0).data_size(), 4);
  EXPECT_EQ(Files(dir.path()), (std::vector<std::string>{"state.solverstate", "w.caffemodel.h5"}));
}

}  // namespace
}  // namespace crema
