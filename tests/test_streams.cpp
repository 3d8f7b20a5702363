// Lanes on a device's streams (net/streams.hpp), apart from any net:
//   - the schedule keeps a chain on one stream and spreads towers over streams, with one event per join;
//   - on random graphs, every schedule keeps every edge (StreamSchedule::Keeps replays the queueing independently of
//     how the schedule was made), and dropping any wait it has breaks that;
//   - the rehearsed streams run work out of its queueing order, never out of a stream's own order or before an event
//     it waits for, and refuse a wait for an event nothing recorded (a GPU would not wait at all);
//   - running a random graph's schedule on rehearsed streams, each step checking that what it waits for has run, keeps
//     every edge in every interleaving tried.
// Nets on rehearsed streams giving the in-order bits: LanesTest.RehearsedStreamsGiveTheInOrderResultsBitForBit.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/common.hpp"
#include "net/step_graph.hpp"
#include "net/streams.hpp"
#include "test_util.hpp"

namespace crema {
namespace {

StepGraph GraphOf(const std::vector<std::vector<int>>& waits_for) {
  StepGraph graph;
  graph.waits_for = waits_for;
  graph.depth.assign(waits_for.size(), 0);
  for (size_t s = 0; s < waits_for.size(); ++s)
    for (int p : waits_for[s]) graph.depth[s] = std::max(graph.depth[s], graph.depth[p] + 1);
  return graph;
}

// A random graph of `n` steps, each waiting for up to three earlier ones (sometimes none).
StepGraph RandomGraph(int n, std::mt19937* random) {
  std::vector<std::vector<int>> waits_for(n);
  for (int s = 1; s < n; ++s) {
    const int count = std::uniform_int_distribution<int>(0, 3)(*random);
    for (int k = 0; k < count; ++k) waits_for[s].push_back(std::uniform_int_distribution<int>(0, s - 1)(*random));
    std::sort(waits_for[s].begin(), waits_for[s].end());
    waits_for[s].erase(std::unique(waits_for[s].begin(), waits_for[s].end()), waits_for[s].end());
  }
  return GraphOf(waits_for);
}

// The stem (0), two towers of two steps (1 -> 2 and 3 -> 4), a join (5), then a chain (6, 7).
const std::vector<std::vector<int>> kTowers = {{}, {0}, {1}, {0}, {3}, {2, 4}, {5}, {6}};

TEST(StreamScheduleTest, AChainStaysOnOneStreamAndTowersSpread) {
  const StepGraph graph = GraphOf(kTowers);
  const StreamSchedule one = ScheduleOnStreams(graph, 1);
  EXPECT_EQ(one.streams, 1);
  EXPECT_EQ(one.events, 0);
  EXPECT_TRUE(one.joins.empty());
  for (const StreamStep& step : one.steps) {
    EXPECT_EQ(step.stream, 0);
    EXPECT_TRUE(step.waits.empty());
  }
  EXPECT_TRUE(one.Keeps(graph));

  for (int streams : {2, 4}) {
    SCOPED_TRACE(streams);
    const StreamSchedule schedule = ScheduleOnStreams(graph, streams);
    EXPECT_EQ(schedule.streams, 2);  // no step has more than two ready beside it
    EXPECT_EQ(schedule.steps[1].stream, schedule.steps[0].stream);
    EXPECT_EQ(schedule.steps[2].stream, schedule.steps[1].stream);
    EXPECT_NE(schedule.steps[3].stream, schedule.steps[1].stream);
    EXPECT_EQ(schedule.steps[4].stream, schedule.steps[3].stream);
    // The tower on the other stream waits for the stem; the join waits for the tower it does not follow; the chain
    // after it needs nothing more.
    EXPECT_EQ(schedule.steps[3].waits.size(), 1u);
    EXPECT_EQ(schedule.steps[5].waits.size(), 1u);
    EXPECT_TRUE(schedule.steps[6].waits.empty());
    EXPECT_TRUE(schedule.steps[7].waits.empty());
    EXPECT_TRUE(schedule.Keeps(graph)) << schedule.Describe();
    EXPECT_EQ(schedule.Describe(), "2 streams, 8 steps (6, 2 per stream), 2 waits for events between streams");
  }
}

TEST(StreamScheduleTest, EverySchedulesKeepsEveryEdgeAndEachWaitIsNeeded) {
  std::mt19937 random(3);
  int dropped = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const StepGraph graph = RandomGraph(std::uniform_int_distribution<int>(1, 40)(random), &random);
    const int streams = std::uniform_int_distribution<int>(1, 5)(random);
    const StreamSchedule schedule = ScheduleOnStreams(graph, streams);
    ASSERT_LE(schedule.streams, streams);
    ASSERT_TRUE(schedule.Keeps(graph)) << "trial " << trial;
    // Without any one of its waits (or joins), the schedule no longer keeps the graph's edges.
    for (size_t s = 0; s < schedule.steps.size(); ++s)
      for (size_t w = 0; w < schedule.steps[s].waits.size(); ++w) {
        StreamSchedule without = schedule;
        without.steps[s].waits.erase(without.steps[s].waits.begin() + static_cast<long>(w));
        EXPECT_FALSE(without.Keeps(graph)) << "trial " << trial << ": step " << s << "'s wait " << w << " is idle";
        ++dropped;
      }
    for (size_t j = 0; j < schedule.joins.size(); ++j) {
      StreamSchedule without = schedule;
      without.joins.erase(without.joins.begin() + static_cast<long>(j));
      EXPECT_FALSE(without.Keeps(graph)) << "trial " << trial << ": join " << j << " is idle";
    }
  }
  EXPECT_GT(dropped, 100);
}

TEST(RehearsedStreamsTest, WorkRunsOutOfQueueingOrderButInStreamOrderAndAfterItsEvents) {
  int reordered_runs = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    RehearsedStreams device(seed);
    device.Prepare(2, 1);
    std::vector<std::string> ran;
    device.Launch(0, [&] { ran.push_back("a1"); });
    device.Launch(0, [&] { ran.push_back("a2"); });
    device.Record(0, 0);
    device.Launch(1, [&] { ran.push_back("b1"); });
    device.Wait(1, 0);
    device.Launch(1, [&] { ran.push_back("b2"); });
    device.Flush();
    ASSERT_EQ(ran.size(), 4u);
    const auto at = [&](const std::string& name) { return std::find(ran.begin(), ran.end(), name) - ran.begin(); };
    EXPECT_LT(at("a1"), at("a2"));
    EXPECT_LT(at("b1"), at("b2"));
    EXPECT_LT(at("a2"), at("b2"));  // b2 waits for the event recorded after a2
    reordered_runs += at("b1") < at("a2");
    EXPECT_EQ(device.operations_run(), 6);
  }
  EXPECT_GT(reordered_runs, 0);  // b1 waits for nothing and ran before a2 in some interleaving
  RehearsedStreams device(1);
  device.Prepare(2, 2);
  test::ExpectErrorContaining([&] { device.Wait(1, 1); }, {"waits for event 1", "nothing has recorded yet"});
  // A step that throws leaves nothing queued for the next pass.
  device.Record(0, 0);
  device.Launch(0, [] { CREMA_FAIL() << "a step failed"; });
  int later = 0;
  device.Launch(0, [&] { ++later; });
  test::ExpectErrorContaining([&] { device.Flush(); }, {"a step failed"});
  device.Launch(1, [&] { ++later; });
  device.Flush();
  EXPECT_EQ(later, 1);
}

TEST(RehearsedStreamsTest, RandomGraphsRunOnTheirSchedulesKeepEveryEdge) {
  std::mt19937 random(9);
  for (int trial = 0; trial < 100; ++trial) {
    const StepGraph graph = RandomGraph(std::uniform_int_distribution<int>(1, 30)(random), &random);
    const StreamSchedule schedule = ScheduleOnStreams(graph, std::uniform_int_distribution<int>(2, 4)(random));
    RehearsedStreams device(trial);
    for (int pass = 0; pass < 3; ++pass) {  // events recorded again each pass
      std::vector<bool> done(graph.size(), false);
      bool all_ran_after_their_waits = true;
      RunOnStreams(schedule, &device, [&](int step) {
        for (int before : graph.waits_for[step]) all_ran_after_their_waits = all_ran_after_their_waits && done[before];
        done[step] = true;
      });
      EXPECT_TRUE(all_ran_after_their_waits) << "trial " << trial << ", pass " << pass;
      EXPECT_EQ(std::count(done.begin(), done.end(), true), static_cast<long>(graph.size()));
    }
  }
}

}  // namespace
}  // namespace crema
