#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "core/common.hpp"
#include "io/proto_io.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

class ProtoIoTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_.file(name);
    std::ofstream(path) << text;
    return path;
  }
  test::TempDir dir_;
};

TEST_F(ProtoIoTest, SyntaxErrorNamesFileLineAndColumn) {
  const std::string path = Write("bad.prototxt", "name: 'x'\nlayer {\n  name: 'a'\n  type: 'ReLU'\n  bottom 'b'\n}\n");
  NetParameter net;
  const std::string message = test::ErrorMessage([&] { ReadProtoFromTextFile(path, &net); });
  EXPECT_NE(message.find(path + ":5:10:"), std::string::npos) << message;
}

TEST_F(ProtoIoTest, UnknownFieldNamesLine) {
  const std::string path = Write("bad.prototxt", "base_lr: 0.1\nlearning_rate: 0.2\n");
  SolverParameter solver;
  const std::string message = test::ErrorMessage([&] { ReadProtoFromTextFile(path, &solver); });
  EXPECT_NE(message.find(path + ":2:"), std::string::npos) << message;
  EXPECT_NE(message.find("learning_rate"), std::string::npos) << message;
}

TEST_F(ProtoIoTest, MissingFileNamesPath) {
  NetParameter net;
  const std::string path = dir_.file("absent.caffemodel");
  EXPECT_NE(test::ErrorMessage([&] { ReadProtoFromBinaryFile(path, &net); }).find(path), std::string::npos);
  EXPECT_NE(test::ErrorMessage([&] { ReadProtoFromTextFile(path, &net); }).find(path), std::string::npos);
}

TEST_F(ProtoIoTest, GarbageBinaryIsRejectedNamingPath) {
  const std::string path = Write("garbage.caffemodel", std::string("\xff\xff\xff\xff not a proto", 17));
  NetParameter net;
  EXPECT_NE(test::ErrorMessage([&] { ReadProtoFromBinaryFile(path, &net); }).find(path), std::string::npos);
}

TEST_F(ProtoIoTest, TextAndBinaryRoundTrips) {
  NetParameter net;
  net.set_name("round");
  LayerParameter* layer = net.add_layer();
  layer->set_name("conv");
  layer->set_type("Convolution");
  layer->mutable_convolution_param()->set_num_output(7);
  layer->mutable_convolution_param()->add_kernel_size(3);
  BlobProto* blob = layer->add_blobs();
  blob->mutable_shape()->add_dim(2);
  blob->add_data(1.5f);
  blob->add_data(-2.25f);
  const std::string text_path = dir_.file("net.prototxt");
  const std::string binary_path = dir_.file("net.caffemodel");
  WriteProtoToTextFile(net, text_path);
  WriteProtoToBinaryFile(net, binary_path);
  NetParameter from_text, from_binary;
  ReadProtoFromTextFile(text_path, &from_text);
  ReadProtoFromBinaryFile(binary_path, &from_binary);
  EXPECT_EQ(from_text.SerializeAsString(), net.SerializeAsString());
  EXPECT_EQ(from_binary.SerializeAsString(), net.SerializeAsString());
  // No temporary file is left behind by the atomic writes.
  EXPECT_FALSE(FileExists(text_path + ".tmp." + std::to_string(getpid())));
}

TEST_F(ProtoIoTest, CaffeFieldNumbersAndDefaults) {
  // Wire compatibility: a few field numbers checked on the encoded bytes (tag = number << 3 | wire type).
  LayerParameter layer;
  layer.set_name("a");  // field 1, length-delimited: tag 0x0a
  EXPECT_EQ(static_cast<unsigned char>(layer.SerializeAsString()[0]), 0x0a);
  LayerParameter conv;
  conv.mutable_convolution_param();  // field 106: tag (106 << 3 | 2) = 850 = varint 0xd2 0x06
  const std::string bytes = conv.SerializeAsString();
  ASSERT_GE(bytes.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0xd2);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0x06);
  SolverParameter solver;
  EXPECT_EQ(solver.solver_mode(), SolverParameter::GPU);
  EXPECT_EQ(solver.average_loss(), 1);
  EXPECT_EQ(solver.regularization_type(), "L2");
  EXPECT_EQ(solver.random_seed(), -1);
  EXPECT_TRUE(solver.snapshot_after_train());
  EXPECT_TRUE(solver.test_initialization());
  DataParameter data;
  EXPECT_EQ(data.backend(), DataParameter::LEVELDB);
  EXPECT_EQ(data.prefetch(), 4u);
  LossParameter loss;
  EXPECT_EQ(loss.normalization(), LossParameter::VALID);
  PoolingParameter pooling;
  EXPECT_EQ(pooling.round_mode(), PoolingParameter::CEIL);
  NetState state;
  EXPECT_EQ(state.phase(), TEST);
  FillerParameter filler;
  EXPECT_EQ(filler.type(), "constant");
  EXPECT_EQ(filler.std(), 1.f);
}

// What a resumed run reports: each changed leaf field once, with its path and both values in prototxt form.
TEST_F(ProtoIoTest, DescribeChangesNamesEveryChangedField) {
  SolverParameter before, after;
  ReadProtoFromText("base_lr: 0.01 momentum: 0.9 stepvalue: 100 stepvalue: 200 lr_policy: 'multistep' "
                    "train_state { stage: 'a' } clip_gradients: 10",
                    "before", &before);
  ReadProtoFromText("base_lr: 0.001 momentum: 0.9 stepvalue: 100 stepvalue: 300 stepvalue: 400 lr_policy: 'multistep' "
                    "train_state { stage: 'b' } weight_decay: 0 type: 'Adam'",
                    "after", &after);
  const std::vector<std::string> lines = DescribeChanges(before, after);
  const std::vector<std::string> expected = {"base_lr: 0.01 -> 0.001",
                                             "stepvalue[1]: 200 -> 300",
                                             "added stepvalue[2]: 400",
                                             "clip_gradients: 10 -> -1",
                                             "train_state.stage[0]: \"a\" -> \"b\"",
                                             "type: \"SGD\" -> \"Adam\""};
  for (const auto& line : expected)
    EXPECT_NE(std::find(lines.begin(), lines.end(), line), lines.end()) << line << " not among:\n"
                                                                          << ::testing::PrintToString(lines);
  // An unset field counts as its default, both ways (clip_gradients' is -1, type's SGD): weight_decay: 0 set on one
  // side only is no change.
  EXPECT_EQ(lines.size(), expected.size()) << ::testing::PrintToString(lines);
  EXPECT_TRUE(DescribeChanges(before, before).empty());
}

}  // namespace
}  // namespace crema
