// Execution lanes on a GPU: the steps of a pass are queued, from one host thread, on several streams of the device,
// and a step that must wait for a step on another stream waits for an event recorded after it. The device then runs
// what the step graph (net/step_graph.hpp) leaves independent at the same time (GoogLeNet's inception towers), and
// the results are the in-order ones bit for bit: every edge of the graph is kept, by the order within a stream or by
// an event, and a step's kernels do not depend on the stream they run on.
//
// The schedule is made once per graph (ScheduleOnStreams): which stream each step runs on and which events it waits
// for. A step continues the stream of a step it waits for when that step is the stream's last so far (a chain stays
// on one stream, so it needs no events; a join continues the lowest such stream), else takes a stream whose queued
// steps it waits for anyway, else the stream with the least queued. Waits are pruned with vector clocks: a stream that
// already waited, directly or through another stream's event, for a later step of the other stream does not wait again.
//
// A pass is bracketed by stream 0 (the context's own stream, where the work before and after the pass is queued):
// every other stream waits for the fork event (stream 0 at the pass's start) before its first step, and stream 0
// waits at the end for each other stream's last step. So a pass on streams looks, to everything around it, like one
// queued on stream 0 alone.
//
// StreamDevice is what the schedule is run on: the device's streams and events (CudaStreamDevice, in CUDA builds)
// or their host rehearsal (RehearsedStreams), which queues the work and runs it later in random interleavings that
// keep only each stream's order and the events; a missing event then shows as a wrong result or a wait for an event
// never recorded, on machines without a GPU.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "net/step_graph.hpp"

namespace crema {

class Context;

struct StreamStep {
  int step = -1;           // the graph's step
  int stream = 0;          // 0 .. streams-1
  std::vector<int> waits;  // events the stream waits for before the step
  int event = -1;          // the event recorded on the stream after the step, or -1 (none waits for it)
};

struct StreamSchedule {
  int streams = 1;                // streams used (at most those asked for)
  int events = 0;                 // events 0 .. events-1; event 0 is the fork when streams > 1
  std::vector<StreamStep> steps;  // in the order they are queued: the graph's
  std::vector<int> joins;         // events stream 0 waits for at the pass's end
  // The storages (SyncedMemory) the steps of each stream read or write, each once per stream (NoteStorageUses):
  // after every pass the device is told of them (StreamDevice::Uses).
  std::vector<std::pair<int, const void*>> uses;
  // "3 streams, 57 steps (19 on stream 1, ...), 23 events": for crema time.
  std::string Describe() const;
  // Whether every edge of `graph` is kept: by the order within a stream, or by a chain of events.
  bool Keeps(const StepGraph& graph) const;
};

// The schedule of `graph`'s steps on at most `streams` streams. A step `announced` marks (when given: one flag per
// step) records an event even where no step waits for it, so that work beside the pass can (SideStream: a parameter's
// gradient is complete after its step).
StreamSchedule ScheduleOnStreams(const StepGraph& graph, int streams, const std::vector<bool>* announced = nullptr);
// Fills `schedule`'s uses from what its steps read and write (`access`, the graph's ground).
void NoteStorageUses(const std::vector<StepAccess>& access, StreamSchedule* schedule);

// A device's streams and events as a schedule uses them: queued from one host thread, run by the device.
class StreamDevice {
 public:
  virtual ~StreamDevice() = default;
  // Makes the device ready for `streams` streams and `events` events (called before every pass; cheap when they
  // are already there).
  virtual void Prepare(int streams, int events) = 0;
  // Queues `work` on `stream`: on a GPU it runs now on the host and queues its kernels on the stream.
  virtual void Launch(int stream, const std::function<void()>& work) = 0;
  // Records `event` on `stream`: it completes when the work queued on the stream so far has run.
  virtual void Record(int stream, int event) = 0;
  // Makes `stream` wait, before what is queued on it next, for the last record of `event` queued so far.
  virtual void Wait(int stream, int event) = 0;
  // The pass's work is queued: a rehearsal runs it here; a GPU's streams go on running it.
  virtual void Flush() {}
  // Work on `stream` uses `storage` (a SyncedMemory): its device block, once freed, is reused only after that work
  // has run (SyncedMemory::record_stream). Nothing to do in a rehearsal.
  virtual void Uses(int stream, void* storage) {
    (void)stream;
    (void)storage;
  }
};

// Work queued beside a pass on streams (RunOnStreams with a BesideThePass), on a stream of its own: the stream after
// the schedule's. Each piece waits for the pass's start and for an event of the schedule (a step's StreamStep::event),
// and the pass ends, on stream 0, only once every piece has run; so the work sees the step's results as soon as the
// device has them (an all-reduce of a parameter's gradient while backward goes on) and what follows the pass sees the
// work's. On the host thread that queues the pass, while it queues it.
class SideStream {
 public:
  SideStream(StreamDevice* device, int stream, int start_event)
      : device_(device), stream_(stream), start_(start_event) {}
  // Queues `work` after `event` (-1: after the pass's start only).
  void Queue(int event, const std::function<void()>& work);
  int stream() const { return stream_; }
  bool used() const { return used_; }

 private:
  StreamDevice* device_;
  int stream_, start_;
  bool used_ = false;
};

// What a pass on streams calls while it queues: after each step (and its event) is queued, then after the last.
struct BesideThePass {
  std::function<void(const StreamStep& step, SideStream* side)> queued;
  std::function<void(SideStream* side)> last;
};

// Queues every step of `schedule` on `device`, `launch(step)` doing the step's work, with the fork, the waits, the
// records and the joins; with `beside`, calls it as it queues, with the pass's side stream (one more stream and two
// more events than the schedule's: the pass's start and the side stream's end).
void RunOnStreams(const StreamSchedule& schedule, StreamDevice* device, const std::function<void(int step)>& launch,
                  const BesideThePass* beside = nullptr);

// The streams of `context`'s GPU (lane k: Context::lane_stream(k)), with events of their own; work launched on a
// stream runs with the context's lane set to it (Context::LaneScope), so its kernels, cuBLAS and cuDNN calls queue
// there. CUDA builds only (elsewhere an error). Not yet run on a GPU.
std::unique_ptr<StreamDevice> DeviceStreams(Context* context);

// The host rehearsal of a device's streams: Launch, Record and Wait queue, and Flush runs what was queued, one
// operation at a time, choosing at random among the streams whose next operation may run (a wait may run once the
// record it waits for has run), as a device might; the random stream is seeded. A wait for an event with no record
// queued before it (which a GPU would skip without waiting) is an error, as is work left that can never run.
class RehearsedStreams : public StreamDevice {
 public:
  explicit RehearsedStreams(uint64_t seed) : random_(seed) {}
  void Prepare(int streams, int events) override;
  void Launch(int stream, const std::function<void()>& work) override;
  void Record(int stream, int event) override;
  void Wait(int stream, int event) override;
  void Flush() override;
  // Operations run by Flush so far, and how many times the streams' heads ran out of order with the queueing (a
  // measure that the interleavings differ from the order of queueing).
  int64_t operations_run() const { return operations_run_; }
  int64_t reordered() const { return reordered_; }

 private:
  struct Operation {
    enum class Kind { kWork, kRecord, kWait } kind = Kind::kWork;
    std::function<void()> work;
    int event = -1;
    int64_t generation = 0;  // a record: the event's record count after it; a wait: the record count it waits for
    int64_t queued = 0;      // the order of queueing
  };
  Operation& Queue(int stream, Operation::Kind kind);

  std::mt19937_64 random_;
  std::vector<std::deque<Operation>> streams_;
  std::vector<int64_t> records_queued_, records_run_;  // per event
  int64_t queued_ = 0, last_run_ = -1;
  int64_t operations_run_ = 0, reordered_ = 0;
};

}  // namespace crema
