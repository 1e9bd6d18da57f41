// Scale-down victims: priority, then load, then newest; never a draining replica.

#include "scale/victims.h"

#include <gtest/gtest.h>

#include "scale/test_support.h"

namespace tessera::scale {
namespace {

using testing::Rep;

TEST(Victims, LowestPriorityThenLeastLoadedThenNewest) {
  const std::vector<ReplicaSignals> reps = {
      Rep("important").priority(5).created(100),
      Rep("busy").running(8).waiting(2).created(10),       // load 10
      Rep("light-old").running(3).created(10),             // load 3
      Rep("light-new").running(2).waiting(1).created(50),  // load 3, newer
      Rep("idle").created(5),                              // load 0
      Rep("leaving").draining().created(200),
  };
  EXPECT_EQ(chooseVictims(reps, 5),
            (std::vector<std::string>{"idle", "light-new", "light-old", "busy", "important"}));
  EXPECT_EQ(chooseVictims(reps, 2), (std::vector<std::string>{"idle", "light-new"}));
}

TEST(Victims, NeverDrainingAndNoMoreThanThereAre) {
  const std::vector<ReplicaSignals> reps = {Rep("a").draining(), Rep("b").running(1),
                                            Rep("c").draining()};
  EXPECT_EQ(chooseVictims(reps, 3), (std::vector<std::string>{"b"}));
  EXPECT_TRUE(chooseVictims(reps, 0).empty());
}

TEST(Victims, LoadingReplicasGoFirstAmongEquals) {
  const std::vector<ReplicaSignals> reps = {Rep("old").running(1).created(0),
                                            Rep("new-loading").loading(90'000).created(60'000)};
  EXPECT_EQ(chooseVictims(reps, 1), (std::vector<std::string>{"new-loading"}));
}

TEST(Victims, TiesBrokenById) {
  const std::vector<ReplicaSignals> reps = {Rep("b"), Rep("a"), Rep("c")};
  EXPECT_EQ(chooseVictims(reps, 3), (std::vector<std::string>{"a", "b", "c"}));
}

}  // namespace
}  // namespace tessera::scale
