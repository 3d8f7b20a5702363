#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "core/context.hpp"
#include "io/proto_io.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

// One inner product (weights 2 x 3 and bias 2, the bias with lr_mult 2 and decay_mult 0) under a softmax loss.
const char kTinyNet[] = R"(
  layer { name: 'input' type: 'Input' top: 'data' top: 'label'
          input_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }
  layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip'
          param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
          inner_product_param { num_output: 2 weight_filler { type: 'gaussian' } } }
  layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }
)";

SolverParameter TinySolver(const std::string& extra) {
  SolverParameter param;
  ReadProtoFromText(extra, "solver", &param);
  ReadProtoFromText(kTinyNet, "net", param.mutable_net_param());
  return param;
}

// Sets every parameter's data and diff to fixed values: data[i] = 0.1 * (i + 1) * sign, diff[i] = 0.05 * i - 0.1.
void SetParams(Net* net, std::vector<std::vector<float>>* data, std::vector<std::vector<float>>* diff) {
  data->clear();
  diff->clear();
  for (size_t p = 0; p < net->learnable_params().size(); ++p) {
    Blob* blob = net->learnable_params()[p];
    data->emplace_back();
    diff->emplace_back();
    for (int i = 0; i < blob->count(); ++i) {
      const float value = 0.1f * (i + 1) * (i % 2 ? -1.f : 1.f);
      const float gradient = 0.05f * i - 0.1f;
      blob->mutable_cpu_data()[i] = value;
      blob->mutable_cpu_diff()[i] = gradient;
      data->back().push_back(value);
      diff->back().push_back(gradient);
    }
  }
}

TEST(SGDSolverTest, MomentumAndL2DecayMatchHandComputation) {
  auto solver = CreateSolver(TinySolver("base_lr: 0.1 lr_policy: 'fixed' momentum: 0.9 weight_decay: 0.01"));
  Net* net = solver->net();
  ASSERT_EQ(net->learnable_params().size(), 2u);
  const double lr_mult[] = {1, 2}, decay_mult[] = {1, 0};
  std::vector<std::vector<double>> velocity(2);
  for (int step = 0; step < 3; ++step) {
    std::vector<std::vector<float>> data, diff;
    SetParams(net, &data, &diff);
    solver->ApplyUpdate();
    for (size_t p = 0; p < 2; ++p) {
      velocity[p].resize(data[p].size(), 0.0);
      for (size_t i = 0; i < data[p].size(); ++i) {
        const double gradient = diff[p][i] + 0.01 * decay_mult[p] * data[p][i];
        velocity[p][i] = 0.9 * velocity[p][i] + 0.1 * lr_mult[p] * gradient;
        const double expected = data[p][i] - velocity[p][i];
        EXPECT_NEAR(net->learnable_params()[p]->cpu_data()[i], expected, 1e-6) << "step " << step << " param " << p;
        EXPECT_NEAR(solver->history()[p]->cpu_data()[i], velocity[p][i], 1e-6);
      }
    }
  }
}

TEST(SGDSolverTest, L1DecayIterSizeAndClipping) {
  auto solver = CreateSolver(TinySolver(
      "base_lr: 0.5 lr_policy: 'fixed' weight_decay: 0.1 regularization_type: 'L1' iter_size: 4"));
  std::vector<std::vector<float>> data, diff;
  SetParams(solver->net(), &data, &diff);
  solver->ApplyUpdate();
  for (size_t i = 0; i < data[0].size(); ++i) {
    const double sign = data[0][i] > 0 ? 1 : -1;
    const double expected = data[0][i] - 0.5 * (diff[0][i] / 4 + 0.1 * sign);
    EXPECT_NEAR(solver->net()->learnable_params()[0]->cpu_data()[i], expected, 1e-6);
  }
  auto clipped = CreateSolver(TinySolver("base_lr: 1 lr_policy: 'fixed' clip_gradients: 0.1"));
  SetParams(clipped->net(), &data, &diff);
  double norm = 0;
  for (const auto& d : diff)
    for (float g : d) norm += static_cast<double>(g) * g;
  norm = std::sqrt(norm);
  ASSERT_GT(norm, 0.1);
  clipped->ApplyUpdate();
  for (size_t i = 0; i < data[0].size(); ++i) {
    EXPECT_NEAR(clipped->net()->learnable_params()[0]->cpu_data()[i], data[0][i] - diff[0][i] * 0.1 / norm, 1e-6);
  }
}

TEST(SolverTest, DivergenceStopsNamingTheFirstNonFiniteLayerAndTop) {
  auto solver = CreateSolver(TinySolver("base_lr: 0.1 lr_policy: 'fixed' max_iter: 5"));
  test::FillGaussian(solver->net()->blob_by_name("data"));
  solver->net()->layer_by_name("ip")->params()[0]->mutable_cpu_data()[0] = INFINITY;
  const std::string message = test::ErrorMessage([&] { solver->Step(1); });
  EXPECT_NE(message.find("diverged at iteration 0"), std::string::npos) << message;
  EXPECT_NE(message.find("layer 'ip' (InnerProduct)"), std::string::npos) << message;
  EXPECT_NE(message.find("top 'ip'"), std::string::npos) << message;
  EXPECT_EQ(solver->iter(), 0);  // no update was applied
}

TEST(SolverTest, ConfigurationErrorsNameTheField) {
  EXPECT_NE(test::ErrorMessage([] { CreateSolver(TinySolver("base_lr: 0.1")); }).find("lr_policy"), std::string::npos);
  EXPECT_NE(test::ErrorMessage([] {
              CreateSolver(TinySolver("base_lr: 0.1 lr_policy: 'fixed' type: 'Adamax'"));
            }).find("Adamax"),
            std::string::npos);
  EXPECT_NE(test::ErrorMessage([] {
              CreateSolver(TinySolver("base_lr: 0.1 lr_policy: 'fixed' snapshot: 10"));
            }).find("snapshot_prefix"),
            std::string::npos);
  EXPECT_NE(test::ErrorMessage([] {
              CreateSolver(TinySolver("base_lr: 0.1 lr_policy: 'fixed' test_iter: 3"));
            }).find("test_interval"),
            std::string::npos);
  SolverParameter no_net;
  no_net.set_lr_policy("fixed");
  EXPECT_NE(test::ErrorMessage([&] { CreateSolver(no_net); }).find("names no net"), std::string::npos);
  no_net.set_net("/nonexistent/net.prototxt");
  EXPECT_NE(test::ErrorMessage([&] { CreateSolver(no_net); }).find("/nonexistent/net.prototxt"), std::string::npos);
}

SolverParameter ResumeSolver(const std::string& source, const std::string& prefix, int max_iter) {
  return test::ResumeSolver(test::ResumeNet(source), prefix, max_iter, 20);
}

TEST(SolverResumeTest, ResumedTrainingIsByteIdenticalToUninterrupted) {
  test::TempDir dir;
  const std::string source = dir.file("train_lmdb");
  // 70 records: batches of 16 wrap around the end several times in 40 iterations.
  test::WriteRandomDatums(source, 70, 8, 8, 4, 11);

  CreateSolver(ResumeSolver(source, dir.file("straight"), 40))->Solve();
  const std::string straight = test::FileBytes(dir.file("straight_iter_40.caffemodel"));
  ASSERT_FALSE(straight.empty());

  CreateSolver(ResumeSolver(source, dir.file("split"), 20))->Solve();
  ASSERT_TRUE(FileExists(dir.file("split_iter_20.solverstate")));
  auto resumed = CreateSolver(ResumeSolver(source, dir.file("split"), 40));
  resumed->Solve(dir.file("split_iter_20.solverstate"));
  EXPECT_EQ(resumed->iter(), 40);
  const std::string split = test::FileBytes(dir.file("split_iter_40.caffemodel"));
  EXPECT_TRUE(split == straight) << "the resumed run's weights differ from the uninterrupted run's";

  // The intermediate weights differ from the final ones, so the comparison above is not trivially true.
  EXPECT_NE(test::FileBytes(dir.file("split_iter_20.caffemodel")), straight);

  // Moving the snapshot pair elsewhere still resumes: the weights are found beside the state.
  ASSERT_EQ(std::system(("mkdir " + dir.file("moved") + " && mv " + dir.file("split_iter_20.*") + " " +
                         dir.file("moved/"))
                            .c_str()),
            0);
  auto moved = CreateSolver(ResumeSolver(source, dir.file("moved_run"), 40));
  moved->Solve(dir.file("moved/split_iter_20.solverstate"));
  EXPECT_TRUE(test::FileBytes(dir.file("moved_run_iter_40.caffemodel")) == straight);
}

TEST(SolverResumeTest, WithoutRestoredRuntimeStateTheRunDiffers) {
  // The control experiment: resuming weights and history but not data cursors or random streams (what Caffe
  // does) gives other weights, so the test above really depends on the runtime state.
  test::TempDir dir;
  const std::string source = dir.file("train_lmdb");
  test::WriteRandomDatums(source, 70, 8, 8, 4, 11);
  CreateSolver(ResumeSolver(source, dir.file("straight"), 40))->Solve();
  CreateSolver(ResumeSolver(source, dir.file("split"), 20))->Solve();
  SolverState state;
  ReadProtoFromBinaryFile(dir.file("split_iter_20.solverstate"), &state);
  EXPECT_GT(state.layer_state_size(), 0);
  state.clear_layer_state();
  WriteProtoToBinaryFile(state, dir.file("split_iter_20.solverstate"));
  CreateSolver(ResumeSolver(source, dir.file("split"), 40))->Solve(dir.file("split_iter_20.solverstate"));
  EXPECT_FALSE(test::FileBytes(dir.file("split_iter_40.caffemodel")) ==
               test::FileBytes(dir.file("straight_iter_40.caffemodel")));
}

TEST(SolverResumeTest, BadStateFilesAreNamed) {
  test::TempDir dir;
  auto solver = CreateSolver(TinySolver("base_lr: 0.1 lr_policy: 'fixed'"));
  EXPECT_NE(test::ErrorMessage([&] { solver->Restore(dir.file("absent.solverstate")); }).find("absent.solverstate"),
            std::string::npos);
  SolverState state;
  state.set_iter(3);
  state.add_history();
  WriteProtoToBinaryFile(state, dir.file("short.solverstate"));
  EXPECT_NE(test::ErrorMessage([&] { solver->Restore(dir.file("short.solverstate")); }).find("history"),
            std::string::npos);
}

// Item 7's solver hooks: per iteration OnStart, then (in the last of iter_size passes only) each parameter's
// gradient as soon as it is complete, then OnGradientsReady before the update changes any parameter.
class RecordingCallback : public SolverCallback {
 public:
  explicit RecordingCallback(Solver* solver) : solver_(solver) {}
  void OnStart(int iteration) override {
    events.push_back("start " + std::to_string(iteration));
    before_update = Parameters();
  }
  void OnParameterGradientReady(int iteration, const Net::GradientReady& ready) override {
    events.push_back("gradient " + std::to_string(iteration) + " " + std::to_string(ready.index()));
  }
  void OnGradientsReady(int iteration) override {
    events.push_back("ready " + std::to_string(iteration));
    EXPECT_EQ(Parameters(), before_update) << "the update ran before OnGradientsReady";
  }
  std::vector<float> Parameters() const {
    std::vector<float> values;
    for (Blob* blob : solver_->net()->learnable_params()) {
      const std::vector<float> data = test::DataOf(*blob);
      values.insert(values.end(), data.begin(), data.end());
    }
    return values;
  }
  std::vector<std::string> events;
  std::vector<float> before_update;

 private:
  Solver* solver_;
};

TEST(SolverCallbackTest, HooksComeInOrderOncePerIteration) {
  auto solver = CreateSolver(TinySolver("base_lr: 0.1 lr_policy: 'fixed' iter_size: 2 display: 0 max_iter: 2"));
  test::FillGaussian(solver->net()->blob_by_name("data"));
  solver->net()->blob_by_name("label")->mutable_cpu_data()[1] = 1.f;
  RecordingCallback callback(solver.get());
  solver->AddCallback(&callback);
  solver->Step(2);
  // Backward runs the loss, then ip: ip's weights (0) and bias (1) are complete after ip's step.
  EXPECT_EQ(callback.events, (std::vector<std::string>{"start 0", "gradient 0 0", "gradient 0 1", "ready 0", "start 1",
                                                       "gradient 1 0", "gradient 1 1", "ready 1"}));
  EXPECT_NE(callback.Parameters(), callback.before_update);  // and then the update did run
}

// Item 3: every net has its own context, so two solvers train at once in two threads (data prefetching, random
// crops, dropout, convolution workspaces and all), and each ends with the weights it reaches alone.
std::string ThreadNet(const std::string& source) {
  return R"(
    layer { name: 'data' type: 'Data' top: 'data' top: 'label'
            data_param { source: ')" + source + R"(' batch_size: 8 backend: LMDB }
            transform_param { scale: 0.00390625 crop_size: 6 mirror: true } }
    layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'
            convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: 'xavier' } } }
    layer { name: 'relu' type: 'ReLU' bottom: 'conv' top: 'conv' }
    layer { name: 'pool' type: 'Pooling' bottom: 'conv' top: 'pool' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
    layer { name: 'ip1' type: 'InnerProduct' bottom: 'pool' top: 'ip1'
            inner_product_param { num_output: 12 weight_filler { type: 'xavier' } } }
    layer { name: 'drop' type: 'Dropout' bottom: 'ip1' top: 'ip1' dropout_param { dropout_ratio: 0.3 } }
    layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' top: 'ip2'
            inner_product_param { num_output: 4 weight_filler { type: 'xavier' } } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip2' bottom: 'label' top: 'loss' }
  )";
}

std::string TrainedWeights(const std::string& source, const std::string& settings) {
  SolverParameter param;
  ReadProtoFromText(settings + " lr_policy: 'fixed' momentum: 0.9 display: 0 max_iter: 150 solver_mode: CPU", "solver",
                    &param);
  ReadProtoFromText(ThreadNet(source), "net", param.mutable_net_param());
  auto solver = CreateSolver(param);
  solver->Step(150);
  NetParameter weights;
  solver->net()->ToProto(&weights);
  return weights.SerializeAsString();
}

TEST(SolverThreadsTest, TwoSolversTrainAtOnceAsTheyWouldAlone) {
  test::TempDir dir;
  const std::string source = dir.file("lmdb");
  test::WriteRandomDatums(source, 50, 8, 8, 4, 3);
  const std::string first = "base_lr: 0.05 random_seed: 5 weight_decay: 0.001";
  const std::string second = "base_lr: 0.02 random_seed: 9 weight_decay: 0.01 regularization_type: 'L1'";
  const std::string alone_first = TrainedWeights(source, first), alone_second = TrainedWeights(source, second);
  ASSERT_NE(alone_first, alone_second);
  for (int round = 0; round < 2; ++round) {
    std::string together_first, together_second;
    std::thread other([&] { together_second = TrainedWeights(source, second); });
    together_first = TrainedWeights(source, first);
    other.join();
    EXPECT_TRUE(together_first == alone_first) << "round " << round;
    EXPECT_TRUE(together_second == alone_second) << "round " << round;
  }
}

}  // namespace
}  // namespace crema
