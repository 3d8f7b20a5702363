// crema classify: batch inference over each kind of input (an image, a folder, a list file, an LMDB or LevelDB),
// against scores computed here by hand from the pixels for a tiny deploy net (an InnerProduct of known weights,
// then a Softmax); the CSV's rows, their order and top-k order, class names, the mean and the scale, a partial last
// batch, skipped items and the summary's accuracies; the errors a person meets; and, on Debian's Fashion-MNIST,
// agreement with `crema test` over the 10,000 test images.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/random.hpp"
#include "io/db.hpp"
#include "io/image_io.hpp"
#include "io/proto_io.hpp"
#include "net/net.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"
#include "tools/lib/classifier.hpp"
#include "tools/lib/input_source.hpp"

namespace crema {
namespace {

const std::string kCrema = test::ToolsDir() + "/crema";

#define SKIP_WITHOUT_CODECS() \
  if (!ImageCodecsAvailable()) GTEST_SKIP() << "built without OpenCV: no image can be written or read"

// Deploy: an Input of batch x channels x 2 x 2, an InnerProduct 'ip' of 4 outputs with the weights below, and
// (when `softmax`) a Softmax 'prob'.
struct TinyNet {
  int channels = 1;
  bool softmax = true;
  static constexpr int kClasses = 4, kHeight = 2, kWidth = 2;

  int inputs() const { return channels * kHeight * kWidth; }
  static double Weight(int j, int i) { return ((j * 7 + i * 3) % 11 - 5) / 4.0; }
  static double Bias(int j) { return 0.1 * j - 0.15; }

  std::string Deploy(int batch) const {
    std::string text =
        "name: 'tiny'\n"
        "layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: " +
        std::to_string(batch) + " dim: " + std::to_string(channels) + " dim: 2 dim: 2 } } }\n" +
        "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip' "
        "inner_product_param { num_output: 4 } }\n";
    if (softmax) text += "layer { name: 'prob' type: 'Softmax' bottom: 'ip' top: 'prob' }\n";
    return text;
  }
  NetParameter Weights() const {
    NetParameter param;
    LayerParameter* layer = param.add_layer();
    layer->set_name("ip");
    layer->set_type("InnerProduct");
    BlobProto* weights = layer->add_blobs();
    weights->mutable_shape()->add_dim(kClasses);
    weights->mutable_shape()->add_dim(inputs());
    for (int j = 0; j < kClasses; ++j)
      for (int i = 0; i < inputs(); ++i) weights->add_data(static_cast<float>(Weight(j, i)));
    BlobProto* bias = layer->add_blobs();
    bias->mutable_shape()->add_dim(kClasses);
    for (int j = 0; j < kClasses; ++j) bias->add_data(static_cast<float>(Bias(j)));
    return param;
  }
  // The output for one image's transformed values (channel planes, row-major).
  std::vector<double> Scores(const std::vector<double>& input) const {
    std::vector<double> scores(kClasses);
    for (int j = 0; j < kClasses; ++j) {
      scores[j] = Bias(j);
      for (int i = 0; i < inputs(); ++i) scores[j] += Weight(j, i) * input[i];
    }
    if (!softmax) return scores;
    const double top = *std::max_element(scores.begin(), scores.end());
    double total = 0;
    for (double& s : scores) total += (s = std::exp(s - top));
    for (double& s : scores) s /= total;
    return scores;
  }
};

// An image: its pixels as channel planes (C x 2 x 2 bytes), its key in the CSV, its known label.
struct Image {
  std::string key;
  std::vector<unsigned char> planes;
  std::optional<int> label;
};

std::vector<unsigned char> RandomPlanes(int channels, uint64_t seed) {
  RandomStream random(seed);
  std::vector<unsigned char> planes(channels * 4);
  for (auto& p : planes) p = static_cast<unsigned char>(random.UniformInt(256));
  return planes;
}

// Writes `planes` (C x height x width) as a PNG file (interleaved B, G, R for 3 channels).
void WritePng(const std::string& path, const std::vector<unsigned char>& planes, int channels, int height = 2,
              int width = 2) {
  std::vector<unsigned char> interleaved(planes.size());
  for (int c = 0; c < channels; ++c)
    for (int p = 0; p < height * width; ++p) interleaved[p * channels + c] = planes[c * height * width + p];
  std::ofstream(path, std::ios::binary) << EncodeImage(".png", interleaved.data(), height, width, channels);
}

Datum RawDatum(const std::vector<unsigned char>& planes, int channels, std::optional<int> label) {
  Datum datum;
  datum.set_channels(channels);
  datum.set_height(2);
  datum.set_width(2);
  datum.set_data(std::string(planes.begin(), planes.end()));
  if (label) datum.set_label(*label);
  return datum;
}

// An LMDB of raw 1-channel Datums, keyed RecordKey(0), RecordKey(1)...
void LmdbWriterFor(const std::string& path, const std::vector<std::pair<std::vector<unsigned char>, int>>& records) {
  std::unique_ptr<DbWriter> writer = CreateDbWriter(DataParameter::LMDB, path);
  for (size_t i = 0; i < records.size(); ++i)
    writer->Put(RecordKey(static_cast<int64_t>(i)),
                RawDatum(records[i].first, 1, records[i].second).SerializeAsString());
  writer->Commit();
}

std::string Fixed4(double value) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(4) << value;
  return out.str();
}

// The expected scores of an image: (pixel - mean) * scale through the net.
std::vector<double> ExpectedScores(const TinyNet& net, const std::vector<unsigned char>& planes,
                                   const std::vector<double>& mean, double scale) {
  std::vector<double> input(planes.size());
  for (size_t i = 0; i < planes.size(); ++i) input[i] = (planes[i] - mean[mean.size() == 1 ? 0 : i]) * scale;
  return net.Scores(input);
}

// Class indices, best first (ties: lower index).
std::vector<int> Ranking(const std::vector<double>& scores) {
  std::vector<int> order(scores.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  return order;
}

std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
    } else if (c == '\n') {
      row.push_back(field);
      field.clear();
      rows.push_back(row);
      row.clear();
    } else {
      field += c;
    }
  }
  EXPECT_TRUE(row.empty() && field.empty()) << "the CSV does not end with a line break";
  return rows;
}

class ClassifyTest : public ::testing::Test {
 protected:
  // Writes the deploy net (batch `batch`) and its weights; returns the flags naming them.
  std::string NetFlags(const TinyNet& net, int batch = 3) {
    const std::string deploy = dir_.file("deploy_" + std::to_string(net.channels) + "_" + std::to_string(net.softmax) +
                                         "_" + std::to_string(batch) + ".prototxt");
    std::ofstream(deploy) << net.Deploy(batch);
    const std::string weights = dir_.file("tiny_" + std::to_string(net.channels) + ".caffemodel");
    WriteProtoToBinaryFile(net.Weights(), weights);
    return "--model=" + deploy + " --weights=" + weights;
  }
  // Runs crema classify with `args`, the CSV going to a file; expects `status`; returns the output (log).
  std::string Classify(const std::string& args, int status = 0) {
    std::string output;
    EXPECT_EQ(test::RunCommand(kCrema + " classify --output=" + dir_.file("predictions.csv") + " " + args, &output),
              status)
        << "crema classify " << args << "\n"
        << output;
    return output;
  }
  std::vector<std::vector<std::string>> Csv() { return ParseCsv(test::FileBytes(dir_.file("predictions.csv"))); }

  // Expects the CSV to hold exactly `images`, in order, each with the k best classes by hand.
  void ExpectPredictions(const TinyNet& net, const std::vector<Image>& images, int top_k,
                         const std::vector<double>& mean, double scale, const std::vector<std::string>& names = {}) {
    const auto rows = Csv();
    ASSERT_EQ(rows.size(), images.size() + 1);
    std::vector<std::string> header = {"key", "label"};
    for (int k = 1; k <= top_k; ++k) {
      header.push_back("top" + std::to_string(k) + "_label");
      header.push_back("top" + std::to_string(k) + "_score");
    }
    EXPECT_EQ(rows[0], header);
    const auto name = [&](int index) { return names.empty() ? std::to_string(index) : names[index]; };
    for (size_t n = 0; n < images.size(); ++n) {
      const auto& row = rows[n + 1];
      ASSERT_EQ(row.size(), header.size()) << "row " << n + 1;
      EXPECT_EQ(row[0], images[n].key) << "row " << n + 1;
      EXPECT_EQ(row[1], images[n].label ? name(*images[n].label) : "") << "row " << n + 1;
      const std::vector<double> scores = ExpectedScores(net, images[n].planes, mean, scale);
      const std::vector<int> ranking = Ranking(scores);
      for (int k = 0; k < top_k; ++k) {
        EXPECT_EQ(row[2 + 2 * k], name(ranking[k])) << images[n].key << ", rank " << k + 1;
        const double expected = scores[ranking[k]];
        EXPECT_NEAR(std::stod(row[3 + 2 * k]), expected, 1e-5 * std::fabs(expected) + 1e-6)
            << images[n].key << ", rank " << k + 1;
      }
    }
  }

  test::TempDir dir_;
};

// A folder: every image below it (a subfolder too, any case of extension), in path order; other files ignored. Four
// images in batches of 3: the last batch is partial.
TEST_F(ClassifyTest, AFolderOfImagesInPathOrderWithAPartialLastBatch) {
  SKIP_WITHOUT_CODECS();
  const TinyNet net;
  const std::string folder = dir_.file("images");
  std::filesystem::create_directories(folder + "/sub");
  const std::vector<std::string> names = {"b.png", "a.png", "sub/c.png", "e.PNG"};
  std::map<std::string, std::vector<unsigned char>> planes;
  for (size_t i = 0; i < names.size(); ++i) {
    planes[names[i]] = RandomPlanes(1, 100 + i);
    WritePng(folder + "/" + names[i], planes[names[i]], 1);
  }
  std::ofstream(folder + "/notes.txt") << "not an image\n";
  std::vector<Image> expected;
  for (const std::string name : {"a.png", "b.png", "e.PNG", "sub/c.png"})
    expected.push_back({folder + "/" + name, planes[name], std::nullopt});
  const std::string output = Classify(NetFlags(net) + " --input=" + folder + " --top_k=3 --scale=0.00390625");
  ExpectPredictions(net, expected, 3, {0.0}, 0.00390625);
  EXPECT_CONTAINS(output, "folder '" + folder + "' (4 images)");
  EXPECT_CONTAINS(output, "in batches of 3");
  EXPECT_CONTAINS(output, "Classified 4 images in ");
  EXPECT_CONTAINS(output, "images/s");
  EXPECT_CONTAINS(output, "No image had a known label");
  EXPECT_CONTAINS(output, "output 'prob' (Softmax, 4 classes): probabilities");
}

// A list file: `path label` lines (or a path alone), relative to --root_folder; an unreadable image is skipped,
// named, and counted; top-1 and top-2 accuracy over the lines with a label.
TEST_F(ClassifyTest, AListFileWithLabelsAndAnUnreadableImage) {
  SKIP_WITHOUT_CODECS();
  const TinyNet net;
  const std::string folder = dir_.file("images");
  std::filesystem::create_directories(folder + "/sub dir");
  const std::vector<double> mean = {20.0};
  const double scale = 0.01;
  std::vector<Image> images;
  for (const std::string name : {"a.png", "sub dir/c.png", "b.png", "e.png"}) {
    const auto planes = RandomPlanes(1, 200 + images.size());
    WritePng(folder + "/" + name, planes, 1);
    images.push_back({name, planes, std::nullopt});
  }
  // a: labelled with its best class; sub dir/c: its second best; e: its last; b: no label.
  images[0].label = Ranking(ExpectedScores(net, images[0].planes, mean, scale))[0];
  images[1].label = Ranking(ExpectedScores(net, images[1].planes, mean, scale))[1];
  images[3].label = Ranking(ExpectedScores(net, images[3].planes, mean, scale))[3];
  std::ofstream(folder + "/broken.png") << "not a PNG";
  std::ofstream(dir_.file("list.txt")) << "a.png " << *images[0].label << "\n"
                                       << "sub dir/c.png " << *images[1].label << "\n"
                                       << "missing.png 1\n"
                                       << "b.png\n\n"
                                       << "broken.png 2\r\n"
                                       << "e.png\t" << *images[3].label << "\n";
  const std::string output = Classify(NetFlags(net) + " --input=" + dir_.file("list.txt") + " --root_folder=" + folder +
                                      " --top_k=2 --mean_value=20 --scale=0.01 --batch_size=2");
  ExpectPredictions(net, images, 2, mean, scale);
  EXPECT_CONTAINS(output, "(6 images, 5 with a label)");
  EXPECT_CONTAINS(output, "Skipping 'missing.png'");
  EXPECT_CONTAINS(output, folder + "/missing.png");
  EXPECT_CONTAINS(output, "Skipping 'broken.png'");
  EXPECT_CONTAINS(output, "Classified 4 images");
  EXPECT_CONTAINS(output, "Skipped 2 unreadable images");
  EXPECT_CONTAINS(output, "Top-1 accuracy: 0.3333 (1 of 3 images with a known label)");
  EXPECT_CONTAINS(output, "Top-2 accuracy: 0.6667 (2 of 3)");
  EXPECT_CONTAINS(output, "1 classified images had no known label");
}

// One image file; class names from a labels file (a name with a comma is quoted); --top_k above the number of
// classes is clamped, with a note.
TEST_F(ClassifyTest, OneImageWithClassNamesAndTopKClamped) {
  SKIP_WITHOUT_CODECS();
  const TinyNet net;
  const auto planes = RandomPlanes(1, 300);
  WritePng(dir_.file("one.png"), planes, 1);
  const std::vector<std::string> names = {"tee", "trouser, long", "say \"hi\"", "bag"};
  std::ofstream(dir_.file("labels.txt")) << names[0] << "\r\n"
                                         << names[1] << "\n"
                                         << names[2] << "\n"
                                         << names[3] << "\n\n";
  const std::string output = Classify(NetFlags(net) + " --input=" + dir_.file("one.png") +
                                      " --labels=" + dir_.file("labels.txt") + " --top_k=10 --scale=0.01");
  ExpectPredictions(net, {{dir_.file("one.png"), planes, std::nullopt}}, 4, {0.0}, 0.01, names);
  EXPECT_CONTAINS(output, "top_k 10 is more than the 4 classes of output 'prob': reporting all 4");
  EXPECT_CONTAINS(test::FileBytes(dir_.file("predictions.csv")), "\"trouser, long\"");
  EXPECT_CONTAINS(test::FileBytes(dir_.file("predictions.csv")), "\"say \"\"hi\"\"\"");
}

// A database: the Datums' labels are the known labels, encoded records are decoded, and records that are not a
// Datum or have the wrong number of channels are skipped and named. Both stores, detected from their files.
TEST_F(ClassifyTest, DatabaseRecordsWithTheirLabels) {
  const TinyNet net;
  for (const DataParameter::DB backend : {DataParameter::LMDB, DataParameter::LEVELDB}) {
    SCOPED_TRACE(DbBackendName(backend));
    const std::string db = dir_.file(std::string("db_") + DbBackendName(backend));
    std::vector<Image> images;
    {
      std::unique_ptr<DbWriter> writer = CreateDbWriter(backend, db);
      for (int i = 0; i < 7; ++i) {
        const auto planes = RandomPlanes(1, 400 + i);
        const int label = i % 3 == 0 ? Ranking(ExpectedScores(net, planes, {128.0}, 0.02))[0] : i % 4;
        writer->Put(RecordKey(i), RawDatum(planes, 1, label).SerializeAsString());
        images.push_back({RecordKey(i), planes, label});
      }
      writer->Put(RecordKey(7), RawDatum(RandomPlanes(3, 7), 3, 1).SerializeAsString());
      writer->Put(RecordKey(8), std::string("\xff\xff\xff not a datum", 16));
      if (ImageCodecsAvailable()) {
        const auto planes = RandomPlanes(1, 409);
        Datum encoded;
        encoded.set_encoded(true);
        encoded.set_label(2);
        encoded.set_data(EncodeImage(".png", planes.data(), 2, 2, 1));
        writer->Put(RecordKey(9), encoded.SerializeAsString());
        images.push_back({RecordKey(9), planes, 2});
      }
      writer->Commit();
    }
    const std::string output =
        Classify(NetFlags(net) + " --input=" + db + " --mean_value=128 --scale=0.02 --top_k=2 --batch_size=4");
    ExpectPredictions(net, images, 2, {128.0}, 0.02);
    EXPECT_CONTAINS(output, "Skipping '" + RecordKey(7) + "'");
    EXPECT_CONTAINS(output, "3 channel(s), but the net's input takes 1");
    EXPECT_CONTAINS(output, "record '" + RecordKey(8) + "' is not a Datum");
    EXPECT_CONTAINS(output, "Skipped 2 unreadable images");
    int top1 = 0, top2 = 0;
    for (const auto& image : images) {
      const std::vector<int> ranking = Ranking(ExpectedScores(net, image.planes, {128.0}, 0.02));
      top1 += ranking[0] == *image.label;
      top2 += ranking[0] == *image.label || ranking[1] == *image.label;
    }
    EXPECT_GE(top1, 3);  // the records labelled with their best class
    EXPECT_CONTAINS(output, "Top-1 accuracy: " + Fixed4(top1 / static_cast<double>(images.size())) + " (" +
                                std::to_string(top1) + " of " + std::to_string(images.size()));
    EXPECT_CONTAINS(output, "Top-2 accuracy: ");
    EXPECT_CONTAINS(output, "(" + std::to_string(top2) + " of " + std::to_string(images.size()) + ")");
  }
}

// A mean file is subtracted value by value; a mean file of another shape is an error naming it and both shapes.
TEST_F(ClassifyTest, AMeanFileIsSubtractedValueByValue) {
  const TinyNet net;
  const auto planes = RandomPlanes(1, 500);
  { LmdbWriterFor(dir_.file("db"), {{planes, 1}}); }
  BlobProto mean;
  mean.set_num(1);
  mean.set_channels(1);
  mean.set_height(2);
  mean.set_width(2);
  const std::vector<double> mean_values = {10.5, 200.0, 3.0, 77.25};
  for (double v : mean_values) mean.add_data(static_cast<float>(v));
  WriteProtoToBinaryFile(mean, dir_.file("mean.binaryproto"));
  Classify(NetFlags(net) + " --input=" + dir_.file("db") + " --mean_file=" + dir_.file("mean.binaryproto") +
           " --scale=0.02 --top_k=4");
  ExpectPredictions(net, {{RecordKey(0), planes, 1}}, 4, mean_values, 0.02);

  mean.set_height(3);
  mean.add_data(1.f);
  mean.add_data(2.f);
  WriteProtoToBinaryFile(mean, dir_.file("mean3x2.binaryproto"));
  const std::string output =
      Classify(NetFlags(net) + " --input=" + dir_.file("db") + " --mean_file=" + dir_.file("mean3x2.binaryproto"), 1);
  EXPECT_CONTAINS(output, "crema: error: ");
  EXPECT_CONTAINS(output, dir_.file("mean3x2.binaryproto"));
  EXPECT_CONTAINS(output, "1x1x3x2");
  EXPECT_CONTAINS(output, "1x1x2x2");
}

// The last batch is padded, never reshaped: every batch size gives the same rows, byte for byte.
TEST_F(ClassifyTest, ScoresDoNotDependOnTheBatchSize) {
  const TinyNet net;
  std::vector<std::pair<std::vector<unsigned char>, int>> records;
  for (int i = 0; i < 7; ++i) records.push_back({RandomPlanes(1, 600 + i), i % 4});
  LmdbWriterFor(dir_.file("db"), records);
  std::string reference;
  for (const int batch : {0, 1, 2, 4, 7, 16}) {
    Classify(NetFlags(net) + " --input=" + dir_.file("db") +
             " --scale=0.00390625 --batch_size=" + std::to_string(batch));
    const std::string csv = test::FileBytes(dir_.file("predictions.csv"));
    if (reference.empty()) {
      reference = csv;
      std::vector<Image> images;
      for (int i = 0; i < 7; ++i) images.push_back({RecordKey(i), records[i].first, records[i].second});
      ExpectPredictions(net, images, 4, {0.0}, 0.00390625);
    }
    EXPECT_EQ(csv, reference) << "--batch_size=" << batch;
  }
}

// Colour: 3 channels in OpenCV's B, G, R order, as Caffe's converters store them.
TEST_F(ClassifyTest, ColourImagesFeedTheirBgrPlanes) {
  SKIP_WITHOUT_CODECS();
  TinyNet net;
  net.channels = 3;
  const auto planes = RandomPlanes(3, 700);
  WritePng(dir_.file("colour.png"), planes, 3);
  Classify(NetFlags(net, 2) + " --input=" + dir_.file("colour.png") + " --mean_value=100,50,25 --scale=0.01");
  // Per-channel means: expand to one per value.
  std::vector<double> mean;
  for (double m : {100.0, 50.0, 25.0}) mean.insert(mean.end(), 4, m);
  ExpectPredictions(net, {{dir_.file("colour.png"), planes, std::nullopt}}, 4, mean, 0.01);
}

// An image of another size is resized to the input: a uniform image stays uniform.
TEST_F(ClassifyTest, ImagesOfAnotherSizeAreResized) {
  SKIP_WITHOUT_CODECS();
  const TinyNet net;
  WritePng(dir_.file("big.png"), std::vector<unsigned char>(5 * 3, 77), 1, 5, 3);
  Classify(NetFlags(net) + " --input=" + dir_.file("big.png") + " --scale=0.01");
  ExpectPredictions(net, {{dir_.file("big.png"), std::vector<unsigned char>(4, 77), std::nullopt}}, 4, {0.0}, 0.01);
}

// Without a Softmax the output's raw values are reported, and the log says so; the legacy input fields work.
TEST_F(ClassifyTest, RawScoresAndLegacyInputFields) {
  TinyNet net;
  net.softmax = false;
  const auto planes = RandomPlanes(1, 800);
  LmdbWriterFor(dir_.file("db"), {{planes, 0}});
  const std::string legacy = dir_.file("legacy.prototxt");
  std::ofstream(legacy) << "name: 'tiny' input: 'data' input_dim: 5 input_dim: 1 input_dim: 2 input_dim: 2\n"
                           "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip' "
                           "inner_product_param { num_output: 4 } }\n";
  WriteProtoToBinaryFile(net.Weights(), dir_.file("tiny.caffemodel"));
  const std::string output = Classify("--model=" + legacy + " --weights=" + dir_.file("tiny.caffemodel") +
                                      " --input=" + dir_.file("db") + " --scale=0.1");
  ExpectPredictions(net, {{RecordKey(0), planes, 0}}, 4, {0.0}, 0.1);
  EXPECT_CONTAINS(output, "in batches of 5");
  EXPECT_CONTAINS(output, "output 'ip' (InnerProduct, 4 classes): the output's raw values");
}

// Without a terminal, progress is a log line every --log_every batches, with the throughput.
TEST_F(ClassifyTest, ProgressIsLoggedEveryFewBatches) {
  const TinyNet net;
  std::vector<std::pair<std::vector<unsigned char>, int>> records;
  for (int i = 0; i < 9; ++i) records.push_back({RandomPlanes(1, 900 + i), 0});
  LmdbWriterFor(dir_.file("db"), records);
  const std::string output = Classify(NetFlags(net) + " --input=" + dir_.file("db") + " --batch_size=2 --log_every=2");
  EXPECT_CONTAINS(output, "Batch 2: 4 of 9 images, ");
  EXPECT_CONTAINS(output, "Batch 4: 8 of 9 images, ");
  EXPECT_EQ(output.find("Batch 1: "), std::string::npos) << output;
  EXPECT_EQ(output.find("Batch 5: "), std::string::npos) << output;
}

// The library: a Classifier over an input source, its predictions and summary, without the tool.
TEST_F(ClassifyTest, TheLibraryClassifierCountsAndRanks) {
  const TinyNet net;
  std::vector<std::pair<std::vector<unsigned char>, int>> records;
  for (int i = 0; i < 5; ++i) records.push_back({RandomPlanes(1, 1000 + i), i % 4});
  LmdbWriterFor(dir_.file("db"), records);
  NetParameter param = test::ParseNet(net.Deploy(3));
  param.mutable_state()->set_phase(TEST);
  Net deploy(param);
  deploy.CopyTrainedLayersFrom(net.Weights());
  ClassifierOptions options;
  options.top_k = 2;
  options.batch_size = 2;
  options.transform.set_scale(0.02f);
  Classifier classifier(&deploy, options);
  EXPECT_EQ(classifier.batch_size(), 2);
  EXPECT_EQ(classifier.classes(), 4);
  EXPECT_EQ(classifier.input_name(), "data");
  EXPECT_EQ(classifier.output_name(), "prob");
  EXPECT_TRUE(classifier.output_is_probability());
  auto source = OpenInputSource(dir_.file("db"));
  std::vector<Prediction> predictions;
  int batches = 0;
  const ClassificationSummary summary = classifier.Run(
      source.get(), [&](const Prediction& p) { predictions.push_back(p); },
      [&](const ClassificationProgress& progress) {
        ++batches;
        EXPECT_EQ(progress.total, 5);
        EXPECT_EQ(progress.batches, batches);
      });
  EXPECT_EQ(batches, 3);
  ASSERT_EQ(predictions.size(), 5u);
  int top1 = 0, top2 = 0;
  for (int i = 0; i < 5; ++i) {
    const std::vector<double> scores = ExpectedScores(net, records[i].first, {0.0}, 0.02);
    const std::vector<int> ranking = Ranking(scores);
    EXPECT_EQ(predictions[i].key, RecordKey(i));
    ASSERT_TRUE(predictions[i].label.has_value());
    EXPECT_EQ(*predictions[i].label, records[i].second);
    ASSERT_EQ(predictions[i].top.size(), 2u);
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(predictions[i].top[k].label, ranking[k]);
      EXPECT_NEAR(predictions[i].top[k].score, scores[ranking[k]], 1e-6);
    }
    top1 += ranking[0] == records[i].second;
    top2 += ranking[0] == records[i].second || ranking[1] == records[i].second;
  }
  EXPECT_EQ(summary.classified, 5);
  EXPECT_EQ(summary.skipped, 0);
  EXPECT_EQ(summary.labelled, 5);
  EXPECT_EQ(summary.top1_correct, top1);
  EXPECT_EQ(summary.topk_correct, top2);
  EXPECT_EQ(summary.top_k, 2);
}

TEST_F(ClassifyTest, BadInputsAreNamed) {
  const TinyNet net;
  LmdbWriterFor(dir_.file("db"), {{RandomPlanes(1, 1), 0}});
  const std::string flags = NetFlags(net);
  const std::string db = " --input=" + dir_.file("db");

  EXPECT_CONTAINS(Classify(flags + " --input=" + dir_.file("nowhere"), 1),
                  "input '" + dir_.file("nowhere") + "' does not exist");
  EXPECT_CONTAINS(Classify(flags, 1), "--input");
  EXPECT_CONTAINS(Classify("--model=" + dir_.file("deploy_1_1_3.prototxt") + db, 1), "--weights");
  EXPECT_CONTAINS(Classify(flags + db + " --top_k=0", 1), "--top_k must be positive");
  EXPECT_CONTAINS(Classify(flags + db + " --mean_value=1,x", 1), "'x' is not a number");
  EXPECT_CONTAINS(Classify(flags + db + " --backend=rocksdb", 1), "'rocksdb'");
  EXPECT_CONTAINS(Classify(flags + db + " --mean_value=1,2", 1), "mean_value is given 2 times");

  // Too few class names: the file and both counts.
  std::ofstream(dir_.file("three.txt")) << "a\nb\nc\n";
  const std::string few = Classify(flags + db + " --labels=" + dir_.file("three.txt"), 1);
  EXPECT_CONTAINS(few, "labels file '" + dir_.file("three.txt") + "' names 3 classes, but output 'prob'");
  EXPECT_CONTAINS(few, "has 4");

  // A net without an input.
  std::ofstream(dir_.file("no_input.prototxt"))
      << "name: 'noinput' layer { name: 'data' type: 'DummyData' top: 'data' "
         "dummy_data_param { shape { dim: 3 dim: 4 } } }\n"
         "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip' inner_product_param { num_output: 4 } }\n";
  EXPECT_CONTAINS(
      Classify("--model=" + dir_.file("no_input.prototxt") + " --weights=" + dir_.file("tiny_1.caffemodel") + db, 1),
      "net 'noinput' has no input");

  // Weights for another net: the layer and the shapes.
  std::ofstream(dir_.file("five.prototxt"))
      << "name: 'five' layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 1 dim: 1 dim: 2 "
         "dim: 2 } } }\nlayer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip' "
         "inner_product_param { num_output: 5 } }\n";
  const std::string other =
      Classify("--model=" + dir_.file("five.prototxt") + " --weights=" + dir_.file("tiny_1.caffemodel") + db, 1);
  EXPECT_CONTAINS(other, "crema: error: ");
  EXPECT_CONTAINS(other, "ip");

  // A folder with no image, and an input none of whose images can be read.
  std::filesystem::create_directories(dir_.file("empty"));
  EXPECT_CONTAINS(Classify(flags + " --input=" + dir_.file("empty"), 1), "holds no image files");
  std::ofstream(dir_.file("bad.png")) << "not a PNG";
  const std::string none = Classify(flags + " --input=" + dir_.file("bad.png"), 1);
  EXPECT_CONTAINS(none, "Skipping '" + dir_.file("bad.png") + "'");
  EXPECT_CONTAINS(none, "none of the 1 images");

  // Image files for an input of 2 channels.
  TinyNet two;
  two.channels = 2;
  std::ofstream(dir_.file("list.txt")) << "x.png 0\n";
  EXPECT_CONTAINS(Classify(NetFlags(two) + " --input=" + dir_.file("list.txt"), 1), "decode to 1 (grey) or 3");
}

// Fashion-MNIST: classify over the 10,000 test images (the deploy net, the pixels scaled as the train_test net's
// TEST Data layer scales them) agrees with `crema test` over the same records with the same weights.
TEST(ClassifyFashionMnistTest, AgreesWithCremaTestOverTheTenThousandTestImages) {
  CREMA_SKIP_WITHOUT_FASHION_MNIST();
  // Weights trained here (the demo's lenet_iter_10000.caffemodel is not in a clean checkout): the example LeNet,
  // 300 iterations over 6,000 training images.
  const test::FashionMnistSlices slices(6000, 10000);
  const std::string examples = test::SourceDir() + "/examples/fashion_mnist";
  SolverParameter solver = slices.ExampleSolver("fashion_mnist/lenet_solver.prototxt");
  solver.set_max_iter(300);
  solver.clear_test_iter();
  solver.add_test_iter(1);
  solver.set_test_interval(1000);  // no tests while training: this test's own comparison is the point
  solver.set_test_initialization(false);
  solver.set_snapshot_after_train(true);
  CreateSolver(solver)->Solve();
  const std::string weights = solver.snapshot_prefix() + "_iter_300.caffemodel";
  const std::string train_test = slices.PointAt(ReadFileToString(examples + "/lenet_train_test.prototxt"));
  test::TempDir dir;
  std::ofstream(dir.file("train_test.prototxt")) << train_test;
  // The scale the TEST phase's Data layer applies, given to classify as well.
  NetParameter param;
  ReadProtoFromText(train_test, "lenet_train_test.prototxt", &param);
  float scale = 0;
  for (const auto& layer : param.layer())
    if (layer.type() == "Data" && layer.include_size() > 0 && layer.include(0).phase() == TEST)
      scale = layer.transform_param().scale();
  ASSERT_EQ(scale, 0.00390625f);

  std::string test_output;
  ASSERT_EQ(test::RunCommand(kCrema + " test --model=" + dir.file("train_test.prototxt") + " --weights=" + weights +
                                 " --iterations=100",
                             &test_output),
            0)
      << test_output;
  std::smatch match;
  const std::string last_lines = test_output.substr(test_output.rfind("Loss: "));
  ASSERT_TRUE(std::regex_search(last_lines, match, std::regex("accuracy = ([0-9.]+)"))) << last_lines;
  const double test_accuracy = std::stod(match[1]);

  std::string classify_output;
  ASSERT_EQ(test::RunCommand(kCrema + " classify --model=" + examples + "/lenet_deploy.prototxt --weights=" + weights +
                                 " --input=" + slices.test_db() +
                                 " --scale=0.00390625 --output=" + dir.file("predictions.csv"),
                             &classify_output),
            0)
      << classify_output;
  ASSERT_TRUE(
      std::regex_search(classify_output, match, std::regex("Top-1 accuracy: ([0-9.]+) \\(([0-9]+) of ([0-9]+) images")))
      << classify_output;
  const int correct = std::stoi(match[2]);
  EXPECT_EQ(std::stoi(match[3]), 10000);
  EXPECT_EQ(correct, static_cast<int>(std::lround(test_accuracy * 10000))) << "crema test: " << test_accuracy;
  EXPECT_GT(correct, 6500);  // chance is 1,000; LeNet after 300 iterations: about 0.7
  EXPECT_CONTAINS(classify_output, "Classified 10000 images");

  // The CSV says the same: 10,000 rows whose best class is the label `correct` times.
  const auto rows = ParseCsv(test::FileBytes(dir.file("predictions.csv")));
  ASSERT_EQ(rows.size(), 10001u);
  int agreeing = 0;
  for (size_t i = 1; i < rows.size(); ++i) agreeing += rows[i][1] == rows[i][2];
  EXPECT_EQ(agreeing, correct);
  EXPECT_EQ(rows[1][0], RecordKey(0));
}

}  // namespace
}  // namespace crema
