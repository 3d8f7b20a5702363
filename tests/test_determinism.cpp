// Determinism on the CPU: the same net, data, solver and seed give byte-identical .caffemodel files, whether
// trained twice in one process or by two runs of `crema train`, with the default engines (oneDNN where the build
// has it) and with every layer forced to its reference engine. The net has every source of randomness a run
// draws from (random crops and mirrors, Dropout, weight fillers) and the engines whose sums run in parallel
// (Convolution, Pooling, InnerProduct). A change of seed must change the weights, so the comparison is not
// trivially true.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "core/context.hpp"
#include "io/proto_io.hpp"
#include "net/net.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

const char kNet[] = R"(name: 'Deterministic'
layer { name: 'data' type: 'Data' top: 'data' top: 'label'
  data_param { source: 'SOURCE' batch_size: 8 backend: LMDB }
  transform_param { crop_size: 10 mirror: true scale: 0.00390625 } }
layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
  convolution_param { num_output: 8 kernel_size: 3 weight_filler { type: 'xavier' } bias_filler { type: 'gaussian' std: 0.1 } } }
layer { name: 'pool1' type: 'Pooling' bottom: 'conv1' top: 'pool1' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: 'relu1' type: 'ReLU' bottom: 'pool1' top: 'pool1' }
layer { name: 'ip1' type: 'InnerProduct' bottom: 'pool1' top: 'ip1'
  inner_product_param { num_output: 32 weight_filler { type: 'gaussian' std: 0.1 } } }
layer { name: 'drop1' type: 'Dropout' bottom: 'ip1' top: 'ip1' dropout_param { dropout_ratio: 0.3 } }
layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' top: 'ip2'
  inner_product_param { num_output: 4 weight_filler { type: 'xavier' } } }
layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip2' bottom: 'label' top: 'loss' }
)";

class DeterminismTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    test::WriteRandomDatums(dir_.file("db"), 48, 12, 12, 4, 31);
    std::string net = kNet;
    net.replace(net.find("SOURCE"), 6, dir_.file("db"));
    std::ofstream(dir_.file("net.prototxt")) << net;
  }

  // A solver of 12 iterations (momentum, weight decay, a step lr policy) snapshotting only at the end, to
  // dir/<name>_iter_12.caffemodel.
  SolverParameter Param(const std::string& name, int seed = 5) const {
    SolverParameter param;
    param.set_net(dir_.file("net.prototxt"));
    param.set_base_lr(0.05f);
    param.set_momentum(0.9f);
    param.set_weight_decay(0.0005f);
    param.set_lr_policy("step");
    param.set_stepsize(5);
    param.set_gamma(0.5f);
    param.set_max_iter(12);
    param.set_display(0);
    param.set_snapshot_prefix(dir_.file(name));
    param.set_solver_mode(SolverParameter::CPU);
    param.set_random_seed(seed);
    return param;
  }

  // Trains in this process; returns the final .caffemodel's bytes.
  std::string TrainHere(const std::string& name, int seed = 5) {
    const SolverParameter param = Param(name, seed);
    std::shared_ptr<Context> context = Solver::ContextFor(param);
    if (!GetParam().empty()) context->ForceEngines(GetParam());
    std::unique_ptr<Solver> solver = CreateSolver(param, "", context);
    solver->Solve();
    engines_.clear();
    for (const auto& layer : solver->net()->layers()) engines_ += layer->name() + ":" + layer->engine() + " ";
    return test::FileBytes(dir_.file(name + "_iter_12.caffemodel"));
  }

  // Trains with `crema train` in a process of its own; returns the final .caffemodel's bytes.
  std::string TrainInTool(const std::string& name) {
    WriteProtoToTextFile(Param(name), dir_.file(name + "_solver.prototxt"));
    std::string command = test::ToolsDir() + "/crema train --solver=" + dir_.file(name + "_solver.prototxt");
    if (!GetParam().empty()) command += " --engine=" + GetParam();
    std::string output;
    EXPECT_EQ(test::RunCommand(command, &output), 0) << output;
    return test::FileBytes(dir_.file(name + "_iter_12.caffemodel"));
  }

  test::TempDir dir_;
  std::string engines_;
};

TEST_P(DeterminismTest, TwoTrainingsInOneProcessWriteTheSameBytes) {
  const std::string first = TrainHere("first");
  const std::string second = TrainHere("second");
  ASSERT_FALSE(first.empty());
  EXPECT_TRUE(first == second) << "engines: " << engines_;
  // The two instantiations run different convolution code: the forced reference loops, or a faster engine.
  EXPECT_EQ(engines_.find("conv1:reference") != std::string::npos, GetParam() == "reference") << engines_;
  // The same training under another seed (other fillers, crops and dropout masks) ends elsewhere.
  EXPECT_FALSE(first == TrainHere("reseeded", 6)) << "engines: " << engines_;
}

TEST_P(DeterminismTest, TwoRunsOfCremaTrainWriteTheSameBytesAsTrainingInProcess) {
  const std::string first = TrainInTool("tool1");
  const std::string second = TrainInTool("tool2");
  ASSERT_FALSE(first.empty());
  EXPECT_TRUE(first == second);
  EXPECT_TRUE(first == TrainHere("here")) << "engines: " << engines_;
}

// On the GPU, deterministic mode (CREMA_DETERMINISTIC=1, Context::set_deterministic) takes only cuDNN's
// algorithms that do not sum with atomics; two trainings must then give the same bytes too.
TEST(DeterminismGpuTest, DeterministicModeTrainsTheSameBytesTwiceOnTheGpu) {
  CREMA_SKIP_WITHOUT_GPU();
  test::TempDir dir;
  test::WriteRandomDatums(dir.file("db"), 48, 12, 12, 4, 31);
  std::string net = kNet;
  net.replace(net.find("SOURCE"), 6, dir.file("db"));
  std::ofstream(dir.file("net.prototxt")) << net;
  auto train = [&](const std::string& name) {
    SolverParameter param;
    param.set_net(dir.file("net.prototxt"));
    param.set_base_lr(0.05f);
    param.set_momentum(0.9f);
    param.set_lr_policy("fixed");
    param.set_max_iter(12);
    param.set_snapshot_prefix(dir.file(name));
    param.set_solver_mode(SolverParameter::GPU);
    param.set_random_seed(5);
    std::shared_ptr<Context> context = Solver::ContextFor(param);
    context->set_deterministic(true);
    CreateSolver(param, "", context)->Solve();
    return test::FileBytes(dir.file(name + "_iter_12.caffemodel"));
  };
  const std::string first = train("gpu1");
  ASSERT_FALSE(first.empty());
  EXPECT_TRUE(first == train("gpu2"));
}

// "": each layer's first engine that runs on the CPU (oneDNN's, in builds with it); "reference": crema's own
// loops for every layer type that has them.
INSTANTIATE_TEST_SUITE_P(Engines, DeterminismTest, ::testing::Values(std::string(), std::string("reference")),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.empty() ? std::string("DefaultEngines") : info.param;
                         });

}  // namespace
}  // namespace crema
