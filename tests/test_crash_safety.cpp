// Crash safety: `crema train` snapshotting every iteration is killed with SIGKILL at random moments, many
// times, in both snapshot formats. After every kill, every file under a snapshot's name must be complete (it
// loads), the newest solver state (by iteration) must restore a solver, and nothing else may be in the folder but
// hidden temporary files. Now and then `crema train --snapshot=<newest>` resumes for two iterations and exits 0.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "io/proto_io.hpp"
#include "io/snapshot_io.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"

extern char** environ;

namespace crema {
namespace {

const std::string kCrema = test::ToolsDir() + "/crema";
constexpr int kRounds = 24;                // per format
constexpr int kLongestWaitMs = 200;        // the most a round lets training run before the kill

// Starts `crema train --solver=<solver>` (more flags in `extra`) with its output going to `log`.
pid_t StartTraining(const std::string& solver, const std::string& log, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {kCrema, "train", "--solver=" + solver};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, kCrema.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return error == 0 ? pid : -1;
}

// The exit status, or 128 + the signal that ended it.
int Wait(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Kills and reaps a child that a failed assertion left running, so that it writes nothing into a folder that is
// being removed.
class ChildGuard {
 public:
  explicit ChildGuard(pid_t pid) : pid_(pid) {}
  ~ChildGuard() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait(pid_);
    }
  }
  // Kills the child and returns how it ended.
  int Kill() {
    kill(pid_, SIGKILL);
    const int status = Wait(pid_);
    pid_ = -1;
    return status;
  }
  int Join() {
    const int status = Wait(pid_);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_;
};

// Whether the folder holds a snapshot file, finished or being written (the solver's write probe does not count).
bool SnapshotStarted(const std::string& folder) {
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    if (entry.path().filename().string().find("snap_iter_") != std::string::npos) return true;
  return false;
}

class CrashSafetyTest : public ::testing::TestWithParam<SolverParameter::SnapshotFormat> {
 protected:
  void SetUp() override {
    test::WriteRandomDatums(dir_.file("train_lmdb"), 64, 8, 8, 4, 7);
    // Big enough parameters that a snapshot takes a moment to write, so kills land inside writes too.
    net_ = dir_.file("net.prototxt");
    std::ofstream(net_) << R"(
      name: 'crash'
      layer { name: 'data' type: 'Data' top: 'data' top: 'label'
              data_param { source: ')" << dir_.file("train_lmdb") << R"(' batch_size: 8 backend: LMDB }
              transform_param { scale: 0.00390625 mirror: true } }
      layer { name: 'ip1' type: 'InnerProduct' bottom: 'data' top: 'ip1'
              inner_product_param { num_output: 256 weight_filler { type: 'xavier' } } }
      layer { name: 'relu1' type: 'ReLU' bottom: 'ip1' top: 'ip1' }
      layer { name: 'drop1' type: 'Dropout' bottom: 'ip1' top: 'ip1' }
      layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' top: 'ip2'
              inner_product_param { num_output: 4 weight_filler { type: 'xavier' } } }
      layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip2' bottom: 'label' top: 'loss' }
    )";
  }

  SolverParameter Solver(const std::string& prefix, int max_iter) const {
    SolverParameter param;
    ReadProtoFromText("base_lr: 0.01 lr_policy: 'fixed' momentum: 0.9 display: 0 snapshot: 1 random_seed: 3 "
                      "solver_mode: CPU snapshot_after_train: false",
                      "solver", &param);
    param.set_net(net_);
    param.set_snapshot_prefix(prefix);
    param.set_max_iter(max_iter);
    param.set_snapshot_format(GetParam());
    return param;
  }

  std::string WriteSolver(const std::string& name, const SolverParameter& param) const {
    const std::string path = dir_.file(name);
    WriteProtoToTextFile(param, path);
    return path;
  }

  test::TempDir dir_;
  std::string net_;
};

TEST_P(CrashSafetyTest, SnapshotsSurviveSigkillAtAnyMoment) {
  const bool hdf5 = GetParam() == SolverParameter::HDF5;
  const std::string suffix = hdf5 ? "\\.h5" : "";
  const std::regex snapshot_name("snap_iter_([0-9]+)\\.(caffemodel|solverstate)" + suffix);
  const unsigned seed = std::random_device()();
  std::mt19937 random(seed);
  SCOPED_TRACE("random seed " + std::to_string(seed));
  int rounds_with_state = 0, temporary_files = 0, resumed = 0;

  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string folder = dir_.file("round" + std::to_string(round));
    std::filesystem::create_directory(folder);
    const std::string prefix = folder + "/snap";
    const std::string solver = WriteSolver("solver" + std::to_string(round) + ".prototxt", Solver(prefix, 100000000));
    const pid_t pid = StartTraining(solver, dir_.file("train.log"));
    ASSERT_GT(pid, 0) << "cannot start " << kCrema;
    ChildGuard training(pid);
    // Training runs once the first snapshot file appears; from there, a random time, then the kill.
    const auto start = std::chrono::steady_clock::now();
    while (!SnapshotStarted(folder) && std::chrono::steady_clock::now() - start < std::chrono::seconds(20))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(SnapshotStarted(folder)) << "no snapshot after 20 s:\n" << test::FileBytes(dir_.file("train.log"));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, kLongestWaitMs)(random)));
    ASSERT_EQ(training.Kill(), 128 + SIGKILL);

    int newest = -1;
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
      const std::string name = entry.path().filename();
      const std::string path = entry.path();
      std::smatch match;
      if (name[0] == '.') {
        ++temporary_files;  // an interrupted write: hidden, never under a snapshot's name
        continue;
      }
      ASSERT_TRUE(std::regex_match(name, match, snapshot_name)) << "unexpected file " << path;
      // Every file under a snapshot's name is complete.
      try {
        if (match[2] == "caffemodel") {
          NetParameter weights;
          ReadWeightsFile(path, &weights);
          int with_parameters = 0;
          for (const auto& layer : weights.layer()) with_parameters += layer.blobs_size() == 2;
          EXPECT_EQ(with_parameters, 2) << path;
        } else {
          SolverState state;
          ReadSolverStateFile(path, &state);
          EXPECT_EQ(state.iter(), std::stoi(match[1])) << path;
          newest = std::max(newest, std::stoi(match[1]));
        }
      } catch (const Error& error) {
        ADD_FAILURE() << "a snapshot file does not load after the kill: " << error.what();
      }
    }
    if (newest < 0) continue;  // killed while writing the first snapshot
    ++rounds_with_state;
    const std::string state = prefix + "_iter_" + std::to_string(newest) + SolverStateExtension(GetParam());
    // The newest state restores a solver, weights included (written before the state, so they are complete),
    // and a solver starting on the same prefix removes what the kill left half-written.
    try {
      auto restored = CreateSolver(Solver(prefix, newest + 2));
      restored->Restore(state);
      EXPECT_EQ(restored->iter(), newest);
    } catch (const Error& error) {
      ADD_FAILURE() << "the newest state " << state << " does not restore: " << error.what();
    }
    for (const auto& entry : std::filesystem::directory_iterator(folder))
      EXPECT_NE(entry.path().filename().string()[0], '.') << "a temporary file outlived the next start: " << entry.path();
    // And the command line resumes from it.
    if (round % 6 == 5) {
      SolverParameter resume = Solver(prefix + "_resumed", newest + 2);
      resume.set_snapshot(0);
      const std::string resume_solver = WriteSolver("resume" + std::to_string(round) + ".prototxt", resume);
      const pid_t resumed_pid = StartTraining(resume_solver, dir_.file("resume.log"), {"--snapshot=" + state});
      ASSERT_GT(resumed_pid, 0);
      ChildGuard resuming(resumed_pid);
      EXPECT_EQ(resuming.Join(), 0) << test::FileBytes(dir_.file("resume.log"));
      ++resumed;
    }
  }
  // Most kills came after the first complete snapshot, or the test tested little.
  EXPECT_GE(rounds_with_state, kRounds / 2);
  EXPECT_GE(resumed, 1);
  std::printf("%d of %d rounds left a state to resume from; %d temporary files left by kills mid-write\n",
              rounds_with_state, kRounds, temporary_files);
}

INSTANTIATE_TEST_SUITE_P(BothFormats, CrashSafetyTest,
                         ::testing::Values(SolverParameter::BINARYPROTO, SolverParameter::HDF5),
                         [](const ::testing::TestParamInfo<SolverParameter::SnapshotFormat>& info) {
                           return info.param == SolverParameter::HDF5 ? std::string("Hdf5") : std::string("BinaryProto");
                         });

}  // namespace
}  // namespace crema
