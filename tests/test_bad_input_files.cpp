// Bad files given for nets, weights and data layers, as a user meets them through the tools (issue 12): a folder
// or a missing file as --model, a .caffemodel given as --model, weights that supply nothing to the net (another
// net's, whose layers have other names; a net definition given as --weights) for crema test, fine-tuning and
// extract_features, while a partial copy (fine-tuning's new layers) stays allowed; an HDF5 file, a binary file or a
// folder given as HDF5Data's source list; ImageData images of different sizes. Each case runs the tool and checks what
// the user sees with test::ExpectBadInput, which also records the rows of docs/reliability.md. (Truncated, random,
// empty and folder weights and solver states: tests/test_bad_input_data.cpp.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/hdf5.hpp"
#include "io/image_io.hpp"
#include "io/proto_io.hpp"
#include "io/snapshot_io.hpp"
#include "net/net.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

const std::string kCrema = test::ToolsDir() + "/crema";

using test::WriteText;

// The net with `conv_outputs` outputs in conv1 (another net's weights: 6).
std::string SmallNet(int conv_outputs = 4) { return test::SmallNet("type: 'gaussian' std: 1", "", conv_outputs); }

// The net, its weights and several wrong weights, written once for every test.
class BadInputWeightsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir;
    WriteText(file("net.prototxt"), SmallNet());
    Net net(test::ParseNet(SmallNet()));
    NetParameter weights;
    net.ToProto(&weights);
    WriteProtoToBinaryFile(weights, file("small.caffemodel"));
    // The same weights under other layer names: nothing matches.
    NetParameter renamed = weights;
    for (auto& layer : *renamed.mutable_layer()) {
      if (layer.name() == "conv1") layer.set_name("convA");
      if (layer.name() == "ip1") layer.set_name("ipA");
    }
    WriteProtoToBinaryFile(renamed, file("renamed.caffemodel"));
    // Only conv1: fine-tuning with a new classifier.
    NetParameter partial = weights;
    partial.clear_layer();
    for (const auto& layer : weights.layer())
      if (layer.name() == "conv1") *partial.add_layer() = layer;
    WriteProtoToBinaryFile(partial, file("partial.caffemodel"));
    // Another net: conv1 of 6 outputs.
    Net other(test::ParseNet(SmallNet(6)));
    NetParameter other_weights;
    other.ToProto(&other_weights);
    WriteProtoToBinaryFile(other_weights, file("other.caffemodel"));
    WriteText(file("solver.prototxt"), "net: '" + file("net.prototxt") +
                                           "'\nbase_lr: 0.01\nlr_policy: 'fixed'\nmax_iter: 1\nsnapshot_prefix: '" +
                                           file("snap") + "'\nsolver_mode: CPU\n");
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string file(const std::string& name) { return dir_->file(name); }
  static std::string TestWith(const std::string& weights) {
    return kCrema + " test --iterations=1 --model=" + file("net.prototxt") + " --weights=" + weights;
  }
  static test::TempDir* dir_;
};
test::TempDir* BadInputWeightsTest::dir_ = nullptr;

TEST_F(BadInputWeightsTest, WeightsThatReachNoLayerAreRefused) {
  const std::vector<std::string> renamed = {"renamed.caffemodel",
                                            "none of the 2 layer(s) with parameters of net 'Small' (conv1, ip1)",
                                            "it holds weights for layer(s) convA, ipA only"};
  test::ExpectBadInput("files", "weights of a net whose layers have other names (crema test)",
                       TestWith(file("renamed.caffemodel")), renamed);
  test::ExpectBadInput(
      "files", "weights of a net whose layers have other names (fine-tuning)",
      kCrema + " train --solver=" + file("solver.prototxt") + " --weights=" + file("renamed.caffemodel"), renamed);
  EXPECT_FALSE(FileExists(file("snap_iter_1.caffemodel")));
  test::ExpectBadInput("files", "weights of a net whose layers have other names (extract_features)",
                       test::ToolsDir() + "/extract_features " + file("renamed.caffemodel") + " " +
                           file("net.prototxt") + " ip1 " + file("features") + " 1",
                       renamed);
  EXPECT_FALSE(std::filesystem::exists(file("features")));
  test::ExpectBadInput("files", "a net prototxt given as --weights", TestWith(file("net.prototxt")),
                       {"weights file", "net.prototxt", "none of the 2 layer(s) with parameters",
                        "holds no weights at all", "looks like a net definition"});
  // Already right before issue 12, kept in the table: weights of another shape, and weights that do not exist.
  test::ExpectBadInput("files", "weights of a net whose layers have other shapes", TestWith(file("other.caffemodel")),
                       {"other.caffemodel", "cannot copy weights into layer 'conv1' (Convolution)",
                        "6 1 5 5 (150) in the weights file but 4 1 5 5 (100) in the net"});
  test::ExpectBadInput("files", "--weights naming a file that does not exist", TestWith(file("nothere.caffemodel")),
                       {"weights file", "nothere.caffemodel", "does not exist"});
}

TEST_F(BadInputWeightsTest, APartialCopyForFineTuningIsAllowedAndTheOthersAreNamed) {
  std::string output;
  ASSERT_EQ(
      test::RunCommand(
          kCrema + " train --solver=" + file("solver.prototxt") + " --weights=" + file("partial.caffemodel"), &output),
      0)
      << output;
  EXPECT_NE(output.find("Layer ip1: not in the weights files"), std::string::npos) << output;
  EXPECT_EQ(output.find("Layer conv1: not in the weights files"), std::string::npos) << output;
  EXPECT_TRUE(FileExists(file("snap_iter_1.caffemodel")));
  // The net's own weights, all of them matching, are taken without a word about fillers.
  ASSERT_EQ(test::RunCommand(TestWith(file("small.caffemodel")), &output), 0) << output;
  EXPECT_EQ(output.find("not in the weights files"), std::string::npos) << output;
}

// The library says the same to its callers, the file named where there is one.
TEST_F(BadInputWeightsTest, TheLibraryRefusesWeightsThatReachNoLayer) {
  Net net(test::ParseNet(SmallNet()));
  test::ExpectErrorContaining([&] { net.CopyTrainedLayersFrom(file("renamed.caffemodel")); },
                              {"weights file '" + file("renamed.caffemodel") + "'", "conv1, ip1", "convA, ipA"});
  NetParameter nothing;
  nothing.set_name("nothing");
  test::ExpectErrorContaining([&] { net.CopyTrainedLayersFrom(nothing); },
                              {"none of the 2 layer(s) with parameters", "it holds no weights at all"});
  // A net without parameters takes any weights, matching or not.
  Net plain(
      test::ParseNet("name: 'plain' layer { name: 'data' type: 'DummyData' top: 'data'"
                     " dummy_data_param { shape { dim: 1 } } }"));
  EXPECT_TRUE(plain.CopyTrainedLayersFrom(file("renamed.caffemodel")).empty());
  // The right weights give the writer's outputs exactly.
  const std::vector<std::string> copied = net.CopyTrainedLayersFrom(file("small.caffemodel"));
  EXPECT_EQ(copied, (std::vector<std::string>{"conv1", "ip1"}));
  Net partial(test::ParseNet(SmallNet()));
  EXPECT_EQ(partial.CopyTrainedLayersFrom(file("partial.caffemodel")), (std::vector<std::string>{"conv1"}));
  EXPECT_EQ(partial.LayersNotCopied({"conv1"}), (std::vector<std::string>{"ip1"}));
}

TEST(BadInputModelFileTest, FoldersAndMissingOrBinaryModelFilesAreNamed) {
  test::TempDir dir;
  std::filesystem::create_directory(dir.file("a_folder"));
  test::ExpectBadInput("files", "a folder given as --model",
                       kCrema + " time --iterations=1 --model=" + dir.file("a_folder"),
                       {"cannot read '" + dir.file("a_folder") + "'", "is a folder, not a file"});
  test::ExpectBadInput("files", "--model naming a file that does not exist",
                       kCrema + " time --iterations=1 --model=" + dir.file("nothere.prototxt"),
                       {"model file", "nothere.prototxt", "does not exist"});
  Net net(test::ParseNet(SmallNet()));
  NetParameter weights;
  net.ToProto(&weights);
  // A .caffemodel carries its net's definition and serves as --model; the same bytes under a prototxt's name do
  // not parse as text, and HDF5 weights hold no definition.
  WriteProtoToBinaryFile(weights, dir.file("small.caffemodel"));
  std::string output;
  EXPECT_EQ(test::RunCommand(kCrema + " time --iterations=1 --model=" + dir.file("small.caffemodel"), &output), 0)
      << output;
  WriteProtoToBinaryFile(weights, dir.file("binary.prototxt"));
  test::ExpectBadInput("files", "a binary .caffemodel named .prototxt given as --model",
                       kCrema + " time --iterations=1 --model=" + dir.file("binary.prototxt"), {"binary.prototxt:"});
  WriteWeightsFile(weights, dir.file("small.caffemodel.h5"), SolverParameter::HDF5);
  test::ExpectBadInput("files", "HDF5 weights given alone, without --model",
                       kCrema + " time --iterations=1 --weights=" + dir.file("small.caffemodel.h5"),
                       {"weights file '" + dir.file("small.caffemodel.h5") + "' carries no net definition",
                        "HDF5 weights keep only the parameter blobs", "give the net's prototxt as well"});
  // The library's readers refuse a folder the same way, whatever reads it.
  NetParameter param;
  test::ExpectErrorContaining([&] { ReadProtoFromTextFile(dir.file("a_folder"), &param); },
                              {dir.file("a_folder"), "is a folder, not a file"});
  test::ExpectErrorContaining([&] { ReadProtoFromBinaryFile(dir.file("a_folder"), &param); },
                              {dir.file("a_folder"), "is a folder, not a file"});
  // Devices and pipes are read as files (weights through /dev/stdin work), parsed as they are read: an endless
  // device is refused at its first byte that starts no field, not read until memory runs out.
  WriteText(dir.file("small.prototxt"), SmallNet());
  EXPECT_EQ(test::RunCommand(kCrema + " time --iterations=1 --model=" + dir.file("small.prototxt") +
                                 " --weights=/dev/stdin < " + dir.file("small.caffemodel"),
                             &output),
            0)
      << output;
  test::ExpectBadInput("files", "an endless device given as --weights (/dev/zero)",
                       kCrema + " time --iterations=1 --model=" + dir.file("small.prototxt") + " --weights=/dev/zero",
                       {"'/dev/zero' is not a valid binary caffe.NetParameter", "parsing stopped after 1 bytes"});
}

// ---- data layers' files --------------------------------------------------------------------------------------

// A net reading `data_layer`'s tops 'data' and 'label' into an InnerProduct of 2 outputs and a softmax loss.
std::string NetReading(const std::string& data_layer) {
  return "name: 'D'\n" + data_layer +
         "\nlayer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip'"
         " inner_product_param { num_output: 2 weight_filler { type: 'xavier' } } }\n"
         "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }\n";
}

TEST(BadInputDataFilesTest, AnHdf5DataSourceThatIsNotATextListIsNamed) {
  test::TempDir dir;
  {
    Hdf5File file(dir.file("rows.h5"), Hdf5File::Mode::kCreate);
    const std::vector<float> data(8 * 4, 0.5f), labels = {0, 1, 0, 1, 0, 1, 0, 1};
    file.AppendFloats("data", {8, 4}, data.data());
    file.AppendFloats("label", {8}, labels.data());
    file.Flush();
  }
  WriteText(dir.file("list.txt"), dir.file("rows.h5") + "\n");
  WriteText(dir.file("binary.txt"), dir.file("rows.h5") + "\n" + std::string("\x01\x02\0garbage", 10));
  std::filesystem::create_directory(dir.file("a_folder"));
  auto command = [&](const std::string& name, const std::string& source) {
    WriteText(dir.file(name + ".prototxt"),
              NetReading("layer { name: 'data' type: 'HDF5Data' top: 'data' top: 'label' hdf5_data_param { source: '" +
                         source + "' batch_size: 4 } }"));
    return kCrema + " time --iterations=2 --forward_only --model=" + dir.file(name + ".prototxt");
  };
  test::ExpectBadInput("data", "an .h5 file given as HDF5Data's source (which lists .h5 files)",
                       command("h5", dir.file("rows.h5")),
                       {"layer 'data' (HDF5Data)", "hdf5_data_param.source '" + dir.file("rows.h5") + "'",
                        "is an HDF5 file", "source must be a text file listing HDF5 files, one per line"});
  test::ExpectBadInput("data", "a binary file given as HDF5Data's source", command("binary", dir.file("binary.txt")),
                       {"layer 'data' (HDF5Data)", "binary.txt", "is not a text file (line 2 holds control bytes)"});
  test::ExpectBadInput("data", "a folder given as HDF5Data's source", command("folder", dir.file("a_folder")),
                       {"layer 'data' (HDF5Data)", "a_folder", "is a folder"});
  // The list naming the same file is read.
  std::string output;
  EXPECT_EQ(test::RunCommand(command("list", dir.file("list.txt")), &output), 0) << output;
}

// A grey PGM of height x width, every pixel `value`.
void WritePgm(const std::string& path, int height, int width, unsigned char value) {
  WriteText(path, "P5\n" + std::to_string(width) + " " + std::to_string(height) + "\n255\n" +
                      std::string(static_cast<size_t>(height) * width, static_cast<char>(value)));
}

// As in Caffe, each batch takes the shape of its images (a batch of 1 lets a fully convolutional net see images of
// any size), so only the images of one batch must agree; the first that does not is named.
TEST(BadInputDataFilesTest, ImageDataImagesOfAnotherSizeInOneBatchAreNamed) {
  if (!ImageCodecsAvailable()) GTEST_SKIP() << "built without OpenCV: no image can be read";
  test::TempDir dir;
  WritePgm(dir.file("a0.pgm"), 8, 8, 10);
  WritePgm(dir.file("a1.pgm"), 8, 8, 20);
  WritePgm(dir.file("b0.pgm"), 10, 12, 30);
  WriteText(dir.file("list.txt"), "a0.pgm 0\nb0.pgm 0\na1.pgm 1\n");
  auto command = [&](const std::string& name, const std::string& extra) {
    WriteText(dir.file(name + ".prototxt"),
              NetReading("layer { name: 'data' type: 'ImageData' top: 'data' top: 'label' image_data_param { "
                         "source: '" +
                         dir.file("list.txt") + "' root_folder: '" + dir.path() + "/' batch_size: 2 is_color: false " +
                         extra + " } }"));
    return kCrema + " time --iterations=3 --forward_only --model=" + dir.file(name + ".prototxt");
  };
  test::ExpectBadInput("data", "ImageData images of different sizes in one batch (no new_height/new_width)",
                       command("mixed", ""),
                       {"layer 'data' (ImageData)", "image '" + dir.file("b0.pgm") + "' (line 2 of", "list.txt",
                        "1 10 12 (120)", "1 8 8 (64)", "new_height", "new_width"});
  std::string output;
  EXPECT_EQ(test::RunCommand(command("resized", "new_height: 8 new_width: 8"), &output), 0) << output;
}

}  // namespace
}  // namespace crema
