#ifdef CREMA_USE_MPI

#include "parallel/mpi_communicator.hpp"

// The C interface only: Open MPI's (deprecated) C++ bindings would need their own library.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <set>
#include <sstream>

#include "core/common.hpp"

namespace crema {

namespace {

constexpr int kRollCallTag = 1;  // rank 0 asks "where are you?" (the number of collectives it has started)
constexpr int kAnswerTag = 2;    // and a rank answers with its own number
// MPI counts are ints: larger transfers go in pieces of this many elements.
constexpr size_t kPiece = size_t{1} << 30;

std::string MpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<size_t>(length));
}

void Check(int code, const char* call) {
  CREMA_CHECK(code == MPI_SUCCESS) << "MPI: " << call << " failed: " << MpiError(code);
}

}  // namespace

struct MpiCommunicator::State {
  MPI_Comm world = MPI_COMM_NULL;  // the collectives (a copy of MPI_COMM_WORLD, so nothing else matches them)
  MPI_Comm roll = MPI_COMM_NULL;   // the roll call's messages
  long long sequence = 0;          // collectives started on this member
  struct Active {
    MPI_Request request = MPI_REQUEST_NULL;
    long long sequence = 0;
    double started = 0;
    double finished = 0;
  };
  std::vector<Active> flights;  // all-reduces started since the last WaitAll
  // A rank other than 0: rank 0's question, always awaited, and the answers on their way.
  long long question = 0;
  MPI_Request question_request = MPI_REQUEST_NULL;
  std::deque<std::pair<MPI_Request, std::unique_ptr<long long>>> answers;
};

MpiCommunicator::MpiCommunicator() : state_(std::make_unique<State>()) {
  thread_ = std::thread([this] { Loop(); });
  try {
    Run([this] {
      int initialized = 0;
      MPI_Initialized(&initialized);
      int provided = MPI_THREAD_SINGLE;
      if (!initialized)
        Check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      else
        MPI_Query_thread(&provided);
      CREMA_CHECK(provided >= MPI_THREAD_SERIALIZED)
          << "MPI gives thread support level " << provided << ", below MPI_THREAD_SERIALIZED, which crema needs "
          << "(its collectives run on a thread of their own)";
      // Errors come back as codes (and become crema errors naming the call) instead of ending the process at once.
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
      Check(MPI_Comm_dup(MPI_COMM_WORLD, &state_->world), "MPI_Comm_dup");
      Check(MPI_Comm_dup(MPI_COMM_WORLD, &state_->roll), "MPI_Comm_dup");
      MPI_Comm_set_errhandler(state_->world, MPI_ERRORS_RETURN);
      MPI_Comm_set_errhandler(state_->roll, MPI_ERRORS_RETURN);
      MPI_Comm_rank(state_->world, &rank_);
      MPI_Comm_size(state_->world, &size_);
      if (rank_ != 0)
        Check(MPI_Irecv(&state_->question, 1, MPI_LONG_LONG, 0, kRollCallTag, state_->roll, &state_->question_request),
              "MPI_Irecv");
      // The hosts, for the log: every member's processor name.
      char name[MPI_MAX_PROCESSOR_NAME] = {};
      int length = 0;
      MPI_Get_processor_name(name, &length);
      std::vector<char> names(static_cast<size_t>(size_) * MPI_MAX_PROCESSOR_NAME);
      Check(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                          state_->world),
            "MPI_Allgather");
      std::set<std::string> hosts;
      for (int r = 0; r < size_; ++r)
        hosts.insert(std::string(&names[static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME]));
      char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
      MPI_Get_library_version(version, &length);
      std::string library(version, static_cast<size_t>(length));
      library = library.substr(0, library.find_first_of(",\n"));
      std::ostringstream description;
      description << "MPI (" << library << "): " << size_ << " processes on " << hosts.size()
                  << (hosts.size() == 1 ? " host" : " hosts");
      description_ = description.str();
    });
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
    throw;
  }
}

MpiCommunicator::~MpiCommunicator() {
  try {
    Run([this] {
      // Nothing may be left unmatched at MPI_Finalize: the awaited question is cancelled, the answers delivered.
      if (state_->question_request != MPI_REQUEST_NULL) {
        MPI_Cancel(&state_->question_request);
        MPI_Wait(&state_->question_request, MPI_STATUS_IGNORE);
      }
      for (auto& answer : state_->answers) MPI_Wait(&answer.first, MPI_STATUS_IGNORE);
      state_->answers.clear();
      // Every member arrives here before any finalizes.
      MPI_Barrier(state_->world);
      MPI_Comm_free(&state_->roll);
      MPI_Comm_free(&state_->world);
      MPI_Finalize();
    });
  } catch (const std::exception&) {
    // A group with a fault ends through Abort; nothing is left to finalize.
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void MpiCommunicator::Queue(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!fault_.empty()) throw Error(fault_);
    jobs_.push_back(std::move(job));
  }
  changed_.notify_all();
}

void MpiCommunicator::Run(const std::function<void()>& job) {
  bool done = false;
  std::exception_ptr error;
  Queue([&] {
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    done = true;
  });
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return done; });
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const Error& fault) {
      if (fault_.empty()) fault_ = fault.what();
      throw;
    }
  }
}

// What the communicator's thread does between jobs and while it waits: answer rank 0's roll call, and move the
// all-reduces in flight along.
namespace {

void Answer(MPI_Comm roll, long long sequence, long long* question, MPI_Request* question_request,
            std::deque<std::pair<MPI_Request, std::unique_ptr<long long>>>* answers) {
  while (!answers->empty()) {
    int done = 0;
    MPI_Test(&answers->front().first, &done, MPI_STATUS_IGNORE);
    if (!done) break;
    answers->pop_front();
  }
  if (*question_request == MPI_REQUEST_NULL) return;
  int asked = 0;
  MPI_Test(question_request, &asked, MPI_STATUS_IGNORE);
  if (!asked) return;
  auto answer = std::make_unique<long long>(sequence);
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Isend(answer.get(), 1, MPI_LONG_LONG, 0, kAnswerTag, roll, &request);
  answers->emplace_back(request, std::move(answer));
  MPI_Irecv(question, 1, MPI_LONG_LONG, 0, kRollCallTag, roll, question_request);
}

}  // namespace

void MpiCommunicator::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (!jobs_.empty()) {
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      std::string failure;
      try {
        job();
      } catch (const std::exception& error) {
        failure = error.what();
      }
      lock.lock();
      if (!failure.empty() && fault_.empty()) fault_ = failure;
      changed_.notify_all();  // a caller of Run waits for its job
      continue;
    }
    if (stopping_) return;
    // Idle, the thread looks in now and then for rank 0's roll call (and moves any sums in flight on).
    changed_.wait_for(lock, std::chrono::milliseconds(20));
    if (!jobs_.empty() || stopping_ || state_->world == MPI_COMM_NULL || !fault_.empty()) continue;
    lock.unlock();
    if (rank_ != 0)
      Answer(state_->roll, state_->sequence, &state_->question, &state_->question_request, &state_->answers);
    TestFlights();
    lock.lock();
  }
}

void MpiCommunicator::TestFlights() {
  const double now = SteadySeconds();
  for (auto& flight : state_->flights) {
    if (flight.request == MPI_REQUEST_NULL) continue;
    int done = 0;
    MPI_Test(&flight.request, &done, MPI_STATUS_IGNORE);
    if (done) flight.finished = now;
  }
}

void MpiCommunicator::Progress() {
  // Only with sums in flight, and one such job waiting is enough: the compute thread calls this after every layer's
  // backward.
  if (!in_flight_ || progress_queued_.exchange(true)) return;
  Queue([this] {
    progress_queued_ = false;
    TestFlights();
  });
}

// What the waits of one member share: its communicators, who it is, how long it may wait, and what it must answer
// while it waits.
struct MpiCommunicator::Waiter {
  MPI_Comm roll;
  int rank;
  int size;
  double timeout;
  long long* sequence;
  long long* question;
  MPI_Request* question_request;
  std::deque<std::pair<MPI_Request, std::unique_ptr<long long>>>* answers;

  // Rank 0, when a collective is late: asks every other rank which collective it has reached (for a moment), and
  // says who did not answer and who is behind.
  std::string RollCall(long long awaited) const {
    std::vector<long long> answers_of(static_cast<size_t>(size), -1);
    std::vector<MPI_Request> asks(static_cast<size_t>(size), MPI_REQUEST_NULL);
    std::vector<MPI_Request> replies(static_cast<size_t>(size), MPI_REQUEST_NULL);
    long long asked = awaited;
    for (int r = 1; r < size; ++r) {
      MPI_Isend(&asked, 1, MPI_LONG_LONG, r, kRollCallTag, roll, &asks[static_cast<size_t>(r)]);
      MPI_Irecv(&answers_of[static_cast<size_t>(r)], 1, MPI_LONG_LONG, r, kAnswerTag, roll,
                &replies[static_cast<size_t>(r)]);
    }
    const double until = SteadySeconds() + 3.0;
    for (;;) {
      int all = 0;
      MPI_Testall(size, replies.data(), &all, MPI_STATUSES_IGNORE);
      if (all || SteadySeconds() > until) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::vector<int> silent, behind;
    for (int r = 1; r < size; ++r) {
      MPI_Request& reply = replies[static_cast<size_t>(r)];
      if (reply != MPI_REQUEST_NULL) {
        int done = 0;
        MPI_Test(&reply, &done, MPI_STATUS_IGNORE);
        if (!done) {
          silent.push_back(r);
          MPI_Cancel(&reply);
          MPI_Request_free(&reply);
          continue;
        }
      }
      if (answers_of[static_cast<size_t>(r)] < awaited) behind.push_back(r);
    }
    for (MPI_Request& ask : asks)
      if (ask != MPI_REQUEST_NULL) MPI_Request_free(&ask);
    std::ostringstream report;
    const auto list = [&](const std::vector<int>& ranks) {
      for (size_t i = 0; i < ranks.size(); ++i) report << (i ? ", " : "") << ranks[i];
    };
    if (!silent.empty()) {
      report << (silent.size() == 1 ? "rank " : "ranks ");
      list(silent);
      report << (silent.size() == 1 ? " does" : " do") << " not answer (stopped, hung, or gone)";
    }
    if (!behind.empty()) {
      report << (silent.empty() ? "" : "; ") << (behind.size() == 1 ? "rank " : "ranks ");
      list(behind);
      report << (behind.size() == 1 ? " has" : " have") << " not reached it (stuck, or slower by more than the "
             << "timeout)";
    }
    if (silent.empty() && behind.empty()) report << "every rank reached it, yet it did not complete";
    return report.str();
  }

  // Polls `requests` until all complete, answering the roll call meanwhile; past the deadline, throws naming
  // `what` (and, on rank 0, the ranks at fault).
  void Complete(std::vector<MPI_Request>* requests, const std::string& what, long long collective,
                double started) const {
    const double deadline = started + timeout + (rank == 0 ? 0.0 : 10.0);
    for (;;) {
      int all = 0;
      const int code = MPI_Testall(static_cast<int>(requests->size()), requests->data(), &all, MPI_STATUSES_IGNORE);
      Check(code, what.c_str());
      if (all) return;
      if (rank != 0) Answer(roll, *sequence, question, question_request, answers);
      if (SteadySeconds() > deadline) {
        const std::string who = rank == 0 ? RollCall(collective) : "rank 0 or another rank is stopped, hung or gone";
        CREMA_FAIL() << what << " (collective #" << collective << ") did not complete within " << timeout
                     << " s: " << who << ". Ending every rank (--collective_timeout sets the limit)";
      }
      std::this_thread::yield();
    }
  }
};

MpiCommunicator::Waiter MpiCommunicator::MakeWaiter() const {
  return Waiter{
      state_->roll,    rank_, size_, timeout_seconds(), &state_->sequence, &state_->question, &state_->question_request,
      &state_->answers};
}

void MpiCommunicator::AllReduceSum(double* values, size_t count) {
  Run([&] {
    const Waiter waiter = MakeWaiter();
    const long long collective = ++state_->sequence;
    std::vector<MPI_Request> requests;
    for (size_t at = 0; at < count; at += kPiece) {
      requests.emplace_back();
      Check(MPI_Iallreduce(MPI_IN_PLACE, values + at, static_cast<int>(std::min(kPiece, count - at)), MPI_DOUBLE,
                           MPI_SUM, state_->world, &requests.back()),
            "MPI_Iallreduce");
    }
    waiter.Complete(&requests, "a sum over the ranks", collective, SteadySeconds());
  });
}

void MpiCommunicator::Broadcast(std::string* bytes, int root) {
  Run([&] {
    const Waiter waiter = MakeWaiter();
    const long long collective = ++state_->sequence;
    uint64_t length = bytes->size();
    std::vector<MPI_Request> requests(1);
    const double started = SteadySeconds();
    Check(MPI_Ibcast(&length, 1, MPI_UINT64_T, root, state_->world, &requests[0]), "MPI_Ibcast");
    waiter.Complete(&requests, "a broadcast from rank " + std::to_string(root), collective, started);
    if (rank_ != root) bytes->resize(length);
    requests.clear();
    for (size_t at = 0; at < length; at += kPiece) {
      requests.emplace_back();
      Check(MPI_Ibcast(bytes->data() + at, static_cast<int>(std::min<uint64_t>(kPiece, length - at)), MPI_BYTE, root,
                       state_->world, &requests.back()),
            "MPI_Ibcast");
    }
    waiter.Complete(&requests, "a broadcast from rank " + std::to_string(root), collective, started);
  });
}

std::vector<std::string> MpiCommunicator::Gather(const std::string& bytes, int root) {
  std::vector<std::string> gathered;
  Run([&] {
    const Waiter waiter = MakeWaiter();
    const long long collective = ++state_->sequence;
    const double started = SteadySeconds();
    const std::string what = "a gather to rank " + std::to_string(root);
    CREMA_CHECK(bytes.size() < INT_MAX) << "rank " << rank_ << ": " << bytes.size() << " bytes to gather, over MPI's "
                                        << "limit for one message";
    int length = static_cast<int>(bytes.size());
    std::vector<int> lengths(static_cast<size_t>(size_));
    std::vector<MPI_Request> requests(1);
    Check(MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, root, state_->world, &requests[0]),
          "MPI_Igather");
    waiter.Complete(&requests, what, collective, started);
    std::vector<int> offsets(static_cast<size_t>(size_), 0);
    std::string all;
    if (rank_ == root) {
      long long total = 0;
      for (int r = 0; r < size_; ++r) {
        offsets[static_cast<size_t>(r)] = static_cast<int>(total);
        total += lengths[static_cast<size_t>(r)];
      }
      CREMA_CHECK(total < INT_MAX) << what << ": " << total << " bytes, over MPI's limit for one message";
      all.resize(static_cast<size_t>(total));
    }
    Check(MPI_Igatherv(bytes.data(), length, MPI_BYTE, all.data(), lengths.data(), offsets.data(), MPI_BYTE, root,
                       state_->world, &requests[0]),
          "MPI_Igatherv");
    waiter.Complete(&requests, what, collective, started);
    if (rank_ == root)
      for (int r = 0; r < size_; ++r)
        gathered.push_back(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]),
                                      static_cast<size_t>(lengths[static_cast<size_t>(r)])));
  });
  return gathered;
}

void MpiCommunicator::StartAllReduceSum(float* data, size_t count, void* stream) {
  in_flight_ = true;
  Queue([this, data, count] {
    const long long collective = ++state_->sequence;
    for (size_t at = 0; at < count; at += kPiece) {
      State::Active flight;
      flight.sequence = collective;
      flight.started = SteadySeconds();
      Check(MPI_Iallreduce(MPI_IN_PLACE, data + at, static_cast<int>(std::min(kPiece, count - at)), MPI_FLOAT, MPI_SUM,
                           state_->world, &flight.request),
            "MPI_Iallreduce");
      state_->flights.push_back(flight);
    }
  });
}

std::vector<Communicator::Flight> MpiCommunicator::WaitAll() {
  std::vector<Flight> flights;
  Run([&] {
    const Waiter waiter = MakeWaiter();
    for (auto& flight : state_->flights) {
      if (flight.request != MPI_REQUEST_NULL) {
        std::vector<MPI_Request> request{flight.request};
        waiter.Complete(&request, "the gradient all-reduce", flight.sequence, flight.started);
        flight.request = MPI_REQUEST_NULL;
        flight.finished = SteadySeconds();
      }
      flights.push_back({flight.started, flight.finished});
    }
    state_->flights.clear();
  });
  in_flight_ = false;
  return flights;
}

void MpiCommunicator::Abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace crema

#endif  // CREMA_USE_MPI
