#include "tools/lib/monitor.hpp"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <sstream>
#include <string_view>
#include <utility>

#include "core/synced_memory.hpp"
#include "tools/lib/cpu_info.hpp"

namespace crema {
namespace {

// A number as JSON: shortest round-trip form; null where JSON has none (NaN, infinities).
void PutNumber(std::ostringstream& out, double value) {
  if (!std::isfinite(value)) {
    out << "null";
    return;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  out << text;
}

void PutOptional(std::ostringstream& out, const std::optional<double>& value) {
  if (value)
    PutNumber(out, *value);
  else
    out << "null";
}

void PutPoints(std::ostringstream& out, const std::vector<LogPoint>& points) {
  out << '[';
  for (size_t i = 0; i < points.size(); ++i) {
    out << (i ? ",[" : "[") << points[i].iteration << ',';
    PutOptional(out, points[i].seconds);
    out << ',';
    PutNumber(out, points[i].value);
    out << ']';
  }
  out << ']';
}

void PutTable(std::ostringstream& out, const LogTable& table) {
  out << "{\"outputs\":[";
  for (size_t i = 0; i < table.outputs.size(); ++i) out << (i ? "," : "") << JsonString(table.outputs[i]);
  out << "],\"is_loss\":[";
  for (size_t i = 0; i < table.output_is_loss.size(); ++i)
    out << (i ? "," : "") << (table.output_is_loss[i] ? "true" : "false");
  out << "],\"rows\":[";
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const LogTable::Row& row = table.rows[r];
    out << (r ? ",[" : "[") << row.iteration << ',';
    PutOptional(out, row.seconds);
    for (size_t i = 0; i < table.outputs.size(); ++i) {
      out << ',';
      PutOptional(out, i < row.values.size() ? row.values[i] : std::nullopt);
    }
    out << ']';
  }
  out << "]}";
}

// The lines parse_log reads, and the snapshot lines: everything else of the log stays out of the record.
bool Recorded(std::string_view message) {
  return message.find("Iteration ") != std::string::npos || message.find(" net output #") != std::string::npos ||
         message.find("Snapshotting ") != std::string::npos;
}

// The speed over the last displayed losses (up to ten): iterations per second, or 0 where two timed points are
// not there yet.
double IterationsPerSecond(const std::vector<LogPoint>& losses) {
  if (losses.size() < 2) return 0;
  const LogPoint& last = losses.back();
  const LogPoint& first = losses[losses.size() > 10 ? losses.size() - 10 : 0];
  if (!last.seconds || !first.seconds || *last.seconds <= *first.seconds) return 0;
  return static_cast<double>(last.iteration - first.iteration) / (*last.seconds - *first.seconds);
}

bool ParsePort(const std::string& text, int* port) {
  if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  *port = std::stoi(text);
  return *port <= 65535;
}

}  // namespace

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned char>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string TrainingLogJson(const std::string& name, const TrainingLog& log) {
  std::ostringstream out;
  out << "{\"name\":" << JsonString(name) << ",\"loss\":";
  PutPoints(out, log.losses);
  out << ",\"lr\":";
  PutPoints(out, log.learning_rates);
  out << ",\"train\":";
  PutTable(out, log.train);
  out << ",\"tests\":[";
  for (size_t t = 0; t < log.tests.size(); ++t) {
    if (t) out << ',';
    PutTable(out, log.tests[t]);
  }
  out << "]}";
  return out.str();
}

TrainingRecord::TrainingRecord(std::string name, int64_t max_iter) : name_(std::move(name)), max_iter_(max_iter) {}

TrainingRecord::~TrainingRecord() {
  if (listening_) google::RemoveLogSink(this);
}

void TrainingRecord::Listen() {
  if (listening_) return;
  google::AddLogSink(this);
  listening_ = true;
}

void TrainingRecord::send(google::LogSeverity severity, const char* full_filename, const char* base_filename, int line,
                          const google::LogMessageTime& time, const char* message, size_t message_len) {
  // Most lines are not the record's: they cost a search and no copy.
  if (!Recorded(std::string_view(message, message_len))) return;
  AddLine(google::LogSink::ToString(severity, base_filename, line, time, message, message_len));
}

void TrainingRecord::AddLine(const std::string& line) {
  if (!Recorded(line)) return;
  std::lock_guard<std::mutex> lock(lines_mutex_);
  lines_ += line;
  if (lines_.empty() || lines_.back() != '\n') lines_ += '\n';
  ++lines_version_;
  const size_t snapshot = line.find("Snapshotting solver state to ");
  if (snapshot != std::string::npos) {
    // "... to binary proto file PATH" or "... to HDF5 file PATH".
    const size_t file = line.find(" file ", snapshot);
    if (file != std::string::npos) snapshots_.push_back(line.substr(file + 6));
  }
  if (line.find(", Testing net (#") != std::string::npos) testing_ = true;
  if (line.find(", loss = ") != std::string::npos || line.find(", lr = ") != std::string::npos) testing_ = false;
}

void TrainingRecord::SetLayerTimes(int64_t iteration, std::vector<LayerTime> times) {
  std::lock_guard<std::mutex> lock(lines_mutex_);
  layer_times_iteration_ = iteration;
  layer_times_ = std::move(times);
}

std::string TrainingRecord::StateJson() {
  // The parse lock first, then the lines' (AddLine takes only the latter): parsed_version_ is the parse lock's.
  std::lock_guard<std::mutex> parse_lock(parse_mutex_);
  std::string lines;
  uint64_t version;
  std::vector<std::string> snapshots;
  bool testing;
  int64_t layer_times_iteration;
  std::vector<LayerTime> layer_times;
  {
    std::lock_guard<std::mutex> lock(lines_mutex_);
    version = lines_version_;
    snapshots = snapshots_;
    testing = testing_;
    layer_times_iteration = layer_times_iteration_;
    layer_times = layer_times_;
    if (version != parsed_version_) lines = lines_;
  }
  std::ostringstream out;
  if (version != parsed_version_) {
    std::istringstream stream(lines);
    // The record's lines carry their year (glog 0.6 writes it), so the end year is not needed.
    parsed_ = ParseTrainingLog(stream, 0);
    parsed_version_ = version;
  }
  const int ended = ended_;
  const int64_t iteration = iteration_;
  const double rate = ended ? 0 : IterationsPerSecond(parsed_.losses);
  out << "{\"live\":true,\"name\":" << JsonString(name_) << ",\"iteration\":" << iteration
      << ",\"max_iter\":" << max_iter_ << ",\"phase\":\""
      << (ended == 2   ? "stopped"
          : ended == 1 ? "done"
          : testing    ? "testing"
                       : "training")
      << "\",\"iterations_per_second\":";
  if (rate > 0) {
    PutNumber(out, rate);
    out << ",\"seconds_left\":";
    PutNumber(out, static_cast<double>(std::max<int64_t>(max_iter_ - iteration, 0)) / rate);
  } else {
    out << "null,\"seconds_left\":null";
  }
  out << ",\"snapshots\":[";
  for (size_t i = 0; i < snapshots.size(); ++i) out << (i ? "," : "") << JsonString(snapshots[i]);
  const MemoryStats memory = MemoryStats::Now();
  out << "],\"memory\":{\"peak_resident_bytes\":" << PeakResidentBytes()
      << ",\"host_peak_bytes\":" << memory.host_peak_bytes << ",\"device_peak_bytes\":" << memory.device_peak_bytes
      << "},\"layers\":";
  if (layer_times_iteration < 0) {
    out << "null";
  } else {
    out << "{\"iteration\":" << layer_times_iteration << ",\"times\":[";
    for (size_t i = 0; i < layer_times.size(); ++i) {
      out << (i ? ",[" : "[") << JsonString(layer_times[i].name) << ',' << JsonString(layer_times[i].type) << ',';
      PutNumber(out, layer_times[i].forward_ms);
      out << ',';
      PutNumber(out, layer_times[i].backward_ms);
      out << ']';
    }
    out << "]}";
  }
  out << ",\"runs\":[" << TrainingLogJson(name_, parsed_) << "]}";
  return out.str();
}

namespace {

// Files a folder of runs holds that are no logs: snapshots and data, which can be large.
bool SkippedInFolder(const std::filesystem::path& file) {
  for (const char* extension : {".caffemodel", ".solverstate", ".h5", ".binaryproto", ".mdb", ".png", ".svg"})
    if (file.extension() == extension) return true;
  return false;
}

bool HoldsTrainingLines(const TrainingLog& log) {
  if (!log.losses.empty() || !log.train.rows.empty()) return true;
  for (const LogTable& table : log.tests)
    if (!table.rows.empty()) return true;
  return false;
}

}  // namespace

LoggedRuns::LoggedRuns(const std::vector<std::string>& paths) {
  CREMA_CHECK(!paths.empty()) << "name the logs to show: log files, or folders of them";
  const char* kWhat = "training log lines (such as 'Iteration N, loss = X' or 'Test net output #0: accuracy = X')";
  for (const std::string& path : paths) {
    std::error_code error;
    CREMA_CHECK(std::filesystem::exists(path, error)) << "log '" << path << "' does not exist";
    if (!std::filesystem::is_directory(path, error)) {
      Run run;
      run.path = path;
      CREMA_CHECK(Refresh(&run)) << "'" << path << "' holds no " << kWhat;
      runs_.push_back(std::move(run));
      continue;
    }
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(path, error))
      if (entry.is_regular_file() && !SkippedInFolder(entry.path())) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    const size_t before = runs_.size();
    for (const auto& file : files) {
      Run run;
      run.path = file.string();
      if (Refresh(&run)) runs_.push_back(std::move(run));
    }
    CREMA_CHECK(runs_.size() > before) << "folder '" << path << "' holds no file with " << kWhat;
  }
  // Each run is named after its file; where two files share a name, by their paths as given.
  for (Run& run : runs_) {
    run.name = std::filesystem::path(run.path).stem().string();
    for (const Run& other : runs_)
      if (&other != &run && std::filesystem::path(other.path).stem() == std::filesystem::path(run.path).stem())
        run.name = run.path;
  }
}

bool LoggedRuns::Refresh(Run* run) {
  std::error_code error;
  const auto modified = std::filesystem::last_write_time(run->path, error);
  const uintmax_t bytes = std::filesystem::file_size(run->path, error);
  if (!error && (modified != run->modified || bytes != run->bytes)) {
    run->log = ReadTrainingLog(run->path);
    run->modified = modified;
    run->bytes = bytes;
  }
  return HoldsTrainingLines(run->log);
}

std::string LoggedRuns::StateJson() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;
  out << "{\"live\":false,\"name\":"
      << JsonString(runs_.size() == 1 ? runs_[0].name : std::to_string(runs_.size()) + " runs") << ",\"runs\":[";
  for (size_t r = 0; r < runs_.size(); ++r) {
    try {
      Refresh(&runs_[r]);  // a run still writing its log
    } catch (const Error&) {
      // A log removed since: what was read stays on the page.
    }
    out << (r ? "," : "") << TrainingLogJson(runs_[r].name, runs_[r].log);
  }
  out << "]}";
  return out.str();
}

std::string StaticMonitorPage(const std::string& state_json) {
  // Inside a <script> element "</" would end it: JSON allows "<\/" for it in strings, the only place it occurs.
  std::string safe;
  for (size_t i = 0; i < state_json.size(); ++i) {
    safe += state_json[i];
    if (state_json[i] == '<' && i + 1 < state_json.size() && state_json[i + 1] == '/') safe += '\\';
  }
  std::string page = kMonitorPage;
  const size_t script = page.find("<script>");
  CREMA_CHECK(script != std::string::npos) << "the monitor page has no script";
  page.insert(script, "<script>window.CREMA_STATE = " + safe + ";</script>\n");
  return page;
}

MonitorServer::MonitorServer(const std::string& address, std::function<std::string()> state, Actions actions,
                             std::string token)
    : server_(std::make_unique<httplib::Server>()), token_(std::move(token)) {
  const size_t colon = address.rfind(':');
  host_ = colon == std::string::npos ? "127.0.0.1" : address.substr(0, colon);
  const std::string port_text = colon == std::string::npos ? address : address.substr(colon + 1);
  CREMA_CHECK(!host_.empty() && ParsePort(port_text, &port_))
      << "--monitor='" << address << "': give PORT (on 127.0.0.1) or HOST:PORT, the port a number from 0 (any "
      << "free one) to 65535";

  server_->Get("/", [](const httplib::Request&, httplib::Response& response) {
    response.set_content(kMonitorPage, "text/html; charset=utf-8");
  });
  server_->Get("/net.svg", [this](const httplib::Request&, httplib::Response& response) {
    std::lock_guard<std::mutex> lock(net_svg_mutex_);
    if (net_svg_.empty()) {
      response.status = 404;
      response.set_content("{\"error\":\"the net is not drawn (yet)\"}", "application/json");
      return;
    }
    response.set_content(net_svg_, "image/svg+xml");
  });
  server_->Get("/api/state", [state = std::move(state)](const httplib::Request&, httplib::Response& response) {
    response.set_header("Cache-Control", "no-store");
    response.set_content(state(), "application/json");
  });
  // The controls: POST only (a link or an image cannot trigger them), and only with the run's token.
  const auto control = [this](std::function<void()> action, const char* done) {
    return [this, action = std::move(action), done](const httplib::Request& request, httplib::Response& response) {
      const std::string given = request.has_header("X-Crema-Token") ? request.get_header_value("X-Crema-Token")
                                                                    : request.get_param_value("token");
      if (given != token_) {
        response.status = 403;
        response.set_content(std::string("{\"error\":") +
                                 JsonString(given.empty() ? "this needs the run's token (printed in the training log)"
                                                          : "the token does not match the run's") +
                                 "}",
                             "application/json");
        return;
      }
      if (action) action();
      response.set_content(std::string("{\"ok\":") + JsonString(done) + "}", "application/json");
    };
  };
  if (!token_.empty()) {
    server_->Post("/api/snapshot", control(std::move(actions.snapshot), "a snapshot follows this iteration"));
    server_->Post("/api/stop", control(std::move(actions.stop), "training stops after a snapshot"));
  }
  server_->set_error_handler([](const httplib::Request& request, httplib::Response& response) {
    if (!response.body.empty()) return;
    const std::string what = response.status == 404
                                 ? "no such page: " + request.path
                                 : "the request could not be served (HTTP " + std::to_string(response.status) + ")";
    response.set_content("{\"error\":" + JsonString(what) + "}", "application/json");
  });

  // SO_REUSEADDR alone: a port left in TIME_WAIT by an earlier run can be taken again at once, but not one that
  // another program listens on (the library's default adds SO_REUSEPORT, with which two servers share a port).
  server_->set_socket_options([](int socket) {
    const int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  if (port_ == 0) {
    port_ = server_->bind_to_any_port(host_);
    CREMA_CHECK(port_ > 0) << "--monitor='" << address << "': cannot listen on " << host_
                           << " (not an address of this machine?)";
  } else {
    CREMA_CHECK(server_->bind_to_port(host_, port_))
        << "--monitor='" << address << "': cannot listen on " << host_ << " port " << port_
        << " (in use by another program, or not an address of this machine?)";
  }
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    listen_returned_ = true;
  });
  // Until it runs, stop() would not reach it (and the destructor would wait for it forever).
  while (!server_->is_running() && !listen_returned_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

MonitorServer::~MonitorServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

void MonitorServer::SetNetSvg(std::string svg) {
  std::lock_guard<std::mutex> lock(net_svg_mutex_);
  net_svg_ = std::move(svg);
}

std::string MonitorServer::Url() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_) + "/?token=" + token_;
}

std::string MonitorServer::NewToken() {
  std::random_device device;
  std::string token;
  for (int i = 0; i < 4; ++i) {
    char part[16];
    std::snprintf(part, sizeof part, "%08x", static_cast<unsigned>(device()));
    token += part;
  }
  return token;
}

}  // namespace crema
