// What every recommender must do, whatever its formula: never a negative count, draining
// replicas change nothing, no signals at all is not a crash, and the same history gives the
// same answer.

#include <algorithm>

#include <gtest/gtest.h>

#include "scale/autoscaler.h"
#include "scale/test_support.h"

namespace tessera::scale {
namespace {

using testing::Rep;

class RecommenderContract : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Recommender> make() {
    auto r = makeRecommender(GetParam(), {});
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    return std::move(*r);
  }
};

DeploymentSignals busyDeployment(Millis now) {
  DeploymentSignals s;
  s.nowMs = now;
  for (int i = 0; i < 3; ++i) {
    s.replicas.push_back(Rep("r" + std::to_string(i))
                             .maxConcurrency(16)
                             .running(12 + i)
                             .waiting(6 + 2 * i)
                             .kv(0.7)
                             .gpu(0.8)
                             .created(i));
  }
  s.replicas.push_back(Rep("l").maxConcurrency(16).created(10).loading(now + 30'000));
  s.arrivalRatePerSec = 9;
  s.meanServiceMs = 4000;
  return s;
}

TEST_P(RecommenderContract, DrainingReplicasChangeNothing) {
  auto plain = make();
  auto withDraining = make();
  for (Millis t = 0; t <= 60'000; t += 15'000) {
    DeploymentSignals s = busyDeployment(t);
    DeploymentSignals d = s;
    d.replicas.push_back(Rep("leaving")
                             .draining()
                             .maxConcurrency(256)
                             .running(200)
                             .waiting(500)
                             .kv(1.0)
                             .gpu(1.0)
                             .priority(-1));
    const Recommendation a = plain->recommend(s, 4);
    const Recommendation b = withDraining->recommend(d, 4);
    EXPECT_EQ(a.replicas, b.replicas) << "at " << t;
  }
}

TEST_P(RecommenderContract, NeverNegativeAndSurvivesNoSignals) {
  auto r = make();
  EXPECT_GE(r->recommend(DeploymentSignals{}, 0).replicas, 0);
  EXPECT_GE(r->recommend(testing::at(1'000, {Rep("a")}), 1).replicas, 0);
  EXPECT_GE(r->recommend(testing::at(2'000, {Rep("l").loading()}), 1).replicas, 0);
  DeploymentSignals idle = testing::at(3'000, {Rep("a").running(0).waiting(0).kv(0).gpu(0)});
  idle.arrivalRatePerSec = 0;
  idle.meanServiceMs = 1000;
  EXPECT_GE(r->recommend(idle, 1).replicas, 0);
}

TEST_P(RecommenderContract, SameHistorySameAnswer) {
  auto a = make();
  auto b = make();
  for (Millis t = 0; t <= 120'000; t += 5'000) {
    const DeploymentSignals s = busyDeployment(t);
    EXPECT_EQ(a->recommend(s, 4).replicas, b->recommend(s, 4).replicas) << "at " << t;
  }
}

TEST_P(RecommenderContract, HeavierLoadNeverAsksForFewer) {
  auto light = make();
  auto heavy = make();
  DeploymentSignals s = busyDeployment(0);
  DeploymentSignals h = s;
  for (ReplicaSignals& r : h.replicas) {
    if (r.phase != ReplicaPhase::kReady) continue;
    r.waiting = *r.waiting * 3;
    r.running = 16;
    r.kvCacheUsage = 0.95;
    r.gpuUtilization = 0.99;
  }
  h.arrivalRatePerSec = 27;
  EXPECT_GE(heavy->recommend(h, 4).replicas, light->recommend(s, 4).replicas);
}

INSTANTIATE_TEST_SUITE_P(All, RecommenderContract, ::testing::ValuesIn(recommenderNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace tessera::scale
