// The training monitor (tools/lib/monitor.hpp): what the record makes of a run's log lines, what the server answers
// (the page, the state, the controls with and without the token, errors), and `crema train --monitor` followed,
// snapshot and stopped over HTTP while it trains.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"
#include "tools/lib/monitor.hpp"

namespace crema {
namespace {

struct Answer {
  int status = 0;
  std::string body;
};

// A socket connected to 127.0.0.1:port, or -1.
int Connect(int port) {
  const int socket_fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(socket_fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (connect(socket_fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) return socket_fd;
  close(socket_fd);
  return -1;
}

// One HTTP/1.1 request to 127.0.0.1:port, the connection closed after the answer (a client of its own: the test
// does not trust the server's library to check it).
Answer Request(int port, const std::string& method, const std::string& target, const std::string& headers = "") {
  Answer answer;
  const int socket_fd = Connect(port);
  if (socket_fd < 0) return answer;
  const std::string request = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" +
                              "Content-Length: 0\r\n" + headers + "\r\n";
  EXPECT_EQ(send(socket_fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  // Read until the body is whole (by its Content-Length) or the server closes the connection.
  std::string raw;
  char buffer[4096];
  for (ssize_t got; (got = recv(socket_fd, buffer, sizeof buffer, 0)) > 0;) {
    raw.append(buffer, got);
    const size_t end = raw.find("\r\n\r\n");
    std::smatch length;
    if (end != std::string::npos &&
        std::regex_search(raw.cbegin(), raw.cbegin() + end, length, std::regex("Content-Length: ([0-9]+)")) &&
        raw.size() >= end + 4 + std::stoul(length[1]))
      break;
  }
  close(socket_fd);
  const size_t space = raw.find(' ');
  const size_t body = raw.find("\r\n\r\n");
  if (space == std::string::npos || body == std::string::npos) return answer;
  answer.status = std::atoi(raw.c_str() + space + 1);
  answer.body = raw.substr(body + 4);
  return answer;
}

// A glog line as crema writes it, at `seconds` after 10:00:00 on 2026-11-28.
std::string Line(double seconds, const std::string& message) {
  char prefix[64];
  const int whole = static_cast<int>(seconds);
  std::snprintf(prefix, sizeof prefix, "I20261128 10:%02d:%02d.%06d 4242 solver.cpp:100] ", whole / 60, whole % 60,
                static_cast<int>((seconds - whole) * 1e6));
  return prefix + message;
}

// A JSON number field "name":VALUE of `json` (the first), as text.
std::string Field(const std::string& json, const std::string& name) {
  std::smatch match;
  EXPECT_TRUE(std::regex_search(json, match, std::regex("\"" + name + "\":(\"[^\"]*\"|[-0-9.e+]+|null|true|false)")))
      << name << " in " << json;
  return match.size() > 1 ? match[1].str() : "";
}

TEST(MonitorTest, TheRecordTurnsTheLogIntoTheStateThePageDraws) {
  TrainingRecord record("lenet_solver", 1000);
  record.AddLine(Line(0, "Iteration 0, Testing net (#0)"));
  record.AddLine(Line(1, "    Test net output #0: accuracy = 0.1"));
  record.AddLine(Line(1, "    Test net output #1: loss = 2.3 (* 1 = 2.3 loss)"));
  record.AddLine(Line(2, "Iteration 0, loss = 2.31"));
  record.AddLine(Line(2, "    Train net output #0: loss = 2.31 (* 1 = 2.31 loss)"));
  record.AddLine(Line(2, "Iteration 0, lr = 0.01"));
  record.AddLine(Line(2, "A line the record does not keep"));
  record.AddLine(Line(12, "Iteration 100, loss = nan"));
  record.AddLine(Line(12, "Iteration 100, lr = 0.009"));
  record.AddLine(Line(12, "Snapshotting to binary proto file /runs/lenet_iter_100.caffemodel"));
  record.AddLine(Line(12, "Snapshotting solver state to binary proto file /runs/lenet_iter_100.solverstate"));
  record.SetIteration(120);
  std::string state = record.StateJson();
  EXPECT_EQ(Field(state, "name"), "\"lenet_solver\"");
  EXPECT_EQ(Field(state, "iteration"), "120");
  EXPECT_EQ(Field(state, "max_iter"), "1000");
  EXPECT_EQ(Field(state, "phase"), "\"training\"");
  // 100 iterations in the 10 seconds between the two displayed losses; 880 iterations left.
  EXPECT_EQ(Field(state, "iterations_per_second"), "10");
  EXPECT_EQ(Field(state, "seconds_left"), "88");
  EXPECT_NE(state.find("\"snapshots\":[\"/runs/lenet_iter_100.solverstate\"]"), std::string::npos) << state;
  // The displayed losses (a NaN as null, so the page draws a gap), the learning rates, and the tables.
  EXPECT_NE(state.find("\"loss\":[[0,2,2.31],[100,12,null]]"), std::string::npos) << state;
  EXPECT_NE(state.find("\"lr\":[[0,2,0.01],[100,12,0.009]]"), std::string::npos) << state;
  EXPECT_NE(state.find("\"tests\":[{\"outputs\":[\"accuracy\",\"loss\"],\"is_loss\":[false,true],"
                       "\"rows\":[[0,1,0.1,2.3]]}]"),
            std::string::npos)
      << state;
  EXPECT_EQ(state.find("does not keep"), std::string::npos);
  EXPECT_GT(std::stoll(Field(state, "peak_resident_bytes")), 0);

  EXPECT_EQ(Field(state, "layers"), "null");
  record.SetLayerTimes(100, {{"conv1", "Convolution", 1.5, 2.25}, {"loss", "SoftmaxWithLoss", 0.125, 0}});
  EXPECT_NE(record.StateJson().find("\"layers\":{\"iteration\":100,\"times\":[[\"conv1\",\"Convolution\",1.5,2.25],"
                                    "[\"loss\",\"SoftmaxWithLoss\",0.125,0]]}"),
            std::string::npos);
  record.AddLine(Line(13, "Iteration 120, Testing net (#0)"));
  EXPECT_EQ(Field(record.StateJson(), "phase"), "\"testing\"");
  record.SetEnded(true);
  state = record.StateJson();
  EXPECT_EQ(Field(state, "phase"), "\"stopped\"");
  EXPECT_EQ(Field(state, "seconds_left"), "null");
  EXPECT_EQ(JsonString("a \"b\"\\\n\x01"), "\"a \\\"b\\\"\\\\\\n\\u0001\"");
}

TEST(MonitorTest, TheServerAnswersThePageTheStateAndTheControlsOnlyWithTheToken) {
  TrainingRecord record("run", 10);
  record.AddLine(Line(0, "Iteration 0, loss = 1.5"));
  int snapshots = 0, stops = 0;
  MonitorServer server(
      "127.0.0.1:0", [&record] { return record.StateJson(); }, {[&] { ++snapshots; }, [&] { ++stops; }}, "secret");
  ASSERT_GT(server.port(), 0);
  EXPECT_EQ(server.Url(), "http://127.0.0.1:" + std::to_string(server.port()) + "/?token=secret");
  const int port = server.port();

  const Answer page = Request(port, "GET", "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("<title>crema monitor</title>"), std::string::npos);
  // Nothing is loaded from elsewhere: the page works offline.
  EXPECT_EQ(page.body.find("://"), std::string::npos);
  EXPECT_EQ(page.body.find("src="), std::string::npos);
  const Answer state = Request(port, "GET", "/api/state");
  EXPECT_EQ(state.status, 200);
  EXPECT_NE(state.body.find("\"loss\":[[0,0,1.5]]"), std::string::npos) << state.body;

  // Without the token, with another, and by GET: refused, and nothing done.
  Answer refused = Request(port, "POST", "/api/snapshot");
  EXPECT_EQ(refused.status, 403);
  EXPECT_NE(refused.body.find("needs the run's token"), std::string::npos) << refused.body;
  refused = Request(port, "POST", "/api/stop", "X-Crema-Token: guess\r\n");
  EXPECT_EQ(refused.status, 403);
  EXPECT_NE(refused.body.find("does not match"), std::string::npos) << refused.body;
  EXPECT_EQ(Request(port, "GET", "/api/stop?token=secret").status, 404);
  EXPECT_EQ(snapshots + stops, 0);
  // With it, in the header or as a parameter.
  EXPECT_EQ(Request(port, "POST", "/api/snapshot", "X-Crema-Token: secret\r\n").status, 200);
  EXPECT_EQ(Request(port, "POST", "/api/stop?token=secret").status, 200);
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(stops, 1);
  // The drawing of the net: none until the run has made it.
  EXPECT_EQ(Request(port, "GET", "/net.svg").status, 404);
  server.SetNetSvg("<svg>net</svg>");
  const Answer net = Request(port, "GET", "/net.svg");
  EXPECT_EQ(net.status, 200);
  EXPECT_EQ(net.body, "<svg>net</svg>");
  const Answer missing = Request(port, "GET", "/no/such/page");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(missing.body.find("no such page: /no/such/page"), std::string::npos) << missing.body;

  // Clients that go away: before sending anything, in the middle of a request, before reading the answer. The
  // server goes on serving.
  for (const std::string& sent :
       {std::string(), std::string("GET /api/sta"), std::string("GET /api/state HTTP/1.1\r\n\r\n")}) {
    const int socket_fd = Connect(port);
    ASSERT_GE(socket_fd, 0);
    if (!sent.empty()) {
      EXPECT_EQ(send(socket_fd, sent.data(), sent.size(), 0), static_cast<ssize_t>(sent.size()));
    }
    close(socket_fd);
  }
  EXPECT_EQ(Request(port, "GET", "/api/state").status, 200);
  // A request that is no HTTP.
  EXPECT_EQ(Request(port, "BREW", "/coffee").status, 400);

  // Many clients at once.
  std::vector<std::thread> clients;
  std::atomic<int> served{0};
  for (int c = 0; c < 16; ++c)
    clients.emplace_back([&] {
      for (int i = 0; i < 5; ++i) served += Request(port, "GET", "/api/state").status == 200;
    });
  for (auto& client : clients) client.join();
  EXPECT_EQ(served, 80);

  // The address taken, and addresses that are none.
  test::ExpectErrorContaining(
      [&] {
        MonitorServer again(
            std::to_string(port), [] { return std::string(); }, {}, "t");
      },
      {"--monitor='" + std::to_string(port) + "'", "port " + std::to_string(port), "in use"});
  test::ExpectErrorContaining(
      [&] {
        MonitorServer bad(
            "127.0.0.1:http", [] { return std::string(); }, {}, "t");
      },
      {"--monitor='127.0.0.1:http'", "HOST:PORT"});
  test::ExpectErrorContaining(
      [&] {
        MonitorServer bad(
            "70000", [] { return std::string(); }, {}, "t");
      },
      {"65535"});
  EXPECT_EQ(MonitorServer::NewToken().size(), 32u);
  EXPECT_NE(MonitorServer::NewToken(), MonitorServer::NewToken());
}

// `crema train --monitor` on a small net: the page's state follows the iterations, a snapshot asked for with the
// token is written, and stop ends the run after a snapshot, as Ctrl-C does.
TEST(MonitorTest, ATrainingRunIsFollowedSnapshotAndStoppedFromThePage) {
  test::TempDir dir;
  {
    std::ofstream(dir.file("net.prototxt")) << R"(name: "small"
      layer { name: "data" type: "DummyData" top: "data" top: "target"
              dummy_data_param { shape { dim: 16 dim: 8 } shape { dim: 16 dim: 1 }
                                 data_filler { type: "gaussian" } data_filler { type: "gaussian" } } }
      layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
              inner_product_param { num_output: 1 weight_filler { type: "gaussian" std: 0.1 } } }
      layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "target" top: "loss" })";
    std::ofstream(dir.file("solver.prototxt"))
        << "net: '" << dir.file("net.prototxt") << "' base_lr: 0.001 lr_policy: 'fixed' display: 200 "
        << "max_iter: 100000000 snapshot_prefix: '" << dir.file("small") << "'";
  }
  const std::string log = dir.file("train.log");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string crema = test::ToolsDir() + "/crema", solver = "--solver=" + dir.file("solver.prototxt");
    if (!freopen(log.c_str(), "w", stderr)) _exit(125);
    execl(crema.c_str(), crema.c_str(), "train", solver.c_str(), "--monitor=127.0.0.1:0", static_cast<char*>(nullptr));
    _exit(126);
  }
  // The log's "Monitor:" line gives the port and the token.
  std::smatch match;
  std::string text;
  for (int wait = 0; wait < 600; ++wait) {
    text = test::FileBytes(log);
    if (std::regex_search(text, match, std::regex("Monitor: http://127\\.0\\.0\\.1:([0-9]+)/\\?token=([0-9a-f]{32})")))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(match.size(), 3u) << text;
  const int port = std::stoi(match[1]);
  const std::string token_header = "X-Crema-Token: " + match[2].str() + "\r\n";

  // The iteration moves on between two looks, and the displayed losses arrive.
  const auto state = [&] { return Request(port, "GET", "/api/state").body; };
  std::string first = state(), later;
  for (int wait = 0; wait < 600; ++wait) {
    later = state();
    if (std::stoll(Field(later, "iteration")) > std::stoll(Field(first, "iteration")) &&
        later.find("\"loss\":[[") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GT(std::stoll(Field(later, "iteration")), std::stoll(Field(first, "iteration"))) << later;
  EXPECT_NE(later.find("\"loss\":[[0,"), std::string::npos) << later;
  EXPECT_EQ(Field(later, "phase"), "\"training\"");
  // Each layer timed in one iteration of every display interval (200 here).
  std::string timed;
  for (int wait = 0; wait < 600; ++wait) {
    timed = state();
    if (timed.find("\"layers\":{") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(std::regex_search(
      timed, std::regex("\"layers\":\\{\"iteration\":[1-9][0-9]*00,\"times\":\\[\\[\"data\",\"DummyData\","
                        "[0-9.e+-]+,0\\],\\[\"ip\",\"InnerProduct\",")))
      << timed;
  // The training net, drawn beside training (by Graphviz, where it is installed: a bundle's machine may lack it).
  std::string ignored;
  if (test::RunCommand("command -v dot", &ignored) == 0) {
    Answer drawing;
    for (int wait = 0; wait < 600 && drawing.status != 200; ++wait) {
      drawing = Request(port, "GET", "/net.svg");
      if (drawing.status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(drawing.status, 200);
    EXPECT_NE(drawing.body.find("<svg"), std::string::npos);
    EXPECT_NE(drawing.body.find("InnerProduct"), std::string::npos);
  }

  // Snapshot now: refused without the token; with it, a snapshot appears and training goes on.
  EXPECT_EQ(Request(port, "POST", "/api/snapshot").status, 403);
  ASSERT_EQ(Request(port, "POST", "/api/snapshot", token_header).status, 200);
  std::string snapped;
  for (int wait = 0; wait < 600; ++wait) {
    snapped = state();
    if (snapped.find(".solverstate\"") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::smatch snapshot;
  ASSERT_TRUE(std::regex_search(snapped, snapshot, std::regex("\"snapshots\":\\[\"([^\"]+\\.solverstate)\"")))
      << snapped;
  EXPECT_TRUE(std::filesystem::exists(snapshot[1].str())) << snapshot[1];

  // Stop: a last snapshot, then the run ends by itself.
  ASSERT_EQ(Request(port, "POST", "/api/stop", token_header).status, 200);
  int status = -1;
  for (int wait = 0; wait < 600 && waitpid(child, &status, WNOHANG) == 0; ++wait)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (status == -1) kill(child, SIGKILL);
  ASSERT_TRUE(WIFEXITED(status)) << test::FileBytes(log);
  EXPECT_EQ(WEXITSTATUS(status), 0) << test::FileBytes(log);
  text = test::FileBytes(log);
  EXPECT_NE(text.find("Optimization stopped early"), std::string::npos) << text;
  int snapshots = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file("")))
    snapshots += entry.path().extension() == ".solverstate";
  EXPECT_EQ(snapshots, 2);
}

// `crema monitor`: logs of finished or running runs, crema's and Caffe's forms alike, side by side; served, or
// exported as one file that needs no server.
TEST(MonitorTest, LogsOfCremaAndCaffeAreShownSideBySideAndExported) {
  test::TempDir dir;
  const std::string ours = dir.file("ours.log"), caffes = dir.file("caffes.log");
  {
    std::ofstream log(ours);
    for (const std::string& line :
         {Line(0, "Iteration 0, loss = 2.3"), Line(0, "Iteration 0, lr = 0.01"), Line(9, "Iteration 100, loss = 0.6"),
          Line(10, "Iteration 100, Testing net (#0)"), Line(11, "    Test net output #0: accuracy = 0.85")})
      log << line << "\n";
    // Caffe's glog (no year in the prefix) and its display line with the speed in it.
    std::ofstream(caffes) << "Log file created at: 2016/11/22 10:31:00\n"
                          << "I1122 10:31:07.123456  1234 solver.cpp:218] Iteration 0 (0 iter/s, 0.1s/100 iters), "
                             "loss = 2.4\n"
                          << "I1122 10:31:17.123456  1234 solver.cpp:218] Iteration 100 (10 iter/s, 10s/100 iters), "
                             "loss = 0.7\n"
                          << "I1122 10:31:18.000000  1234 solver.cpp:330] Iteration 100, Testing net (#0)\n"
                          << "I1122 10:31:19.000000  1234 solver.cpp:397]     Test net output #0: accuracy = 0.8\n";
  }
  LoggedRuns runs({ours, caffes});
  ASSERT_EQ(runs.size(), 2u);
  std::string state = runs.StateJson();
  EXPECT_EQ(Field(state, "live"), "false");
  EXPECT_EQ(Field(state, "name"), "\"2 runs\"");
  EXPECT_NE(state.find("{\"name\":\"ours\",\"loss\":[[0,0,2.3],[100,9,0.6]]"), std::string::npos) << state;
  EXPECT_NE(state.find("{\"name\":\"caffes\",\"loss\":[[0,0,2.4],[100,10,0.7]]"), std::string::npos) << state;
  EXPECT_NE(state.find("\"rows\":[[100,11.876544,0.8]]"), std::string::npos) << state;
  // A run still writing its log: read again as it grows.
  std::ofstream(ours, std::ios::app) << Line(19, "Iteration 200, loss = 0.4") << "\n";
  EXPECT_NE(runs.StateJson().find("[100,9,0.6],[200,19,0.4]]"), std::string::npos);

  // A folder stands for the logs in it; snapshots and files without training lines are passed over.
  std::filesystem::create_directories(dir.file("runs"));
  std::filesystem::copy_file(ours, dir.file("runs/a.log"));
  std::filesystem::copy_file(caffes, dir.file("runs/b.log"));
  std::ofstream(dir.file("runs/net_iter_100.caffemodel")) << "Iteration 100, loss = 1";
  std::ofstream(dir.file("runs/notes.txt")) << "nothing to draw\n";
  EXPECT_EQ(LoggedRuns({dir.file("runs")}).size(), 2u);
  test::ExpectErrorContaining([&] { LoggedRuns missing({dir.file("no.log")}); }, {"no.log", "does not exist"});
  test::ExpectErrorContaining([&] { LoggedRuns none({dir.file("runs/notes.txt")}); },
                              {"notes.txt", "holds no training log lines"});
  std::filesystem::create_directories(dir.file("empty"));
  test::ExpectErrorContaining([&] { LoggedRuns none({dir.file("empty")}); }, {"empty", "holds no file with"});

  // Served without a token: the page controls nothing.
  MonitorServer server(
      "0", [&runs] { return runs.StateJson(); }, {}, "");
  EXPECT_EQ(Request(server.port(), "POST", "/api/stop?token=").status, 404);
  EXPECT_NE(Request(server.port(), "GET", "/api/state").body.find("\"caffes\""), std::string::npos);

  // Exported: the page with the state inside, no server needed; a "</" in a name cannot end the script early.
  const std::string page = StaticMonitorPage("{\"live\":false,\"name\":\"a</script>b\",\"runs\":[]}");
  EXPECT_NE(page.find("window.CREMA_STATE = {\"live\":false,\"name\":\"a<\\/script>b\""), std::string::npos);
  const std::string crema = test::ToolsDir() + "/crema";
  std::string output;
  ASSERT_EQ(
      test::RunCommand(crema + " monitor " + ours + " " + caffes + " --export=" + dir.file("report.html"), &output), 0)
      << output;
  const std::string report = test::FileBytes(dir.file("report.html"));
  EXPECT_NE(report.find("window.CREMA_STATE = {\"live\":false,\"name\":\"2 runs\""), std::string::npos);
  EXPECT_NE(report.find("\"name\":\"caffes\""), std::string::npos);
  EXPECT_EQ(report.find("://"), std::string::npos);
  EXPECT_EQ(test::RunCommand(crema + " monitor", &output), 1);
  EXPECT_NE(output.find("monitor needs the logs to show"), std::string::npos) << output;
  EXPECT_EQ(test::RunCommand(crema + " monitor " + dir.file("no.log") + " --export=" + dir.file("x.html"), &output), 1);
  EXPECT_NE(output.find("no.log' does not exist"), std::string::npos) << output;
}

}  // namespace
}  // namespace crema
