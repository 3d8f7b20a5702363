// Bad data and resources, as a user meets them through the tools (issue 12): labels outside the classes, LMDBs
// that are missing, empty or hold records of other sizes or kinds, images that cannot be read, HDF5 files without
// the datasets or with other shapes, IDX files of the wrong kind or cut short, weights, solver states and mean
// files that are truncated or of another kind, and a disk that fills up while HDF5 files, LMDBs and snapshots are
// written. Each case runs the tool and checks what the user sees with test::ExpectBadInput, which also records
// the rows of docs/reliability.md.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "io/db.hpp"
#include "io/hdf5.hpp"
#include "io/image_io.hpp"
#include "io/lmdb.hpp"
#include "io/proto_io.hpp"
#include "io/snapshot_io.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

const std::string kCrema = test::ToolsDir() + "/crema";

using test::WriteText;

// The first `size` bytes of `from`, written to `to`.
void WriteTruncated(const std::string& from, const std::string& to, size_t size) {
  const std::string bytes = test::FileBytes(from);
  ASSERT_GT(bytes.size(), size) << from;
  WriteText(to, bytes.substr(0, size));
}

std::string RandomBytes(size_t size, uint32_t seed) {
  std::string bytes(size, '\0');
  for (char& byte : bytes) {
    seed = seed * 1664525u + 1013904223u;
    byte = static_cast<char>(seed >> 24);
  }
  return bytes;
}

// A 1-channel Datum of height x width whose data holds `bytes` bytes (height * width unless told otherwise).
std::string DatumBytes(int height, int width, int label, int bytes = -1) {
  Datum datum;
  datum.set_channels(1);
  datum.set_height(height);
  datum.set_width(width);
  datum.set_data(std::string(bytes < 0 ? static_cast<size_t>(height) * width : static_cast<size_t>(bytes), '\7'));
  datum.set_label(label);
  return datum.SerializeAsString();
}

// An LMDB of 1 x 8 x 8 records labelled 0..3, where `odd` (when given) replaces record 2's value.
void WriteDatums(const std::string& path, const std::string& odd = "") {
  LmdbWriter writer(path);
  for (int i = 0; i < 4; ++i) writer.Put(RecordKey(i), i == 2 && !odd.empty() ? odd : DatumBytes(8, 8, i));
  writer.Commit();
}

// A net reading `data_layer`'s tops 'data' and 'label', with an InnerProduct of 4 outputs and a softmax loss.
std::string NetReading(const std::string& data_layer) {
  return "name: 'D'\n" + data_layer +
         "\nlayer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip'"
         " inner_product_param { num_output: 4 weight_filler { type: 'xavier' } } }\n"
         "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }\n";
}

std::string DataLayer(const std::string& source, const std::string& extra = "") {
  return "layer { name: 'data' type: 'Data' top: 'data' top: 'label' data_param { source: '" + source +
         "' batch_size: 4 backend: LMDB } " + extra + " }";
}

// `crema test` of the net `text`, written to dir/name.
std::string TestCommand(const test::TempDir& dir, const std::string& name, const std::string& text,
                        const std::string& flags = "--iterations=1") {
  WriteText(dir.file(name), text);
  return kCrema + " test --model=" + dir.file(name) + " " + flags;
}

// ---- labels -------------------------------------------------------------------------------------------------

// DummyData scores for 10 classes and labels of constant `label`, read by `consumer` (a loss or Accuracy).
std::string LabelNet(const std::string& label, const std::string& consumer) {
  return "name: 'L'\n"
         "layer { name: 'data' type: 'DummyData' top: 'data' top: 'label' dummy_data_param {"
         " shape { dim: 4 dim: 3 } shape { dim: 4 } data_filler { type: 'gaussian' std: 1 }"
         " data_filler { type: 'constant' value: " +
         label +
         " } } }\n"
         "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip'"
         " inner_product_param { num_output: 10 weight_filler { type: 'xavier' } } }\n" +
         consumer + "\n";
}

const char kSoftmaxLoss[] = "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }";
const char kAccuracy[] = "layer { name: 'acc' type: 'Accuracy' bottom: 'ip' bottom: 'label' top: 'acc' }";

TEST(BadInputLabelsTest, LabelsOutsideTheClassesAreNamedByTheLoss) {
  test::TempDir dir;
  for (const auto& [label, shown, what] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"10", "label 10", "a label equal to the number of classes (SoftmaxWithLoss)"},
           {"-1", "label -1", "a negative label (SoftmaxWithLoss)"},
           {"10.5", "label 10.5", "a fractional label above the last class (SoftmaxWithLoss)"},
           {"nan", "label nan", "a NaN label (SoftmaxWithLoss)"}}) {
    test::ExpectBadInput("data", what, TestCommand(dir, "loss.prototxt", LabelNet(label, kSoftmaxLoss)),
                         {"layer 'loss' (SoftmaxWithLoss)", shown, "at index 0", "not a class in [0, 10)"});
  }
}

TEST(BadInputLabelsTest, LabelsOutsideTheClassesAreNamedByAccuracy) {
  test::TempDir dir;
  test::ExpectBadInput("data", "a label equal to the number of classes (Accuracy)",
                       TestCommand(dir, "acc.prototxt", LabelNet("10", kAccuracy)),
                       {"layer 'acc' (Accuracy)", "label 10", "not a class in [0, 10)"});
  test::ExpectBadInput("data", "a negative label (Accuracy)", TestCommand(dir, "acc.prototxt", LabelNet("-3", kAccuracy)),
                       {"layer 'acc' (Accuracy)", "label -3", "not a class in [0, 10)"});
}

TEST(BadInputLabelsTest, AnLmdbLabelOutsideTheClassesIsNamed) {
  test::TempDir dir;
  WriteDatums(dir.file("db"), DatumBytes(8, 8, 200));
  test::ExpectBadInput("data", "an LMDB record whose label is outside the classes",
                       TestCommand(dir, "net.prototxt", NetReading(DataLayer(dir.file("db")))),
                       {"layer 'loss' (SoftmaxWithLoss)", "label 200", "[0, 4)"});
}

// ---- LMDB ---------------------------------------------------------------------------------------------------

TEST(BadInputLmdbTest, MissingEmptyAndForeignDatabasesAreNamed) {
  test::TempDir dir;
  auto command = [&](const std::string& source) {
    return TestCommand(dir, "net.prototxt", NetReading(DataLayer(source)));
  };
  test::ExpectBadInput("data", "an LMDB that does not exist", command(dir.file("nothere")),
                       {"layer 'data' (Data)", "cannot open LMDB", "nothere", "No such file or directory"});
  std::filesystem::create_directory(dir.file("emptydir"));
  test::ExpectBadInput("data", "an LMDB path that is an empty folder", command(dir.file("emptydir")),
                       {"layer 'data' (Data)", "emptydir", "holds no data.mdb"});
  WriteText(dir.file("afile"), "not a database\n");
  test::ExpectBadInput("data", "an LMDB path that is a file", command(dir.file("afile")),
                       {"layer 'data' (Data)", "afile", "is a file, not an LMDB directory"});
  std::filesystem::create_directory(dir.file("garbage"));
  WriteText(dir.file("garbage/data.mdb"), RandomBytes(20000, 3));
  test::ExpectBadInput("data", "an LMDB whose data.mdb is not LMDB's", command(dir.file("garbage")),
                       {"layer 'data' (Data)", "garbage", "not an LMDB file"});
  { LmdbWriter empty(dir.file("empty")); }
  test::ExpectBadInput("data", "an LMDB with no records", command(dir.file("empty")),
                       {"layer 'data' (Data)", "empty", "holds no records"});
  test::WriteRandomDatums(dir.file("ok"), 4, 8, 8, 4, 5);
  WriteText(dir.file("leveldb.prototxt"),
            NetReading("layer { name: 'data' type: 'Data' top: 'data' top: 'label' data_param { source: '" +
                       dir.file("ok") + "' batch_size: 4 backend: LEVELDB } }"));
  test::ExpectBadInput("data", "an LMDB read with backend: LEVELDB",
                       kCrema + " test --iterations=1 --model=" + dir.file("leveldb.prototxt"),
                       {"layer 'data' (Data)", "backend is LEVELDB", "holds an LMDB database"});
}

TEST(BadInputLmdbTest, RecordsOfAnotherSizeOrKindAreNamedByKey) {
  test::TempDir dir;
  auto command = [&](const std::string& name, const std::string& odd) {
    WriteDatums(dir.file(name), odd);
    return TestCommand(dir, name + ".prototxt", NetReading(DataLayer(dir.file(name))));
  };
  test::ExpectBadInput("data", "an LMDB record of another size than the first", command("mixed", DatumBytes(10, 10, 1)),
                       {"layer 'data' (Data)", "record '00000002'", "1 10 10", "1 8 8"});
  test::ExpectBadInput("data", "an LMDB record with fewer bytes than its shape", command("short", DatumBytes(8, 8, 1, 10)),
                       {"layer 'data' (Data)", "record '00000002'", "holds 10 bytes, not 64"});
  test::ExpectBadInput("data", "an LMDB record that is not a Datum", command("junk", RandomBytes(40, 9)),
                       {"layer 'data' (Data)", "record '00000002'", "is not a Datum"});
  test::ExpectBadInput("data", "an LMDB record of shape 0x0x0", command("nodims", DatumBytes(0, 0, 1)),
                       {"layer 'data' (Data)", "record '00000002'", "1x0x0", "must be positive"});
}

// ---- ImageData ----------------------------------------------------------------------------------------------

// A binary PGM of height x width.
void WritePgm(const std::string& path, int height, int width) {
  WriteText(path, "P5\n" + std::to_string(width) + " " + std::to_string(height) + "\n255\n" +
                      std::string(static_cast<size_t>(height) * width, '\100'));
}

std::string ImageDataNet(const std::string& list) {
  return NetReading("layer { name: 'data' type: 'ImageData' top: 'data' top: 'label' image_data_param { source: '" +
                    list + "' batch_size: 2 is_color: false } }");
}

TEST(BadInputImageDataTest, UnreadableImagesAndBadListsAreNamedWithTheLine) {
  if (!ImageCodecsAvailable()) GTEST_SKIP() << "built without OpenCV: no image can be read";
  test::TempDir dir;
  WritePgm(dir.file("a.pgm"), 6, 6);
  WriteText(dir.file("corrupt.png"), std::string("\211PNG\r\n\032\n") + RandomBytes(200, 4));
  WriteText(dir.file("truncated.pgm"), "P5\n6 6\n255\n\1\2\3");
  auto command = [&](const std::string& name, const std::string& list) {
    WriteText(dir.file(name + ".txt"), list);
    return TestCommand(dir, name + ".prototxt", ImageDataNet(dir.file(name + ".txt")));
  };
  test::ExpectBadInput("data", "an ImageData list naming a missing image",
                       command("missing", dir.file("a.pgm") + " 0\n" + dir.file("nothere.pgm") + " 1\n"),
                       {"layer 'data' (ImageData)", "line 2", "cannot read image", "nothere.pgm"});
  test::ExpectBadInput("data", "an ImageData list naming a corrupt PNG",
                       command("corrupt", dir.file("a.pgm") + " 0\n" + dir.file("corrupt.png") + " 1\n"),
                       {"layer 'data' (ImageData)", "line 2", "cannot read image", "corrupt.png"});
  test::ExpectBadInput("data", "an ImageData list naming a truncated image",
                       command("truncated", dir.file("truncated.pgm") + " 0\n" + dir.file("a.pgm") + " 1\n"),
                       {"layer 'data' (ImageData)", "line 1", "cannot read image", "truncated.pgm"});
  test::ExpectBadInput("data", "an ImageData list line whose label is not an integer",
                       command("badlabel", dir.file("a.pgm") + " x\n"),
                       {"layer 'data' (ImageData)", "line 1", "the label 'x' is not an integer"});
  test::ExpectBadInput("data", "an empty ImageData list", command("empty", ""),
                       {"layer 'data' (ImageData)", "names no images"});
  test::ExpectBadInput("data", "an ImageData list that does not exist",
                       TestCommand(dir, "nolist.prototxt", ImageDataNet(dir.file("nothere.txt"))),
                       {"layer 'data' (ImageData)", "cannot open the list file", "nothere.txt"});
}

// ---- HDF5Data -----------------------------------------------------------------------------------------------

// An HDF5 file with `rows` x `width` dataset 'data' and `label_rows` labels (no 'label' dataset when negative).
void WriteHdf5(const std::string& path, int rows, int width, int label_rows) {
  Hdf5File file(path, Hdf5File::Mode::kCreate);
  std::vector<float> values(static_cast<size_t>(rows) * width, 0.5f);
  file.AppendFloats("data", {rows, width}, values.data());
  if (label_rows >= 0) {
    std::vector<float> labels(static_cast<size_t>(label_rows), 1.f);
    file.AppendFloats("label", {label_rows}, labels.data());
  }
  file.Flush();
}

std::string Hdf5DataNet(const std::string& list) {
  return NetReading("layer { name: 'data' type: 'HDF5Data' top: 'data' top: 'label' hdf5_data_param { source: '" +
                    list + "' batch_size: 2 } }");
}

TEST(BadInputHdf5DataTest, MissingDatasetsAndOtherShapesAreNamedWithTheFile) {
  test::TempDir dir;
  WriteHdf5(dir.file("ok.h5"), 6, 4, 6);
  WriteHdf5(dir.file("nolabel.h5"), 6, 4, -1);
  WriteHdf5(dir.file("fewlabels.h5"), 6, 4, 5);
  WriteHdf5(dir.file("wide.h5"), 6, 5, 6);
  WriteText(dir.file("text.h5"), "this is not HDF5\n");
  WriteTruncated(dir.file("ok.h5"), dir.file("trunc.h5"), 300);
  auto command = [&](const std::string& name, const std::vector<std::string>& files) {
    std::string list;
    for (const auto& file : files) list += dir.file(file) + "\n";
    WriteText(dir.file(name + ".txt"), list);
    return TestCommand(dir, name + ".prototxt", Hdf5DataNet(dir.file(name + ".txt")), "--iterations=6");
  };
  test::ExpectBadInput("data", "an HDF5Data file without the dataset of a top", command("nolabel", {"nolabel.h5"}),
                       {"layer 'data' (HDF5Data)", "nolabel.h5", "line 1", "has no dataset 'label'"});
  test::ExpectBadInput("data", "an HDF5Data file whose datasets have different row counts",
                       command("fewlabels", {"fewlabels.h5"}),
                       {"layer 'data' (HDF5Data)", "fewlabels.h5", "dataset 'label' has shape (5)", "6 rows"});
  test::ExpectBadInput("data", "HDF5Data files whose items have different shapes",
                       command("wide", {"ok.h5", "wide.h5"}),
                       {"layer 'data' (HDF5Data)", "wide.h5", "line 2", "(6, 5)", "(6, 4)"});
  test::ExpectBadInput("data", "an HDF5Data list naming a missing file", command("missing", {"nothere.h5"}),
                       {"layer 'data' (HDF5Data)", "nothere.h5", "line 1", "cannot open HDF5 file"});
  test::ExpectBadInput("data", "an HDF5Data list naming a text file", command("text", {"text.h5"}),
                       {"layer 'data' (HDF5Data)", "text.h5", "not an HDF5 file"});
  test::ExpectBadInput("data", "an HDF5Data list naming a truncated HDF5 file", command("trunc", {"trunc.h5"}),
                       {"layer 'data' (HDF5Data)", "trunc.h5", "cannot open HDF5 file"});
  test::ExpectBadInput("data", "an HDF5Data list that names no file", command("none", {}),
                       {"layer 'data' (HDF5Data)", "names no HDF5 files"});
  test::ExpectBadInput("data", "an HDF5Data source that does not exist",
                       TestCommand(dir, "nolist.prototxt", Hdf5DataNet(dir.file("nothere.txt"))),
                       {"layer 'data' (HDF5Data)", "nothere.txt"});
}

// ---- IDX (convert_mnist) ------------------------------------------------------------------------------------

std::string BigEndian(uint32_t value) {
  return {static_cast<char>(value >> 24), static_cast<char>(value >> 16), static_cast<char>(value >> 8),
          static_cast<char>(value)};
}

std::string IdxImages(uint32_t magic, int count, int rows, int columns, int pixel_bytes = -1) {
  return BigEndian(magic) + BigEndian(count) + BigEndian(rows) + BigEndian(columns) +
         std::string(pixel_bytes < 0 ? static_cast<size_t>(count) * rows * columns : pixel_bytes, '\3');
}

std::string IdxLabels(uint32_t magic, int count, int label_bytes = -1) {
  return BigEndian(magic) + BigEndian(count) + std::string(label_bytes < 0 ? count : label_bytes, '\1');
}

TEST(BadInputIdxTest, WrongMagicTruncationAndCountsAreNamed) {
  test::TempDir dir;
  const std::string tool = test::ToolsDir() + "/convert_mnist ";
  WriteText(dir.file("images"), IdxImages(2051, 5, 4, 4));
  WriteText(dir.file("labels"), IdxLabels(2049, 5));
  WriteText(dir.file("images_badmagic"), IdxImages(2052, 5, 4, 4));
  WriteText(dir.file("images_trunc"), IdxImages(2051, 5, 4, 4, 30));
  WriteText(dir.file("labels_four"), IdxLabels(2049, 4));
  WriteText(dir.file("labels_trunc"), IdxLabels(2049, 5, 2));
  WriteText(dir.file("empty"), "");
  auto command = [&](const std::string& images, const std::string& labels, const std::string& flags = "") {
    return tool + dir.file(images) + " " + dir.file(labels) + " " + dir.file("db") + flags;
  };
  test::ExpectBadInput("data", "an IDX image file with a wrong magic number", command("images_badmagic", "labels"),
                       {"images_badmagic", "is not an MNIST image file", "magic number is 2052, expected 2051"});
  test::ExpectBadInput("data", "IDX label and image files given in swapped order", command("labels", "images"),
                       {"'" + dir.file("labels") + "' is not an MNIST image file", "it is a label file"});
  test::ExpectBadInput("data", "a truncated IDX image file", command("images_trunc", "labels"),
                       {"images_trunc", "is truncated", "announces 80 bytes of pixels, but only 30 follow"});
  test::ExpectBadInput("data", "a truncated IDX label file", command("images", "labels_trunc"),
                       {"labels_trunc", "is truncated", "announces 5 bytes of labels, but only 2 follow"});
  test::ExpectBadInput("data", "an empty IDX file", command("empty", "labels"), {"empty", "is truncated"});
  test::ExpectBadInput("data", "IDX files with different counts of images and labels", command("images", "labels_four"),
                       {"holds 5 images", "labels_four", "holds 4 labels"});
  test::ExpectBadInput("data", "convert_mnist --limit=0 (an empty database)", command("images", "labels", " --limit=0"),
                       {"limit is 0", "no record would be written"});
  test::ExpectBadInput("data", "a convert_mnist label map that keeps no image",
                       command("images", "labels", " --label_map=7:0"),
                       {"label map keeps no image", "labels", "hold the labels 1"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("db"))) << "a refused conversion left a database behind";
}

// ---- weights, solver states, mean files ---------------------------------------------------------------------

std::string SmallSolver(const std::string& net, const std::string& prefix, const std::string& extra = "",
                        int max_iter = 2, int snapshot = 2) {
  return "net: '" + net + "'\nbase_lr: 0.01\nmomentum: 0.9\nlr_policy: 'fixed'\nmax_iter: " +
         std::to_string(max_iter) + "\nsnapshot: " + std::to_string(snapshot) + "\nsnapshot_prefix: '" + prefix +
         "'\nsolver_mode: CPU\nrandom_seed: 1\n" + extra;
}

// Weights and solver states of the small net, written by training it for 2 iterations, once for all tests.
class BadInputSnapshotFilesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir;
    WriteText(dir_->file("net.prototxt"), test::SmallNet());
    WriteText(dir_->file("solver.prototxt"), SmallSolver(dir_->file("net.prototxt"), dir_->file("sgd")));
    WriteText(dir_->file("adam.prototxt"),
              SmallSolver(dir_->file("net.prototxt"), dir_->file("adam"), "type: 'Adam'\n"));
    WriteText(dir_->file("h5.prototxt"),
              SmallSolver(dir_->file("net.prototxt"), dir_->file("h5"), "snapshot_format: HDF5\n"));
    for (const char* solver : {"solver", "h5"}) {
      std::string output;
      ASSERT_EQ(test::RunCommand(kCrema + " train --solver=" + dir_->file(std::string(solver) + ".prototxt"), &output),
                0)
          << output;
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string file(const std::string& name) { return dir_->file(name); }
  static std::string TestWith(const std::string& weights) {
    return kCrema + " test --iterations=1 --model=" + file("net.prototxt") + " --weights=" + weights;
  }
  static std::string ResumeFrom(const std::string& state, const std::string& solver = "solver.prototxt") {
    return kCrema + " train --solver=" + file(solver) + " --snapshot=" + state;
  }
  static test::TempDir* dir_;
};
test::TempDir* BadInputSnapshotFilesTest::dir_ = nullptr;

TEST_F(BadInputSnapshotFilesTest, TruncatedAndForeignWeightsAreRefused) {
  ASSERT_TRUE(std::filesystem::exists(file("sgd_iter_2.caffemodel")));
  WriteTruncated(file("sgd_iter_2.caffemodel"), file("half.caffemodel"), 2000);
  WriteTruncated(file("sgd_iter_2.caffemodel"), file("ten.caffemodel"), 10);
  WriteText(file("random.caffemodel"), RandomBytes(5000, 7));
  WriteText(file("empty.caffemodel"), "");
  test::ExpectBadInput("files", "a truncated .caffemodel", TestWith(file("half.caffemodel")),
                       {"half.caffemodel", "is not a valid binary caffe.NetParameter", "2000 bytes", "truncated"});
  test::ExpectBadInput("files", "a .caffemodel cut to 10 bytes", TestWith(file("ten.caffemodel")),
                       {"ten.caffemodel", "is not a valid binary caffe.NetParameter", "10 bytes"});
  test::ExpectBadInput("files", "a .caffemodel of random bytes", TestWith(file("random.caffemodel")),
                       {"random.caffemodel", "is not a valid binary caffe.NetParameter", "5000 bytes"});
  test::ExpectBadInput("files", "an empty (0-byte) .caffemodel", TestWith(file("empty.caffemodel")),
                       {"weights file", "empty.caffemodel", "is empty (0 bytes)"});
  std::filesystem::create_directory(file("afolder"));
  test::ExpectBadInput("files", "a folder given as --weights", TestWith(file("afolder")),
                       {"weights file", "afolder", "is a directory"});
  test::ExpectBadInput("files", "a solver state given as --weights", TestWith(file("sgd_iter_2.solverstate")),
                       {"sgd_iter_2.solverstate", "is not a valid binary caffe.NetParameter"});
  WriteTruncated(file("h5_iter_2.caffemodel.h5"), file("trunc.caffemodel.h5"), 1000);
  test::ExpectBadInput("files", "a truncated .caffemodel.h5", TestWith(file("trunc.caffemodel.h5")),
                       {"trunc.caffemodel.h5", "cannot open HDF5 file", "not an HDF5 file"});
  test::ExpectBadInput("files", "an HDF5 solver state given as --weights", TestWith(file("h5_iter_2.solverstate.h5")),
                       {"h5_iter_2.solverstate.h5", "holds no weights", "group 'data'"});
  WriteText(file("binary.caffemodel.h5"), test::FileBytes(file("sgd_iter_2.caffemodel")));
  test::ExpectBadInput("files", "a binary .caffemodel renamed .caffemodel.h5", TestWith(file("binary.caffemodel.h5")),
                       {"binary.caffemodel.h5", "is named .h5 but is not an HDF5 file"});
}

TEST_F(BadInputSnapshotFilesTest, TruncatedAndForeignSolverStatesAreRefused) {
  ASSERT_TRUE(std::filesystem::exists(file("sgd_iter_2.solverstate")));
  WriteTruncated(file("sgd_iter_2.solverstate"), file("half.solverstate"), 1500);
  WriteText(file("random.solverstate"), RandomBytes(5000, 8));
  WriteText(file("empty.solverstate"), "");
  test::ExpectBadInput("files", "a truncated .solverstate", ResumeFrom(file("half.solverstate")),
                       {"half.solverstate", "is not a valid binary caffe.SolverState", "1500 bytes"});
  test::ExpectBadInput("files", "a .solverstate of random bytes", ResumeFrom(file("random.solverstate")),
                       {"random.solverstate", "is not a valid binary caffe.SolverState"});
  test::ExpectBadInput("files", "an empty (0-byte) .solverstate", ResumeFrom(file("empty.solverstate")),
                       {"solver state file", "empty.solverstate", "is empty (0 bytes)"});
  test::ExpectBadInput("files", "a .caffemodel given as --snapshot", ResumeFrom(file("sgd_iter_2.caffemodel")),
                       {"sgd_iter_2.caffemodel", "is not a solver state"});
  test::ExpectBadInput("files", "a .solverstate that does not exist", ResumeFrom(file("nothere.solverstate")),
                       {"nothere.solverstate", "does not exist"});
  test::ExpectBadInput("files", "a solver state of another solver type (SGD into Adam)",
                       ResumeFrom(file("sgd_iter_2.solverstate"), "adam.prototxt"),
                       {"sgd_iter_2.solverstate", "was written by solver type SGD", "Adam"});
  WriteTruncated(file("h5_iter_2.solverstate.h5"), file("trunc.solverstate.h5"), 1000);
  test::ExpectBadInput("files", "a truncated .solverstate.h5", ResumeFrom(file("trunc.solverstate.h5")),
                       {"trunc.solverstate.h5", "cannot open HDF5 file"});
  test::ExpectBadInput("files", "a .caffemodel.h5 given as --snapshot", ResumeFrom(file("h5_iter_2.caffemodel.h5")),
                       {"h5_iter_2.caffemodel.h5", "holds weights", "not a solver state"});
}

TEST(BadInputMeanFileTest, TruncatedForeignAndMisfittingMeanFilesAreRefused) {
  test::TempDir dir;
  test::WriteRandomDatums(dir.file("db"), 4, 8, 8, 4, 2);
  auto mean_of = [](int height, int width) {
    BlobProto mean;
    for (int d : {1, 1, height, width}) mean.mutable_shape()->add_dim(d);
    for (int i = 0; i < height * width; ++i) mean.add_data(100.f);
    return mean;
  };
  WriteProtoToBinaryFile(mean_of(8, 8), dir.file("mean.binaryproto"));
  WriteProtoToBinaryFile(mean_of(10, 10), dir.file("wide.binaryproto"));
  WriteTruncated(dir.file("mean.binaryproto"), dir.file("trunc.binaryproto"), 100);
  WriteText(dir.file("random.binaryproto"), RandomBytes(3000, 5));
  auto command = [&](const std::string& mean) {
    return TestCommand(dir, "net.prototxt",
                       NetReading(DataLayer(dir.file("db"), "transform_param { mean_file: '" + mean + "' }")));
  };
  test::ExpectBadInput("files", "a truncated mean file (.binaryproto)", command(dir.file("trunc.binaryproto")),
                       {"layer 'data' (Data)", "trunc.binaryproto", "is not a valid binary caffe.BlobProto"});
  test::ExpectBadInput("files", "a mean file of random bytes", command(dir.file("random.binaryproto")),
                       {"layer 'data' (Data)", "random.binaryproto", "is not a valid binary caffe.BlobProto"});
  test::ExpectBadInput("files", "a mean file that does not exist", command(dir.file("nothere.binaryproto")),
                       {"layer 'data' (Data)", "nothere.binaryproto", "No such file or directory"});
  test::ExpectBadInput("files", "a mean file of another image size than the data", command(dir.file("wide.binaryproto")),
                       {"layer 'data' (Data)", "wide.binaryproto", "1x1x10x10", "1x1x8x8"});
}

// ---- a full disk --------------------------------------------------------------------------------------------

// A tmpfs of `kilobytes` mounted on a fresh folder for the test's lifetime (root only; see available()).
class SmallDisk {
 public:
  explicit SmallDisk(int kilobytes) {
    if (geteuid() != 0) {
      why_not_ = "mounting a small tmpfs needs root";
      return;
    }
    const std::string options = "size=" + std::to_string(kilobytes) + "k";
    if (mount("tmpfs", dir_.path().c_str(), "tmpfs", 0, options.c_str()) != 0) {
      why_not_ = std::string("cannot mount a tmpfs: ") + std::strerror(errno);
      return;
    }
    mounted_ = true;
  }
  ~SmallDisk() {
    if (mounted_) umount2(dir_.path().c_str(), MNT_DETACH);
  }
  bool available() const { return mounted_; }
  const std::string& why_not() const { return why_not_; }
  std::string file(const std::string& name) const { return dir_.file(name); }

 private:
  test::TempDir dir_;
  bool mounted_ = false;
  std::string why_not_;
};

#define SKIP_WITHOUT(disk) \
  if (!(disk).available()) GTEST_SKIP() << (disk).why_not()

// DummyData of 64 x 1 x 100 x 100 floats (2.5 MB a batch), scaled by the one weight of layer 'scale'.
const char kBigNet[] = R"(name: 'Big'
layer { name: 'data' type: 'DummyData' top: 'data' top: 'label' dummy_data_param {
  shape { dim: 64 dim: 1 dim: 100 dim: 100 } shape { dim: 64 }
  data_filler { type: 'gaussian' std: 1 } data_filler { type: 'constant' value: 1 } } }
layer { name: 'scale' type: 'Scale' bottom: 'data' top: 'out' }
)";

class BadInputDiskFullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteText(dir_.file("big.prototxt"), kBigNet);
    NetParameter weights;
    LayerParameter* scale = weights.add_layer();
    scale->set_name("scale");
    BlobProto* blob = scale->add_blobs();
    blob->mutable_shape()->add_dim(1);
    blob->add_data(2.f);
    WriteProtoToBinaryFile(weights, dir_.file("big.caffemodel"));
  }
  std::string ExtractTo(const std::string& output, const std::string& format) const {
    return test::ToolsDir() + "/extract_features " + dir_.file("big.caffemodel") + " " + dir_.file("big.prototxt") +
           " out " + output + " 1 " + format;
  }
  test::TempDir dir_;
};

TEST_F(BadInputDiskFullTest, HDF5OutputOnAFullDiskFailsCleanlyAndKeepsTheEarlierFile) {
  SmallDisk disk(200);
  SKIP_WITHOUT(disk);
  WriteText(dir_.file("out.prototxt"),
            std::string(kBigNet) + "layer { name: 'h5' type: 'HDF5Output' bottom: 'out' bottom: 'label' "
                                   "hdf5_output_param { file_name: '" + disk.file("out.h5") + "' } }\n");
  test::ExpectBadInput("resources", "a full disk under an HDF5Output layer's file",
                       kCrema + " test --iterations=3 --model=" + dir_.file("out.prototxt"),
                       {"layer 'h5' (HDF5Output)", "cannot write", "out.h5", "No space left on device"});
  // The file of set-up (no rows yet) is still a complete HDF5 file; no temporary is left beside it.
  EXPECT_TRUE(IsHdf5File(disk.file("out.h5")));
  Hdf5File left(disk.file("out.h5"), Hdf5File::Mode::kRead);
  EXPECT_FALSE(left.HasDataset("data"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(disk.file("")), {}), 1);
}

TEST_F(BadInputDiskFullTest, ExtractFeaturesToAFullDiskLeavesNothing) {
  SmallDisk disk(200);
  SKIP_WITHOUT(disk);
  test::ExpectBadInput("resources", "a full disk under extract_features' HDF5 file",
                       ExtractTo(disk.file("features.h5"), "hdf5"),
                       {"cannot write", "features.h5", "No space left on device", "nothing was left"});
  EXPECT_FALSE(std::filesystem::exists(disk.file("features.h5")));
  test::ExpectBadInput("resources", "a full disk under extract_features' LMDB", ExtractTo(disk.file("features"), "lmdb"),
                       {"cannot write LMDB", "features", "No space left on device", "removed"});
  EXPECT_FALSE(std::filesystem::exists(disk.file("features")));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(disk.file("")), {}), 0);
}

TEST_F(BadInputDiskFullTest, ExtractFeaturesWithRoomStillWritesItsFiles) {
  // The control: the same extraction on a roomy disk gives the scaled data (every value twice DummyData's).
  ASSERT_EQ(std::system((ExtractTo(dir_.file("features.h5"), "hdf5") + " 2>/dev/null").c_str()), 0);
  Hdf5File file(dir_.file("features.h5"), Hdf5File::Mode::kRead);
  EXPECT_EQ(file.DatasetShape("out"), (std::vector<int64_t>{64, 1, 100, 100}));
  EXPECT_EQ(file.ReadFloats("label"), std::vector<float>(64, 1.f));
}

// A full disk while snapshotting: the error names the file and the reason, and the snapshots before it are intact.
void ExpectSnapshotsSurviveAFullDisk(const std::string& format, const std::string& weights_ext,
                                     const std::string& state_ext) {
  SmallDisk disk(200);
  SKIP_WITHOUT(disk);
  test::TempDir dir;
  WriteText(dir.file("net.prototxt"), test::SmallNet());
  WriteText(dir.file("solver.prototxt"),
            SmallSolver(dir.file("net.prototxt"), disk.file("small"), "snapshot_format: " + format + "\n", 40, 1));
  const std::string message =
      test::ExpectBadInput("resources", "a full disk while snapshotting (" + format + ")",
                           kCrema + " train --solver=" + dir.file("solver.prototxt"),
                           {"cannot write", disk.file("small_iter_"), "No space left on device"});
  std::smatch failed;
  ASSERT_TRUE(std::regex_search(message, failed, std::regex("small_iter_([0-9]+)"))) << message;
  const int iteration = std::stoi(failed[1]);
  ASSERT_GT(iteration, 1) << "the disk should hold at least the first snapshot: " << message;
  // Every earlier snapshot reads back whole, at its own iteration.
  for (int i = 1; i < iteration; ++i) {
    const std::string prefix = disk.file("small_iter_" + std::to_string(i));
    NetParameter weights;
    ReadWeightsFile(prefix + weights_ext, &weights);
    EXPECT_EQ(weights.layer_size() > 0, true) << prefix;
    SolverState state;
    ReadSolverStateFile(prefix + state_ext, &state);
    EXPECT_EQ(state.iter(), i) << prefix;
  }
  // Nothing half-written under the failed iteration's names, and no temporary files.
  const std::string failed_prefix = disk.file("small_iter_" + std::to_string(iteration));
  EXPECT_FALSE(std::filesystem::exists(failed_prefix + state_ext));
  EXPECT_FALSE(std::filesystem::exists(failed_prefix + weights_ext)) << "weights without their state";
  for (const auto& entry : std::filesystem::directory_iterator(disk.file("")))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
}

TEST(BadInputSnapshotDiskFullTest, BinarySnapshotsBeforeTheFullDiskAreKept) {
  ExpectSnapshotsSurviveAFullDisk("BINARYPROTO", ".caffemodel", ".solverstate");
}

TEST(BadInputSnapshotDiskFullTest, Hdf5SnapshotsBeforeTheFullDiskAreKept) {
  ExpectSnapshotsSurviveAFullDisk("HDF5", ".caffemodel.h5", ".solverstate.h5");
}

}  // namespace
}  // namespace crema
