#include "net/lanes.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <iomanip>
#include <sstream>
#include <thread>

#include "core/threads.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace crema {

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// A lock for the few instructions that take a ready step or ready the steps a finished one released: the lanes are
// threads of their own on cores of their own, so spinning beats sleeping (a wake-up costs more than a step's
// bookkeeping).
class SpinLock {
 public:
  void lock() {
    while (flag_.test_and_set(std::memory_order_acquire)) Pause();
  }
  void unlock() { flag_.clear(std::memory_order_release); }
  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }

 private:
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

// Timed passes of a wide stretch each way before the automatic mode chooses (after one untimed pass each way).
constexpr int kProbes = 3;

}  // namespace

void StepLanes::Configure(int lanes, bool automatic) {
  if (lanes != lanes_ || automatic != automatic_) prepared_ = false;
  lanes_ = std::max(1, lanes);
  automatic_ = automatic;
}

void StepLanes::Prepare(const StepGraph& graph) {
  const int n = static_cast<int>(graph.size());
  waited_by_.assign(n, {});
  for (int s = 0; s < n; ++s)
    for (int before : graph.waits_for[s]) waited_by_[before].push_back(s);
  cost_ms_.assign(n, 1.0);
  // A step every other step is ordered with: all steps before it are its ancestors (it has as many ancestors as
  // steps before it) and all after it its descendants. Ancestors as bitsets, in order.
  const size_t words = (static_cast<size_t>(n) + 63) / 64;
  std::vector<std::vector<uint64_t>> ancestors(n, std::vector<uint64_t>(words, 0));
  std::vector<int> descendants(n, 0);
  for (int s = 0; s < n; ++s)
    for (int before : graph.waits_for[s]) {
      for (size_t w = 0; w < words; ++w) ancestors[s][w] |= ancestors[before][w];
      ancestors[s][before / 64] |= uint64_t{1} << (before % 64);
    }
  std::vector<bool> alone(n);
  for (int s = 0; s < n; ++s) {
    int count = 0;
    for (uint64_t word : ancestors[s]) count += __builtin_popcountll(word);
    alone[s] = count == s;
  }
  for (int s = 0; s < n; ++s)
    for (size_t w = 0; w < words; ++w)
      for (uint64_t word = ancestors[s][w]; word != 0; word &= word - 1) ++descendants[w * 64 + __builtin_ctzll(word)];
  for (int s = 0; s < n; ++s) alone[s] = alone[s] && descendants[s] == n - 1 - s;
  stretches_.clear();
  for (int s = 0; s < n;) {
    Stretch stretch;
    stretch.begin = s;
    if (alone[s]) {
      stretch.end = s + 1;
    } else {
      stretch.end = s;
      while (stretch.end < n && !alone[stretch.end]) ++stretch.end;
      stretch.wide = stretch.end - stretch.begin > 1;
    }
    stretches_.push_back(stretch);
    s = stretch.end;
  }
  record_.clear();
  prepared_ = true;
}

bool StepLanes::UseLanes(const Stretch& stretch) const {
  if (!stretch.wide || lanes_ < 2) return false;
  if (!automatic_ || stretch.decided) return stretch.on_lanes;
  // Probing: an untimed pass each way, then alternately, beginning alone.
  const int passes = stretch.timed_alone + stretch.timed_lanes;
  return passes % 2 == 1;
}

std::vector<int> StepLanes::Run(const std::function<bool(int)>& run) {
  const int n = static_cast<int>(waited_by_.size());
  std::vector<bool> done(n, false);
  if (recording_) record_.clear();
  const Clock::time_point pass_start = Clock::now();
  for (Stretch& stretch : stretches_) {
    if (!RunStretch(stretch, run, &done, pass_start)) break;
  }
  std::vector<int> left;
  for (int s = 0; s < n; ++s)
    if (!done[s]) left.push_back(s);
  return left;
}

bool StepLanes::RunStretch(Stretch& stretch, const std::function<bool(int)>& run, std::vector<bool>* done,
                           Clock::time_point pass_start) {
  const bool lanes = UseLanes(stretch);
  const Clock::time_point start = Clock::now();
  const auto since_pass = [&](Clock::time_point at) {
    return std::chrono::duration<double, std::milli>(at - pass_start).count();
  };
  if (!lanes) {
    for (int s = stretch.begin; s < stretch.end; ++s) {
      const Clock::time_point began = Clock::now();
      if (!run(s)) return false;
      cost_ms_[s] = MsSince(began);
      if (recording_) record_.push_back({s, -1, since_pass(began), since_pass(began) + cost_ms_[s]});
      (*done)[s] = true;
    }
  } else {
    const int n = stretch.end - stretch.begin;
    // How many unfinished steps of the stretch each waits for (those before the stretch have run), and the length
    // of the longest chain each heads, in measured milliseconds: the ready step heading the longest goes first.
    std::vector<int> remaining(n, 0);
    std::vector<double> chain(n, 0);
    for (int i = n - 1; i >= 0; --i) {
      const int s = stretch.begin + i;
      double longest = 0;
      for (int later : waited_by_[s])
        if (later < stretch.end) longest = std::max(longest, chain[later - stretch.begin]);
      chain[i] = longest + cost_ms_[s];
    }
    std::vector<int> ready;
    for (int i = 0; i < n; ++i)
      for (int later : waited_by_[stretch.begin + i])
        if (later < stretch.end) ++remaining[later - stretch.begin];
    for (int i = 0; i < n; ++i)
      if (remaining[i] == 0) ready.push_back(stretch.begin + i);
    SpinLock lock;
    // Bumped whenever steps become ready or the lanes stop: an idle lane watches it (a load, not a locked write, so
    // the working lane's lock stays in its cache) until it changes.
    std::atomic<int> news{0};
    int taken = 0;
    bool stopped = false;
    std::exception_ptr error;
    std::vector<LaneRecord> records;
    // Never more lanes than OpenMP's threads: more would crowd the cores with spinning threads (three lanes on two
    // cores took 3 ms to start a stretch of 0.05).
    const int threads = std::min({lanes_, n, std::max(1, OpenMpThreadCount())});
#pragma omp parallel num_threads(threads)
    {
#ifdef _OPENMP
      const int lane = omp_get_thread_num();
#else
      const int lane = 0;
#endif
      int seen = news.load(std::memory_order_acquire);
      for (;;) {
        int step = -1;
        lock.lock();
        if (stopped || taken == n) {
          lock.unlock();
          break;
        }
        if (!ready.empty()) {
          size_t best = 0;
          for (size_t r = 1; r < ready.size(); ++r)
            if (chain[ready[r] - stretch.begin] > chain[ready[best] - stretch.begin]) best = r;
          step = ready[best];
          ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(best));
          ++taken;
        }
        lock.unlock();
        if (step < 0) {
          while (news.load(std::memory_order_acquire) == seen) SpinLock::Pause();
          seen = news.load(std::memory_order_acquire);
          continue;
        }
        const Clock::time_point began = Clock::now();
        bool ran = false;
        try {
          ran = run(step);
        } catch (...) {
          lock.lock();
          if (!error) error = std::current_exception();
          stopped = true;
          lock.unlock();
          news.fetch_add(1, std::memory_order_release);
          continue;
        }
        const double ms = MsSince(began);
        lock.lock();
        if (!ran) {
          stopped = true;
        } else {
          cost_ms_[step] = ms;
          (*done)[step] = true;
          if (recording_) records.push_back({step, lane, since_pass(began), since_pass(began) + ms});
          for (int later : waited_by_[step])
            if (later < stretch.end && --remaining[later - stretch.begin] == 0) ready.push_back(later);
        }
        lock.unlock();
        news.fetch_add(1, std::memory_order_release);
      }
    }
    if (error) std::rethrow_exception(error);
    record_.insert(record_.end(), records.begin(), records.end());
    if (stopped) return false;
  }
  if (automatic_ && stretch.wide && !stretch.decided && lanes_ >= 2) {
    const double ms = MsSince(start);
    const int passes = stretch.timed_alone + stretch.timed_lanes;
    // The first pass each way is not timed (it warms the caches and the threads).
    if (passes >= 2) {
      double& best = lanes ? stretch.best_lanes : stretch.best_alone;
      const int timed = lanes ? stretch.timed_lanes : stretch.timed_alone;
      best = timed <= 1 ? ms : std::min(best, ms);
    }
    ++(lanes ? stretch.timed_lanes : stretch.timed_alone);
    if (stretch.timed_alone > kProbes && stretch.timed_lanes > kProbes) {
      stretch.decided = true;
      stretch.on_lanes = stretch.best_lanes < stretch.best_alone;
    }
  }
  return true;
}

bool StepLanes::settled() const {
  if (!prepared_) return false;
  for (const Stretch& stretch : stretches_)
    if (automatic_ && stretch.wide && lanes_ >= 2 && !stretch.decided) return false;
  return true;
}

std::vector<StepLanes::WideStretch> StepLanes::wide_stretches() const {
  std::vector<WideStretch> wide;
  for (const Stretch& stretch : stretches_)
    if (stretch.wide)
      wide.push_back({stretch.begin, stretch.end, stretch.timed_alone > 1 ? stretch.best_alone : 0.0,
                      stretch.timed_lanes > 1 ? stretch.best_lanes : 0.0, UseLanes(stretch)});
  return wide;
}

std::string StepLanes::Describe() const {
  std::ostringstream out;
  int wide = 0, on_lanes = 0, steps_on_lanes = 0;
  for (const Stretch& stretch : stretches_) {
    if (!stretch.wide) continue;
    ++wide;
    const bool chosen = automatic_ ? stretch.decided && stretch.on_lanes : lanes_ >= 2;
    if (chosen) {
      ++on_lanes;
      steps_on_lanes += stretch.end - stretch.begin;
    }
  }
  out << lanes_ << (lanes_ == 1 ? " lane" : " lanes") << (automatic_ ? " (automatic)" : "") << "; " << on_lanes
      << " of " << wide << " wide stretches of the plan run on them (" << steps_on_lanes << " steps)";
  if (automatic_)
    for (const Stretch& stretch : stretches_)
      if (stretch.wide && !stretch.decided) {
        out << ", still timing";
        break;
      }
  // Overlap in the recorded pass: the time two or more steps ran at once.
  if (!record_.empty()) {
    std::vector<std::pair<double, int>> edges;
    double end = 0;
    for (const LaneRecord& r : record_) {
      edges.emplace_back(r.start_ms, 1);
      edges.emplace_back(r.end_ms, -1);
      end = std::max(end, r.end_ms);
    }
    std::sort(edges.begin(), edges.end());
    double together = 0, last = 0;
    int running = 0;
    for (const auto& [at, change] : edges) {
      if (running >= 2) together += at - last;
      running += change;
      last = at;
    }
    out << "; in the last timed pass, steps ran at once for " << std::fixed << std::setprecision(0)
        << (end > 0 ? 100 * together / end : 0) << "% of its " << std::setprecision(3) << end << " ms";
  }
  return out.str();
}

}  // namespace crema
