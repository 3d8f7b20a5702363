// Data parallelism over MPI, end to end: `mpirun -np 2 crema train` with batch 25 per rank against one process with
// batch 50 (the same weights after 60 iterations), one set of snapshots, an exact resume, the number of ranks checked
// on resume, and the faults: a killed rank and a hung one end the group with an error that names the rank.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "io/proto_io.hpp"
#include "io/snapshot_io.hpp"
#include "parallel/communicator.hpp"
#include "parallel/thread_group.hpp"
#include "solver/solver.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

const std::string kCrema = test::ToolsDir() + "/crema";

// Open MPI's launcher as the tests run it: as root where they run as root, on a machine with fewer cores than ranks,
// without binding each rank to a core, and with shared memory that needs no ptrace permission (containers).
std::string Mpirun(int ranks) {
  return "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none "
         "OMPI_MCA_rmaps_base_oversubscribe=1 mpirun --bind-to none -np " +
         std::to_string(ranks) + " ";
}

std::string WriteTo(const std::string& path, const std::string& text) {
  test::WriteText(path, text);
  return path;
}

bool MpirunAvailable() { return std::system("command -v mpirun > /dev/null 2>&1") == 0; }

#define SKIP_WITHOUT_MPI()                                                             \
  if (!BuiltWithMpi()) GTEST_SKIP() << "this crema was built without MPI (USE_MPI=0)"; \
  if (!MpirunAvailable()) GTEST_SKIP() << "no mpirun on the PATH (Debian: openmpi-bin)"

class DataParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::WriteRandomDatums(dir_.file("train_lmdb"), 300, 8, 8, 4, 31);
    test::WriteRandomDatums(dir_.file("test_lmdb"), 60, 8, 8, 4, 32);
  }
  // The net, with `batch` records a pass in training (no Dropout, no random transformation: two ranks and one
  // process then compute the same sums, in another order).
  std::string Net(int batch) {
    return WriteTo(dir_.file("net_" + std::to_string(batch) + ".prototxt"), R"(
      name: 'dp'
      layer { name: 'data' type: 'Data' top: 'data' top: 'label' include { phase: TRAIN }
              data_param { source: ')" + dir_.file("train_lmdb") + "' batch_size: " +
                                                                                std::to_string(batch) + R"(
                           backend: LMDB } transform_param { scale: 0.00390625 } }
      layer { name: 'data' type: 'Data' top: 'data' top: 'label' include { phase: TEST }
              data_param { source: ')" + dir_.file("test_lmdb") + R"(' batch_size: 10 backend: LMDB }
              transform_param { scale: 0.00390625 } }
      layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'
              convolution_param { num_output: 6 kernel_size: 3 weight_filler { type: 'xavier' }
                                  bias_filler { type: 'constant' value: 0.1 } } }
      layer { name: 'relu' type: 'ReLU' bottom: 'conv' top: 'conv' }
      layer { name: 'pool' type: 'Pooling' bottom: 'conv' top: 'pool' pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
      layer { name: 'ip' type: 'InnerProduct' bottom: 'pool' top: 'ip'
              inner_product_param { num_output: 4 weight_filler { type: 'xavier' } } }
      layer { name: 'accuracy' type: 'Accuracy' bottom: 'ip' bottom: 'label' top: 'accuracy' include { phase: TEST } }
      layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }
    )");
  }
  std::string Solver(const std::string& name, int batch, int max_iter) {
    return WriteTo(dir_.file(name + "_solver.prototxt"),
                   "net: '" + Net(batch) +
                       "' base_lr: 0.05 momentum: 0.9 weight_decay: 0.0005 lr_policy: 'step' gamma: 0.5 "
                       "stepsize: 20 display: 10 test_iter: 4 test_interval: 20 snapshot: 30 max_iter: " +
                       std::to_string(max_iter) + " snapshot_prefix: '" + dir_.file(name) +
                       "' solver_mode: CPU random_seed: 7\n");
  }
  // Starts two ranks training `name` with `flags` for ever (output into `log`), and waits until they are past
  // iteration 20; returns mpirun's process id.
  pid_t StartRunningGroup(const std::string& name, const std::string& flags, const std::string& log);
  // Starts such a group, sends rank 1 `signal`, and waits up to `seconds` for mpirun to end: its status, or -1 when it
  // did not end (it is killed then). Rank 1 is killed at the end whatever happened.
  int SignalRankOneAndWait(const std::string& name, const std::string& flags, int signal, double seconds,
                           const std::string& log);
  std::string Run(const std::string& command, int expected_status) {
    std::string output;
    const int status = test::RunCommand(command, &output);
    EXPECT_EQ(status, expected_status) << command << "\n" << output;
    return output;
  }
  test::TempDir dir_;
};

// The largest, over the parameter blobs, of |a - b| / |a| (Euclidean norms).
double RelativeDifference(const std::string& a_file, const std::string& b_file) {
  NetParameter a, b;
  ReadProtoFromBinaryFile(a_file, &a);
  ReadProtoFromBinaryFile(b_file, &b);
  EXPECT_EQ(a.layer_size(), b.layer_size());
  double worst = 0;
  int blobs = 0;
  for (int l = 0; l < std::min(a.layer_size(), b.layer_size()); ++l)
    for (int k = 0; k < std::min(a.layer(l).blobs_size(), b.layer(l).blobs_size()); ++k) {
      const BlobProto& x = a.layer(l).blobs(k);
      const BlobProto& y = b.layer(l).blobs(k);
      EXPECT_EQ(x.data_size(), y.data_size());
      double difference = 0, norm = 0;
      for (int i = 0; i < std::min(x.data_size(), y.data_size()); ++i) {
        difference += (x.data(i) - y.data(i)) * static_cast<double>(x.data(i) - y.data(i));
        norm += x.data(i) * static_cast<double>(x.data(i));
      }
      worst = std::max(worst, std::sqrt(difference) / std::max(std::sqrt(norm), 1e-12));
      ++blobs;
    }
  EXPECT_EQ(blobs, 4) << "conv and ip, weights and biases";
  return worst;
}

// The value of the last "Test net output #k: NAME = V" line of a log.
double LastTestOutput(const std::string& log, const std::string& name) {
  const std::regex line("Test net output #[0-9]+: " + name + " = ([-0-9.e+]+)");
  double value = NAN;
  for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it) value = std::stod((*it)[1]);
  return value;
}

TEST_F(DataParallelTest, TwoRanksTrainLikeOneProcessWithTheirJointBatchAndResumeExactly) {
  SKIP_WITHOUT_MPI();
  const std::string one = Run(kCrema + " train --solver=" + Solver("one", 50, 60), 0);
  // Buckets of 10 bytes: each parameter blob in its own, started one after another during backward.
  const std::string two = Run(Mpirun(2) + kCrema + " train --bucket_mb=0.00001 --solver=" + Solver("two", 25, 60), 0);
  EXPECT_CONTAINS(two, "summed in 4 buckets while backward runs");
  EXPECT_CONTAINS(two, "2 processes on 1 host; this is rank 0");
  EXPECT_CONTAINS(two, "so the global batch is 50");
  EXPECT_CONTAINS(two, "Gradient all-reduce: ");
  EXPECT_CONTAINS(two, "Optimization Done.");
  // Rank 0 alone speaks: one "Optimization Done", one line per display.
  EXPECT_EQ(std::regex_search(two, std::regex("Optimization Done\\.[^]*Optimization Done\\.")), false) << two;

  const double difference =
      RelativeDifference(dir_.file("one_iter_60.caffemodel"), dir_.file("two_iter_60.caffemodel"));
  EXPECT_LT(difference, 1e-4);
  // Not equal by accident: the first snapshot already differs from the last.
  EXPECT_GT(RelativeDifference(dir_.file("two_iter_30.caffemodel"), dir_.file("two_iter_60.caffemodel")), 1e-3);
  // The test passes split over the ranks score the same batches as the one process.
  EXPECT_NEAR(LastTestOutput(two, "loss"), LastTestOutput(one, "loss"), 1e-3 * std::fabs(LastTestOutput(one, "loss")));
  EXPECT_NEAR(LastTestOutput(two, "accuracy"), LastTestOutput(one, "accuracy"), 0.026);  // at most one of 40 differs

  // One set of snapshot files, written by rank 0, with every rank's cursor.
  std::vector<std::string> snapshots;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path()))
    if (entry.path().filename().string().rfind("two_iter_", 0) == 0) snapshots.push_back(entry.path().filename());
  std::sort(snapshots.begin(), snapshots.end());
  EXPECT_EQ(snapshots, (std::vector<std::string>{"two_iter_30.caffemodel", "two_iter_30.solverstate",
                                                 "two_iter_60.caffemodel", "two_iter_60.solverstate"}));
  SolverState state;
  ReadSolverStateFile(dir_.file("two_iter_30.solverstate"), &state);
  EXPECT_EQ(state.replicas(), 2);
  std::vector<std::string> rank_one;
  for (const auto& layer_state : state.layer_state())
    if (layer_state.replica() == 1 && layer_state.has_cursor_key()) rank_one.push_back(layer_state.net());
  EXPECT_EQ(rank_one, (std::vector<std::string>{"train", "test0"})) << "rank 1's data cursors";

  // Resumed at 30 with two ranks, the run ends where the uninterrupted one did, bit for bit.
  const std::string uninterrupted = test::FileBytes(dir_.file("two_iter_60.caffemodel"));
  std::filesystem::remove(dir_.file("two_iter_60.caffemodel"));
  std::filesystem::remove(dir_.file("two_iter_60.solverstate"));
  const std::string resumed = Run(Mpirun(2) + kCrema + " train --solver=" + dir_.file("two_solver.prototxt") +
                                      " --snapshot=" + dir_.file("two_iter_30.solverstate"),
                                  0);
  EXPECT_TRUE(test::FileBytes(dir_.file("two_iter_60.caffemodel")) == uninterrupted)
      << "the resumed two-rank run differs from the uninterrupted one\n"
      << resumed;

  // With another number of ranks the resume is refused, saying why and what to do instead.
  const std::string refused = Run(kCrema + " train --solver=" + dir_.file("two_solver.prototxt") +
                                      " --snapshot=" + dir_.file("two_iter_30.solverstate"),
                                  1);
  EXPECT_CONTAINS(refused, "was written by a run of 2 data-parallel processes, and this run has 1");
  EXPECT_CONTAINS(refused, "mpirun -np 2");
}

// End to end on real data: the example LeNet on a slice of Fashion-MNIST, 400 iterations of global batch 64, as one
// process and as two ranks of 32: the ranks reach the one process's test accuracy (the same records in the same
// order; only the order of float additions differs), both far above chance.
TEST_F(DataParallelTest, LeNetOnFashionMnistReachesOneProcesssAccuracyOnTwoRanks) {
  CREMA_SKIP_WITHOUT_FASHION_MNIST();
  SKIP_WITHOUT_MPI();
  test::FashionMnistSlices slices(6000, 1000);
  auto solver_file = [&](const std::string& name, int batch) {
    SolverParameter solver = slices.ExampleSolver("fashion_mnist/lenet_solver.prototxt");
    solver.set_max_iter(400);
    solver.clear_test_iter();
    solver.add_test_iter(10);  // 10 batches of 100: the whole test slice (5 on each of two ranks)
    solver.set_test_interval(400);
    solver.set_test_initialization(false);
    solver.set_display(100);
    solver.set_snapshot_prefix(dir_.file(name));
    for (auto& layer : *solver.mutable_net_param()->mutable_layer())
      if (layer.type() == "Data" && layer.include_size() > 0 && layer.include(0).phase() == TRAIN)
        layer.mutable_data_param()->set_batch_size(batch);
    const std::string path = dir_.file(name + "_solver.prototxt");
    WriteProtoToTextFile(solver, path);
    return path;
  };
  const std::string one = Run(kCrema + " train --solver=" + solver_file("lenet_one", 64), 0);
  const std::string two = Run(Mpirun(2) + kCrema + " train --solver=" + solver_file("lenet_two", 32), 0);
  EXPECT_CONTAINS(two, "so the global batch is 64");
  const double accuracy = LastTestOutput(two, "accuracy");
  EXPECT_GT(accuracy, 0.65) << two;
  EXPECT_NEAR(accuracy, LastTestOutput(one, "accuracy"), 0.02) << one << two;
}

// A pycaffe-style script started by mpirun: crema.get_solver makes each process a rank as `crema train` does, and
// step() from the first call on trains from rank 0's weights; the weights after 60 iterations are the command line's,
// byte for byte.
TEST_F(DataParallelTest, PythonSolversUnderMpirunTrainAsTheCommandLineDoes) {
  SKIP_WITHOUT_MPI();
  const std::string module_dir = std::filesystem::path(test::ToolsDir()).parent_path() / "python";
  if (!FileExists(module_dir + "/crema/__init__.py")) GTEST_SKIP() << "the Python module is not built";
  Run(Mpirun(2) + kCrema + " train --solver=" + Solver("cli", 25, 60), 0);
  const std::string script = WriteTo(dir_.file("train.py"), R"(
import os, sys
import crema
crema.set_mode_cpu()
solver = crema.get_solver(sys.argv[1])
solver.step(60)
if os.environ["OMPI_COMM_WORLD_RANK"] == "0":
    solver.net.save(sys.argv[2])
)");
  const std::string log = Run(Mpirun(2) + "env PYTHONPATH=" + module_dir + " /usr/bin/python3 " + script + " " +
                                  Solver("python", 25, 60) + " " + dir_.file("python.caffemodel"),
                              0);
  EXPECT_CONTAINS(log, "2 processes on 1 host; this is rank 0");
  NetParameter cli, python;
  ReadProtoFromBinaryFile(dir_.file("cli_iter_60.caffemodel"), &cli);
  ReadProtoFromBinaryFile(dir_.file("python.caffemodel"), &python);
  int blobs = 0;
  for (const auto& layer : cli.layer())
    for (const auto& other : python.layer())
      if (layer.name() == other.name() && layer.blobs_size() > 0) {
        ASSERT_EQ(layer.blobs_size(), other.blobs_size()) << layer.name();
        for (int k = 0; k < layer.blobs_size(); ++k, ++blobs)
          EXPECT_TRUE(layer.blobs(k).SerializeAsString() == other.blobs(k).SerializeAsString())
              << "layer " << layer.name() << " blob " << k << " differs from the command line's";
      }
  EXPECT_EQ(blobs, 4);
}

// The same group logic with the members on threads of this process (as on several GPUs, here on the CPU): two solvers
// of batch 25 end where one of batch 50 does; the members hold the same bits; a resume on the group is exact.
TEST_F(DataParallelTest, TwoSolversOnThreadsTrainLikeOneWithTheirJointBatch) {
  auto read = [](const std::string& path) {
    SolverParameter param;
    ReadProtoFromTextFile(path, &param);
    return param;
  };
  const std::string one_path = Solver("one", 50, 60), two_path = Solver("two", 25, 60);
  std::unique_ptr<crema::Solver> one = CreateSolver(read(one_path), one_path);
  one->Solve();

  // Runs the group of two to 60 iterations (from `resume` when given); returns each member's parameters.
  auto train_group = [&](const std::string& resume) {
    ThreadGroup group(2);
    std::vector<std::vector<std::vector<float>>> params(2);
    std::vector<std::string> errors(2);
    std::vector<std::thread> members;
    for (int rank = 0; rank < 2; ++rank)
      members.emplace_back([&, rank] {
        try {
          SolverParameter param = read(two_path);
          param.set_random_seed(7 + rank);
          std::shared_ptr<Context> context = crema::Solver::ContextFor(param);
          context->set_replica(rank, 2);
          std::unique_ptr<Communicator> member = group.Member(rank);
          member->set_timeout_seconds(120);
          std::unique_ptr<crema::Solver> solver = CreateSolver(read(two_path), two_path, context);
          solver->JoinGroup(member.get());
          solver->Solve(resume);
          for (const Blob* blob : solver->net()->learnable_params())
            params[rank].emplace_back(blob->cpu_data(), blob->cpu_data() + blob->count());
        } catch (const std::exception& error) {
          errors[rank] = error.what();
        }
      });
    for (auto& member : members) member.join();
    EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
    EXPECT_TRUE(params[0] == params[1]) << "the members' weights differ";
    return params[0];
  };
  const std::vector<std::vector<float>> two = train_group("");
  const auto& reference = one->net()->learnable_params();
  ASSERT_EQ(two.size(), reference.size());
  for (size_t p = 0; p < two.size(); ++p) {
    double difference = 0, norm = 0;
    for (int i = 0; i < reference[p]->count(); ++i) {
      difference += std::pow(two[p][i] - reference[p]->cpu_data()[i], 2);
      norm += std::pow(reference[p]->cpu_data()[i], 2);
    }
    EXPECT_LT(std::sqrt(difference / norm), 1e-4) << "parameter " << p;
  }
  // From the group's snapshot at 30 to 60: the same bits.
  EXPECT_TRUE(train_group(dir_.file("two_iter_30.solverstate")) == two) << "the resumed group differs";
}

TEST(ThreadGroupTest, AMemberThatDoesNotArriveIsNamed) {
  ThreadGroup group(3);
  std::vector<std::unique_ptr<Communicator>> members;
  for (int rank = 0; rank < 3; ++rank) {
    members.push_back(group.Member(rank));
    members.back()->set_timeout_seconds(0.5);
  }
  // Ranks 0 and 2 sum; rank 1 never comes.
  std::string error;
  std::thread other([&] {
    double value = 2;
    try {
      members[2]->AllReduceSum(&value, 1);
    } catch (const Error&) {
    }
  });
  double value = 1;
  try {
    members[0]->AllReduceSum(&value, 1);
  } catch (const Error& e) {
    error = e.what();
  }
  other.join();
  EXPECT_NE(error.find("a sum over the ranks did not complete within 0 s: rank(s) 1 did not reach it"),
            std::string::npos)
      << error;
}

TEST(ThreadGroupTest, CollectivesGiveEveryMemberTheSameAnswer) {
  ThreadGroup group(3);
  std::vector<std::vector<double>> sums(3);
  std::vector<std::string> broadcasts(3);
  std::vector<std::vector<std::string>> gathered(3);
  std::vector<std::vector<float>> buckets(3);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 3; ++rank)
    threads.emplace_back([&, rank] {
      std::unique_ptr<Communicator> member = group.Member(rank);
      sums[rank] = {1.0 * rank, 0.5, -2.0 * rank};
      member->AllReduceSum(sums[rank].data(), 3);
      broadcasts[rank] = rank == 1 ? "from one" : "";
      member->Broadcast(&broadcasts[rank], 1);
      gathered[rank] = member->Gather("rank " + std::to_string(rank), 2);
      buckets[rank] = {0.25f * rank, 1.f, 3.f};
      member->StartAllReduceSum(buckets[rank].data(), 2, nullptr);
      member->StartAllReduceSum(buckets[rank].data() + 2, 1, nullptr);
      EXPECT_EQ(member->WaitAll().size(), 2u);
    });
  for (auto& thread : threads) thread.join();
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(sums[rank], (std::vector<double>{3, 1.5, -6}));
    EXPECT_EQ(broadcasts[rank], "from one");
    EXPECT_EQ(gathered[rank],
              rank == 2 ? (std::vector<std::string>{"rank 0", "rank 1", "rank 2"}) : std::vector<std::string>{});
    EXPECT_EQ(buckets[rank], (std::vector<float>{0.75f, 3.f, 9.f}));
  }
}

// Starts `command` in the background (its output into `log`); returns the shell's process id, which runs it with exec.
pid_t Start(const std::string& command, const std::string& log) {
  const pid_t child = fork();
  if (child == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + command + " > " + log + " 2>&1").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return child;
}

// The process ids of mpirun's children that are rank `rank` (Open MPI sets OMPI_COMM_WORLD_RANK in each).
pid_t RankProcess(pid_t launcher, int rank) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string pid, comm, state;
    long parent = 0;
    if (!(stat >> pid >> comm >> state >> parent) || parent != launcher) continue;
    const std::string environ = test::FileBytes((entry.path() / "environ").string());
    if (environ.find(std::string("OMPI_COMM_WORLD_RANK=") + std::to_string(rank) + '\0') != std::string::npos)
      return static_cast<pid_t>(std::stol(name));
  }
  return -1;
}

// Waits up to `seconds` for `child` to end; returns its status, or -1 when it did not end (it is killed then).
int WaitFor(pid_t child, double seconds, double* took) {
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    *took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (*took > seconds) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  *took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return status;
}

// Waits until `log` holds `text` (up to a minute).
bool WaitForLog(const std::string& log, const std::string& text) {
  for (int i = 0; i < 1200; ++i) {
    if (test::FileBytes(log).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

pid_t DataParallelTest::StartRunningGroup(const std::string& name, const std::string& flags, const std::string& log) {
  const pid_t launcher = Start(Mpirun(2) + kCrema + " train " + flags + " --solver=" + Solver(name, 25, 1000000), log);
  EXPECT_TRUE(WaitForLog(log, "Iteration 20, loss")) << test::FileBytes(log);
  return launcher;
}

int DataParallelTest::SignalRankOneAndWait(const std::string& name, const std::string& flags, int signal,
                                           double seconds, const std::string& log) {
  const pid_t launcher = StartRunningGroup(name, flags, log);
  const pid_t rank_one = RankProcess(launcher, 1);
  if (rank_one <= 0) {
    ADD_FAILURE() << "no rank 1 among mpirun's children";
    kill(launcher, SIGKILL);
    waitpid(launcher, nullptr, 0);
    return -1;
  }
  kill(rank_one, signal);
  double took = 0;
  const int status = WaitFor(launcher, seconds, &took);
  kill(rank_one, SIGKILL);
  return status;
}

TEST_F(DataParallelTest, AKilledRankEndsTheOtherWithinSeconds) {
  SKIP_WITHOUT_MPI();
  const std::string log = dir_.file("killed.log");
  const int status = SignalRankOneAndWait("killed", "", SIGKILL, 30, log);
  ASSERT_NE(status, -1) << "the group did not end within 30 s of rank 1's death\n" << test::FileBytes(log);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << test::FileBytes(log);
  const std::string output = test::FileBytes(log);
  EXPECT_TRUE(std::regex_search(output, std::regex("rank 1 .*(exited on signal 9|killed)"))) << output;
  // Nothing half-written: no temporary file of a snapshot write, and every snapshot there (one may have been due
  // before the kill) reads whole.
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    const std::string name = entry.path().filename().string();
    EXPECT_NE(name[0], '.') << entry.path();
    if (name.rfind("killed_iter_", 0) != 0) continue;
    if (entry.path().extension() == ".caffemodel") {
      NetParameter weights;
      EXPECT_NO_THROW(ReadProtoFromBinaryFile(entry.path().string(), &weights)) << entry.path();
    } else {
      SolverState state;
      EXPECT_NO_THROW(ReadSolverStateFile(entry.path().string(), &state)) << entry.path();
      EXPECT_EQ(state.replicas(), 2);
    }
  }
}

// mpirun passes SIGUSR2 on to every rank (its own SIGINT ends the job at once): the ranks agree to stop, rank 0
// snapshots, and every rank ends normally.
TEST_F(DataParallelTest, AStopSentToMpirunSnapshotsAndEndsEveryRank) {
  SKIP_WITHOUT_MPI();
  const std::string log = dir_.file("stopped.log");
  const pid_t launcher = StartRunningGroup("stopped", "", log);
  kill(launcher, SIGUSR2);
  double took = 0;
  const int status = WaitFor(launcher, 60, &took);
  const std::string output = test::FileBytes(log);
  ASSERT_NE(status, -1) << "the group did not stop within 60 s\n" << output;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  const std::smatch stopped = [&] {
    std::smatch match;
    std::regex_search(output, match, std::regex("Optimization stopped early at iteration ([0-9]+)\\."));
    return match;
  }();
  ASSERT_FALSE(stopped.empty()) << output;
  const std::string state = dir_.file("stopped_iter_" + stopped[1].str() + ".solverstate");
  SolverState saved;
  ASSERT_NO_THROW(ReadSolverStateFile(state, &saved)) << output;
  EXPECT_EQ(saved.replicas(), 2);
  EXPECT_EQ(std::to_string(saved.iter()), stopped[1].str());
}

TEST_F(DataParallelTest, AHungRankIsNamedAndTheGroupEnds) {
  SKIP_WITHOUT_MPI();
  const std::string log = dir_.file("hung.log");
  const int status = SignalRankOneAndWait("hung", "--collective_timeout=4", SIGSTOP, 40, log);
  ASSERT_NE(status, -1) << "the group did not end within 40 s of rank 1's stop\n" << test::FileBytes(log);
  const std::string output = test::FileBytes(log);
  // Which collective rank 0 waits at depends on where rank 1 was stopped: a gradient sum mostly, a test's gather or
  // sum at times (seen under load); the error names it, its number, the limit and the silent rank.
  EXPECT_TRUE(
      std::regex_search(output, std::regex("crema: error \\(rank 0 of 2\\): [a-z0-9 -]+ \\(collective #[0-9]+\\) "
                                           "did not complete within 4 s: rank 1 does not answer \\(stopped, "
                                           "hung, or gone\\)")))
      << output;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << output;
}

// Two network namespaces joined by a veth pair stand for two hosts (each with an address of its own, and, through a
// UTS namespace, a host name of its own): mpirun runs in the first, and reaches the second through a launch agent
// that enters it (where ssh would be). Needs root; removed again when the test ends.
class TwoHosts {
 public:
  explicit TwoHosts(const std::string& dir) {
    const int tag = getpid() % 200 + 20;
    names_ = {"crema-dp-a-" + std::to_string(getpid()), "crema-dp-b-" + std::to_string(getpid())};
    addresses_ = {"10.213." + std::to_string(tag) + ".1", "10.213." + std::to_string(tag) + ".2"};
    subnet_ = "10.213." + std::to_string(tag) + ".0/24";
    const std::string a = names_[0], b = names_[1];
    const std::string veth_a = "cdpa" + std::to_string(getpid()), veth_b = "cdpb" + std::to_string(getpid());
    std::string output;
    ok_ = geteuid() == 0 &&
          test::RunCommand("ip netns add " + a + " && ip netns add " + b + " && ip link add " + veth_a +
                               " type veth peer name " + veth_b + " && ip link set " + veth_a + " netns " + a +
                               " && ip link set " + veth_b + " netns " + b + " && ip -n " + a + " addr add " +
                               addresses_[0] + "/24 dev " + veth_a + " && ip -n " + b + " addr add " + addresses_[1] +
                               "/24 dev " + veth_b + " && ip -n " + a + " link set lo up && ip -n " + b +
                               " link set lo up && ip -n " + a + " link set " + veth_a + " up && ip -n " + b +
                               " link set " + veth_b + " up",
                           &output) == 0;
    why_ = geteuid() != 0 ? "needs root (ip netns)" : "could not make two network namespaces: " + output;
    // The launch agent: `agent HOST COMMAND...`, run in that host's namespace, with that host's name.
    agent_ = dir + "/launch_agent.sh";
    WriteTo(agent_, "#!/bin/sh\nhost=$1; shift\ncase $host in\n  " + addresses_[0] + ") ns=" + a + ";;\n  " +
                        addresses_[1] + ") ns=" + b + ";;\n  *) echo \"unknown host $host\" >&2; exit 1;;\nesac\n" +
                        "exec ip netns exec $ns unshare --uts sh -c \"hostname $ns; $*\"\n");
    std::filesystem::permissions(agent_, std::filesystem::perms::owner_all);
  }
  ~TwoHosts() {
    std::string ignored;
    test::RunCommand("ip netns del " + names_[0] + "; ip netns del " + names_[1], &ignored);
  }
  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  // mpirun in the first namespace, one rank on each host, over TCP between them.
  std::string Mpirun() const {
    return "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ip netns exec " + names_[0] +
           " mpirun --bind-to none -np 2 --host " + addresses_[0] + "," + addresses_[1] + " --mca plm_rsh_agent " +
           agent_ + " --mca btl tcp,self --mca btl_tcp_if_include " + subnet_ + " --mca oob_tcp_if_include " + subnet_ +
           " ";
  }

 private:
  std::vector<std::string> names_, addresses_;
  std::string subnet_, agent_, why_;
  bool ok_ = false;
};

TEST_F(DataParallelTest, RanksOnTwoHostsTrainLikeOneProcess) {
  SKIP_WITHOUT_MPI();
  TwoHosts hosts(dir_.path());
  if (!hosts.ok()) GTEST_SKIP() << hosts.why();
  Run(kCrema + " train --solver=" + Solver("one", 50, 60), 0);
  const std::string two = Run(hosts.Mpirun() + kCrema + " train --solver=" + Solver("two", 25, 60), 0);
  EXPECT_CONTAINS(two, "2 processes on 2 hosts; this is rank 0");
  EXPECT_LT(RelativeDifference(dir_.file("one_iter_60.caffemodel"), dir_.file("two_iter_60.caffemodel")), 1e-4);
}

}  // namespace
}  // namespace crema
