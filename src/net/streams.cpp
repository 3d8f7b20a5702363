#include "net/streams.hpp"

#include <algorithm>
#include <sstream>
#include <utility>

#include "core/common.hpp"
#include "core/context.hpp"
#include "core/cuda_check.hpp"
#include "core/synced_memory.hpp"

namespace crema {

namespace {

// What a stream has seen run, per stream: the position (within that stream) of the last step known complete, -1 for
// none. Merging takes the later of each.
using Clock = std::vector<int>;

void Merge(Clock* into, const Clock& from) {
  for (size_t t = 0; t < into->size(); ++t) (*into)[t] = std::max((*into)[t], from[t]);
}

}  // namespace

StreamSchedule ScheduleOnStreams(const StepGraph& graph, int streams, const std::vector<bool>* announced) {
  const int n = static_cast<int>(graph.size());
  const int most = std::max(1, streams);
  StreamSchedule schedule;
  schedule.steps.resize(n);
  std::vector<int> position(n, -1);  // per step: its place in its stream
  std::vector<Clock> after(n);       // per step: what its stream has seen run once it has run
  std::vector<Clock> stream_clock(most, Clock(most, -1));
  std::vector<int> tail(most, -1), queued(most, 0);
  std::vector<int> event_of(n, -1);
  int events = 1;  // event 0: the fork
  for (int s = 0; s < n; ++s) {
    const std::vector<int>& waits_for = graph.waits_for[s];
    // What s knows has run, through the steps it waits for.
    Clock known(most, -1);
    for (int p : waits_for) {
      Merge(&known, after[p]);
      known[schedule.steps[p].stream] = std::max(known[schedule.steps[p].stream], position[p]);
    }
    // Its stream: one a step it waits for ends (the lowest such stream, so that the main line stays on stream 0 and
    // the pass ends with fewer joins), else one whose queued steps it waits for anyway, else an unused one, else the
    // least queued.
    int stream = -1;
    for (int p : waits_for)
      if (tail[schedule.steps[p].stream] == p && (stream < 0 || schedule.steps[p].stream < stream))
        stream = schedule.steps[p].stream;
    for (int t = 0; t < most && stream < 0; ++t)
      if (tail[t] >= 0 && known[t] >= position[tail[t]]) stream = t;
    for (int t = 0; t < most && stream < 0; ++t)
      if (tail[t] < 0) stream = t;
    if (stream < 0) stream = static_cast<int>(std::min_element(queued.begin(), queued.end()) - queued.begin());
    StreamStep& step = schedule.steps[s];
    step.step = s;
    step.stream = stream;
    // The waits: for each step it waits for on another stream, latest first, an event unless the stream has seen that
    // step run already (the events it waited for before say so).
    Clock& clock = stream_clock[stream];
    std::vector<int> earlier(waits_for.rbegin(), waits_for.rend());
    for (int p : earlier) {
      const int other = schedule.steps[p].stream;
      if (other == stream || clock[other] >= position[p]) continue;
      if (event_of[p] < 0) event_of[p] = events++;
      step.waits.push_back(event_of[p]);
      Merge(&clock, after[p]);
    }
    position[s] = queued[stream]++;
    clock[stream] = position[s];
    after[s] = clock;
    tail[stream] = s;
  }
  // Stream 0 waits at the end for each other stream's last step it has not seen run.
  Clock& end = stream_clock[0];
  std::vector<int> tails;
  for (int t = 1; t < most; ++t)
    if (tail[t] >= 0) tails.push_back(tail[t]);
  std::sort(tails.rbegin(), tails.rend());
  for (int last : tails) {
    const int other = schedule.steps[last].stream;
    if (end[other] >= position[last]) continue;
    if (event_of[last] < 0) event_of[last] = events++;
    schedule.joins.push_back(event_of[last]);
    Merge(&end, after[last]);
  }
  bool any_announced = false;
  for (int s = 0; announced != nullptr && s < n && s < static_cast<int>(announced->size()); ++s) {
    if (!(*announced)[s]) continue;
    any_announced = true;
    if (event_of[s] < 0) event_of[s] = events++;
  }
  for (int s = 0; s < n; ++s) schedule.steps[s].event = event_of[s];
  schedule.streams = 1;
  for (int t = 0; t < most; ++t)
    if (queued[t] > 0) schedule.streams = t + 1;
  schedule.events = schedule.streams > 1 || any_announced ? events : 0;
  return schedule;
}

void NoteStorageUses(const std::vector<StepAccess>& access, StreamSchedule* schedule) {
  schedule->uses.clear();
  for (size_t s = 0; s < access.size() && s < schedule->steps.size(); ++s)
    for (const std::vector<StepRange>* ranges : {&access[s].reads, &access[s].writes})
      for (const StepRange& range : *ranges) schedule->uses.emplace_back(schedule->steps[s].stream, range.storage);
  std::sort(schedule->uses.begin(), schedule->uses.end());
  schedule->uses.erase(std::unique(schedule->uses.begin(), schedule->uses.end()), schedule->uses.end());
}

bool StreamSchedule::Keeps(const StepGraph& graph) const {
  // Replays the queueing: each stream's clock grows by its own steps and by the clocks its events carried when
  // recorded. An edge p -> s is kept when s's stream has seen p run before s runs.
  if (steps.size() != graph.size()) return false;
  std::vector<Clock> clock(streams, Clock(streams, -1));
  std::vector<Clock> event_clock(std::max(events, 1), Clock(streams, -1));
  std::vector<bool> recorded(std::max(events, 1), false);
  std::vector<int> position(steps.size(), -1), queued(streams, 0);
  std::vector<bool> forked(streams, false);
  if (streams > 1) recorded[0] = true;  // the fork: stream 0's clock at the pass's start, nothing of the pass
  for (size_t i = 0; i < steps.size(); ++i) {
    const StreamStep& step = steps[i];
    if (step.step != static_cast<int>(i) || step.stream < 0 || step.stream >= streams) return false;
    Clock& own = clock[step.stream];
    if (step.stream != 0 && !forked[step.stream]) forked[step.stream] = true;
    for (int event : step.waits) {
      if (event <= 0 || event >= events || !recorded[event]) return false;  // a wait for nothing recorded yet
      Merge(&own, event_clock[event]);
    }
    for (int p : graph.waits_for[i])
      if (own[steps[p].stream] < position[p]) return false;
    position[i] = queued[step.stream]++;
    own[step.stream] = position[i];
    if (step.event >= 0) {
      if (step.event == 0 || step.event >= events || recorded[step.event]) return false;
      recorded[step.event] = true;
      event_clock[step.event] = own;
    }
  }
  // Stream 0 has seen every step run once it waited for the joins.
  Clock& end = clock[0];
  for (int event : joins) {
    if (event <= 0 || event >= events || !recorded[event]) return false;
    Merge(&end, event_clock[event]);
  }
  for (int t = 0; t < streams; ++t)
    if (end[t] < queued[t] - 1) return false;
  return true;
}

std::string StreamSchedule::Describe() const {
  std::vector<int> per_stream(streams, 0);
  int waits = 0;
  for (const StreamStep& step : steps) {
    ++per_stream[step.stream];
    waits += static_cast<int>(step.waits.size());
  }
  std::ostringstream out;
  out << streams << (streams == 1 ? " stream, " : " streams, ") << steps.size() << " steps";
  if (streams > 1) {
    out << " (";
    for (int t = 0; t < streams; ++t) out << (t ? ", " : "") << per_stream[t];
    out << " per stream), " << waits << " waits for events between streams";
  }
  return out.str();
}

void SideStream::Queue(int event, const std::function<void()>& work) {
  if (!used_) device_->Wait(stream_, start_);
  used_ = true;
  if (event >= 0) device_->Wait(stream_, event);
  device_->Launch(stream_, work);
}

void RunOnStreams(const StreamSchedule& schedule, StreamDevice* device, const std::function<void(int step)>& launch,
                  const BesideThePass* beside) {
  // With work beside the pass: its stream, and two events after the schedule's (the pass's start, the side's end).
  const int start_event = schedule.events, end_event = schedule.events + 1;
  device->Prepare(schedule.streams + (beside ? 1 : 0), schedule.events + (beside ? 2 : 0));
  SideStream side(device, schedule.streams, start_event);
  std::vector<bool> forked(schedule.streams, false);
  if (schedule.streams > 1) device->Record(0, 0);
  if (beside) device->Record(0, start_event);
  for (const StreamStep& step : schedule.steps) {
    if (step.stream != 0 && !forked[step.stream]) {
      forked[step.stream] = true;
      device->Wait(step.stream, 0);
    }
    for (int event : step.waits) device->Wait(step.stream, event);
    device->Launch(step.stream, [&launch, &step] { launch(step.step); });
    if (step.event >= 0) device->Record(step.stream, step.event);
    if (beside && beside->queued) beside->queued(step, &side);
  }
  if (beside && beside->last) beside->last(&side);
  if (side.used()) {
    device->Record(side.stream(), end_event);
    device->Wait(0, end_event);
  }
  for (int event : schedule.joins) device->Wait(0, event);
  for (const auto& [stream, storage] : schedule.uses) device->Uses(stream, const_cast<void*>(storage));
  device->Flush();
}

#ifdef CREMA_USE_CUDA
namespace {

class CudaStreams : public StreamDevice {
 public:
  explicit CudaStreams(Context* context) : context_(context) {}
  ~CudaStreams() override {
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
  }
  void Prepare(int streams, int events) override {
    context_->MakeCurrent();
    for (int lane = 0; lane < streams; ++lane) context_->lane_stream(lane);
    while (static_cast<int>(events_.size()) < events) {
      cudaEvent_t event = nullptr;
      CREMA_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      events_.push_back(event);
    }
  }
  void Launch(int stream, const std::function<void()>& work) override {
    Context::LaneScope lane(*context_, stream);
    work();
  }
  void Record(int stream, int event) override {
    CREMA_CUDA_CHECK(cudaEventRecord(events_.at(event), context_->lane_stream(stream)));
  }
  void Wait(int stream, int event) override {
    CREMA_CUDA_CHECK(cudaStreamWaitEvent(context_->lane_stream(stream), events_.at(event), 0));
  }
  void Uses(int stream, void* storage) override {
    static_cast<SyncedMemory*>(storage)->record_stream(context_->lane_stream(stream));
  }

 private:
  Context* context_;
  std::vector<cudaEvent_t> events_;
};

}  // namespace
#endif

std::unique_ptr<StreamDevice> DeviceStreams(Context* context) {
#ifdef CREMA_USE_CUDA
  return std::make_unique<CudaStreams>(context);
#else
  CREMA_FAIL() << "lanes on a GPU's streams need a crema built with CUDA";
  (void)context;
  return nullptr;
#endif
}

void RehearsedStreams::Prepare(int streams, int events) {
  if (static_cast<int>(streams_.size()) < streams) streams_.resize(streams);
  if (static_cast<int>(records_queued_.size()) < events) {
    records_queued_.resize(events, 0);
    records_run_.resize(events, 0);
  }
}

RehearsedStreams::Operation& RehearsedStreams::Queue(int stream, Operation::Kind kind) {
  CREMA_CHECK(stream >= 0 && stream < static_cast<int>(streams_.size()))
      << "stream " << stream << " of " << streams_.size() << " rehearsed streams";
  Operation& operation = streams_[stream].emplace_back();
  operation.kind = kind;
  operation.queued = queued_++;
  return operation;
}

void RehearsedStreams::Launch(int stream, const std::function<void()>& work) {
  Queue(stream, Operation::Kind::kWork).work = work;
}

void RehearsedStreams::Record(int stream, int event) {
  CREMA_CHECK(event >= 0 && event < static_cast<int>(records_queued_.size())) << "event " << event << " recorded";
  Operation& operation = Queue(stream, Operation::Kind::kRecord);
  operation.event = event;
  operation.generation = ++records_queued_[event];
}

void RehearsedStreams::Wait(int stream, int event) {
  CREMA_CHECK(event >= 0 && event < static_cast<int>(records_queued_.size())) << "event " << event << " waited for";
  CREMA_CHECK(records_queued_[event] > 0)
      << "stream " << stream << " waits for event " << event << ", which nothing has recorded yet: a GPU would not "
      << "wait at all";
  Operation& operation = Queue(stream, Operation::Kind::kWait);
  operation.event = event;
  operation.generation = records_queued_[event];
}

void RehearsedStreams::Flush() {
  std::vector<int> ready;
  try {
    for (;;) {
      ready.clear();
      bool left = false;
      for (size_t t = 0; t < streams_.size(); ++t) {
        if (streams_[t].empty()) continue;
        left = true;
        const Operation& head = streams_[t].front();
        if (head.kind != Operation::Kind::kWait || records_run_[head.event] >= head.generation)
          ready.push_back(static_cast<int>(t));
      }
      if (!left) break;
      CREMA_CHECK(!ready.empty()) << "the rehearsed streams wait for events that are never recorded (a deadlock)";
      const int t = ready[std::uniform_int_distribution<size_t>(0, ready.size() - 1)(random_)];
      Operation operation = std::move(streams_[t].front());
      streams_[t].pop_front();
      if (operation.queued < last_run_) ++reordered_;
      last_run_ = operation.queued;
      ++operations_run_;
      if (operation.kind == Operation::Kind::kWork) operation.work();
      if (operation.kind == Operation::Kind::kRecord)
        records_run_[operation.event] = std::max(records_run_[operation.event], operation.generation);
    }
  } catch (...) {
    // What a failed step left queued never runs: the next pass starts from empty streams, every record counted.
    for (auto& stream : streams_) {
      for (const Operation& operation : stream)
        if (operation.kind == Operation::Kind::kRecord)
          records_run_[operation.event] = std::max(records_run_[operation.event], operation.generation);
      stream.clear();
    }
    throw;
  }
  last_run_ = -1;
}

}  // namespace crema
