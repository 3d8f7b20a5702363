// The training monitor: a page in a browser that follows `crema train --monitor=[HOST:]PORT` while it runs (loss,
// test outputs and learning rate against iteration, speed and time left, snapshots, memory) and lets a person
// who holds the run's token snapshot or stop it (docs/tools.md, "crema train --monitor").
//
// What the page shows of a run comes from the run's own log lines, the ones parse_log reads (tools/lib/
// training_log.hpp), caught by a glog sink as they are written: the page and the log never disagree, and the same
// reader serves logs of finished runs. Training never waits for the page: the sink appends a line under a lock
// held for that alone, and the server parses on its own threads.
#pragma once

#include <glog/logging.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tools/lib/training_log.hpp"

namespace httplib {
class Server;
}

namespace crema {

// One run as the page draws it, as JSON: {"name", "loss": [[iteration, seconds, value], ...], "lr": [...],
// "train": TABLE, "tests": [TABLE, ...]} where TABLE is {"outputs": [names], "is_loss": [bools], "rows":
// [[iteration, seconds, value, ...], ...]}; seconds and absent values are null. Non-finite values are null too
// (JSON has no NaN), so a diverged loss shows as a gap.
std::string TrainingLogJson(const std::string& name, const TrainingLog& log);

// A string as a JSON string literal, quotes included.
std::string JsonString(const std::string& text);

// The live record of one training run: every log line parse_log reads and the snapshots written, gathered by a
// glog sink while the run trains, and the run's progress.
class TrainingRecord : public google::LogSink {
 public:
  // `name` is the run's name on the page (the solver file's base name); `max_iter` where training ends.
  TrainingRecord(std::string name, int64_t max_iter);
  // Stops listening to the log.
  ~TrainingRecord() override;
  TrainingRecord(const TrainingRecord&) = delete;
  TrainingRecord& operator=(const TrainingRecord&) = delete;

  // From now on every log line of the process reaches the record.
  void Listen();
  using google::LogSink::send;
  void send(google::LogSeverity severity, const char* full_filename, const char* base_filename, int line,
            const google::LogMessageTime& time, const char* message, size_t message_len) override;
  // Feeds one log line as glog wrote it (prefix included): what send() does with each line, and what tests use.
  void AddLine(const std::string& line);

  // The iteration the solver runs now (the solver's callback sets it); the run has ended (stopped: before max_iter).
  void SetIteration(int64_t iteration) { iteration_ = iteration; }
  // The time each layer of the training net took in one sampled iteration (Net::set_step_timing).
  struct LayerTime {
    std::string name, type;
    double forward_ms = 0, backward_ms = 0;
  };
  void SetLayerTimes(int64_t iteration, std::vector<LayerTime> times);
  void SetEnded(bool stopped) { ended_ = stopped ? 2 : 1; }

  // The state the page reads (GET /api/state): {"live": true, "name", "iteration", "max_iter", "phase":
  // "training" | "testing" | "done" | "stopped", "iterations_per_second", "seconds_left" (null until known),
  // "snapshots": [paths], "memory": {"peak_resident_bytes", "host_peak_bytes", "device_peak_bytes"},
  // "layers": null or {"iteration", "times": [[name, type, forward ms, backward ms], ...]} (the latest sample),
  // "runs": [TrainingLogJson(...)]}.
  std::string StateJson();

 private:
  const std::string name_;
  const int64_t max_iter_;
  std::atomic<int64_t> iteration_{0};
  std::atomic<int> ended_{0};
  bool listening_ = false;

  std::mutex lines_mutex_;  // held only to append a line or copy them
  std::string lines_;       // the lines parse_log reads, each ending in "\n"
  uint64_t lines_version_ = 0;
  std::vector<std::string> snapshots_;
  int64_t layer_times_iteration_ = -1;
  std::vector<LayerTime> layer_times_;
  bool testing_ = false;  // a "Testing net" line came after the last training display

  std::mutex parse_mutex_;  // one parse at a time; the latest kept for requests until a line arrives
  uint64_t parsed_version_ = ~uint64_t{0};
  TrainingLog parsed_;
};

// Finished or running logs shown side by side (`crema monitor LOG_OR_FOLDER...`): each file read again when it has
// changed since (a run still writing it), a folder standing for the files in it that hold training log lines.
class LoggedRuns {
 public:
  // Throws naming a path that does not exist, and a file (or a folder with none) that holds no training lines.
  explicit LoggedRuns(const std::vector<std::string>& paths);
  // {"live": false, "name", "runs": [TrainingLogJson(...), ...]}: each run named after its file.
  std::string StateJson();
  size_t size() const { return runs_.size(); }

 private:
  struct Run {
    std::string path, name;
    std::filesystem::file_time_type modified;
    uintmax_t bytes = ~uintmax_t{0};
    TrainingLog log;
  };
  // Reads the run's file again where it changed; false when it holds no training lines.
  static bool Refresh(Run* run);
  std::mutex mutex_;
  std::vector<Run> runs_;
};

// The page as one self-contained file that shows `state_json` (a StateJson) without a server.
std::string StaticMonitorPage(const std::string& state_json);

// The server of the page: GET / (the page), GET /api/state (`state()`), GET /net.svg, and with a token POST
// /api/snapshot and POST /api/stop (the token in an X-Crema-Token header or a token= parameter; 403 without it). It
// binds its address on construction, so that an address in use is an error before training starts, and serves on
// threads of its own until destroyed.
class MonitorServer {
 public:
  struct Actions {
    std::function<void()> snapshot;  // snapshot at the end of the current iteration
    std::function<void()> stop;      // snapshot, then stop (as Ctrl-C does)
  };
  // `address` is "PORT" (loopback) or "HOST:PORT"; port 0 takes a free one. Throws naming the address when it is
  // malformed or cannot be bound. Without a token the page controls nothing (the control requests get 404).
  MonitorServer(const std::string& address, std::function<std::string()> state, Actions actions, std::string token);
  ~MonitorServer();
  MonitorServer(const MonitorServer&) = delete;
  MonitorServer& operator=(const MonitorServer&) = delete;

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  // "http://HOST:PORT/?token=TOKEN": what the log prints for a person to open.
  std::string Url() const;
  // The net drawn (draw_net's SVG), served as GET /net.svg from now on (404 until then).
  void SetNetSvg(std::string svg);

  // A fresh random token: 32 hexadecimal digits from the system's random device.
  static std::string NewToken();

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> listen_returned_{false};
  std::mutex net_svg_mutex_;
  std::string net_svg_;
  std::string host_;
  int port_ = 0;
  std::string token_;
};

// The page (tools/lib/monitor_page.html), built into the program.
extern const char* const kMonitorPage;

}  // namespace crema
