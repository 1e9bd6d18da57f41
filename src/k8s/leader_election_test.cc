// Leader election (k8s/leader_election.h) against the test API server's Leases, over HTTP on
// loopback: acquire, renew, expiry on the candidate's own clock, conflicts, release, and a
// leader cut off from the API server stepping down within its renew deadline.

#include "k8s/leader_election.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "k8s/testing/fake_apiserver.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;
using testing::FakeApiServer;

class LeaderElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server.start());
    for (auto* c : {&clientA, &clientB, &clientC}) {
      KubeConfig config;
      config.server = server.url();
      config.timeoutMs = 2000;
      auto made = KubeClient::create(config);
      ASSERT_TRUE(made) << made.error().message;
      *c = std::move(*made);
    }
  }
  std::unique_ptr<LeaderElector> elector(KubeClient& client, const std::string& id,
                                         const Clock& clock, LeaderElectionConfig c = {}) {
    c.ns = "tessera-system";
    c.name = "tessera-control-plane";
    c.identity = id;
    auto made = LeaderElector::create(client, c, clock);
    EXPECT_TRUE(made) << made.error().message;
    return made ? std::move(*made) : nullptr;
  }
  json lease() {
    auto l = server.get("leases", "tessera-system", "tessera-control-plane");
    return l ? *l : json();
  }
  FakeApiServer server;
  std::unique_ptr<KubeClient> clientA, clientB, clientC;
};

TEST(LeaderElectionConfigTest, RefusesTimingsClientGoWouldRefuse) {
  LeaderElectionConfig c;
  EXPECT_TRUE(validate(c));
  c.renewDeadlineMs = 2400;  // not more than 1.2 × 2000
  auto bad = validate(c);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("renew deadline"), std::string::npos);
  c = {};
  c.leaseDurationMs = 10000;  // not more than the renew deadline
  bad = validate(c);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("lease duration"), std::string::npos);
  c = {};
  c.leaseDurationMs = 15500;
  EXPECT_FALSE(validate(c));  // a Lease holds whole seconds
  c = {};
  c.retryPeriodMs = 0;
  EXPECT_FALSE(validate(c));
  c = {};
  c.name.clear();
  EXPECT_FALSE(validate(c));
  EXPECT_EQ(leaderElectionTimeoutMs(LeaderElectionConfig{}), 5000);
  LeaderElectionConfig quick;
  quick.renewDeadlineMs = 1200;
  EXPECT_EQ(leaderElectionTimeoutMs(quick), 1000);
}

TEST(LeaderElectionConfigTest, IdentitiesAreUniquePerProcessStart) {
  const std::string a = defaultLeaderIdentity(), b = defaultLeaderIdentity();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.substr(0, a.rfind('_')), b.substr(0, b.rfind('_')));
  EXPECT_EQ(a.size() - a.rfind('_') - 1, 16u);
}

TEST_F(LeaderElectionTest, TheFirstCandidateCreatesTheLeaseTheSecondWaits) {
  ManualClock clock(1000);
  auto a = elector(*clientA, "a", clock);
  auto b = elector(*clientB, "b", clock);
  auto got = a->tryAcquireOrRenew();
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_TRUE(*got);
  EXPECT_TRUE(a->isLeader());
  json l = lease();
  EXPECT_EQ(l["spec"]["holderIdentity"], "a");
  EXPECT_EQ(l["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ(l["spec"]["leaseTransitions"], 0);
  const std::string acquired = l["spec"]["acquireTime"];
  EXPECT_EQ(acquired.size(), std::string("2026-12-02T09:00:00.000000Z").size()) << acquired;

  got = b->tryAcquireOrRenew();
  ASSERT_TRUE(got);
  EXPECT_FALSE(*got);
  EXPECT_FALSE(b->isLeader());
  EXPECT_EQ(b->observedHolder(), "a");

  // Renewing keeps acquireTime and the transition count, moves renewTime and the version.
  const std::string rv = l["metadata"]["resourceVersion"];
  clock.advance(2000);
  got = a->tryAcquireOrRenew();
  ASSERT_TRUE(got);
  EXPECT_TRUE(*got);
  l = lease();
  EXPECT_EQ(l["spec"]["acquireTime"], acquired);
  EXPECT_EQ(l["spec"]["leaseTransitions"], 0);
  EXPECT_NE(l["metadata"]["resourceVersion"], rv);
}

TEST_F(LeaderElectionTest, LosingTheCreateRaceReadsWhoWon) {
  // B reads no lease, and another candidate creates one before B's POST lands: B gets 409
  // AlreadyExists, is not leader, and knows the holder at once.
  ManualClock clock(0);
  auto b = elector(*clientB, "b", clock);
  bool raced = false;
  server.refuseWrites([&](const std::string& resource, const json&) {
    if (resource == "leases" && !raced) {
      raced = true;
      json other = {
          {"metadata", {{"name", "tessera-control-plane"}, {"namespace", "tessera-system"}}},
          {"spec", {{"holderIdentity", "a"}, {"leaseDurationSeconds", 15}}}};
      EXPECT_TRUE(server.create("leases", other));
    }
    return 0;
  });
  auto got = b->tryAcquireOrRenew();
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_FALSE(*got);
  EXPECT_TRUE(raced);
  EXPECT_EQ(b->observedHolder(), "a");
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "a");
  // Its 15 s count from that read.
  clock.advance(14999);
  EXPECT_FALSE(*b->tryAcquireOrRenew());
  clock.advance(1);
  EXPECT_TRUE(*b->tryAcquireOrRenew());
}

TEST_F(LeaderElectionTest, ExpiryRunsOnTheCandidatesClockFromTheLastChangeItSaw) {
  ManualClock clockA(0), clockB(500000);  // far apart: only B's own elapsed time counts
  auto a = elector(*clientA, "a", clockA);
  auto b = elector(*clientB, "b", clockB);
  ASSERT_TRUE(*a->tryAcquireOrRenew());
  ASSERT_FALSE(*b->tryAcquireOrRenew());  // B sees A's record now (its t = 500 s)

  // A renews at B's +10 s: the record changed, so B's 15 s start again from there.
  clockB.advance(10000);
  clockA.advance(10000);
  ASSERT_TRUE(*a->tryAcquireOrRenew());
  ASSERT_FALSE(*b->tryAcquireOrRenew());
  clockB.advance(14000);  // 24 s after B first saw it, 14 s after the change: still A's
  EXPECT_FALSE(*b->tryAcquireOrRenew());
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "a");

  // A stops renewing; 15 s after the last change B takes it: one transition.
  clockB.advance(1000);
  auto got = b->tryAcquireOrRenew();
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_TRUE(*got);
  EXPECT_TRUE(b->isLeader());
  json l = lease();
  EXPECT_EQ(l["spec"]["holderIdentity"], "b");
  EXPECT_EQ(l["spec"]["leaseTransitions"], 1);

  // A's cached record is stale now: its fast-path PUT gets 409, it reads the lease, sees B's
  // fresh change and is no longer leader.
  const int conflicts = server.conflicts();
  got = a->tryAcquireOrRenew();
  ASSERT_TRUE(got);
  EXPECT_FALSE(*got);
  EXPECT_FALSE(a->isLeader());
  EXPECT_EQ(server.conflicts(), conflicts + 1);
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "b");
}

TEST_F(LeaderElectionTest, ARenewTimeFromASkewedClockDoesNotExpireALease) {
  // Another holder wrote a renewTime an hour in the past (its clock is behind): a candidate
  // seeing it for the first time still waits the full duration.
  json l = {{"metadata", {{"name", "tessera-control-plane"}, {"namespace", "tessera-system"}}},
            {"spec",
             {{"holderIdentity", "elsewhere"},
              {"leaseDurationSeconds", 15},
              {"acquireTime", "2026-12-02T08:00:00.000000Z"},
              {"renewTime", "2026-12-02T08:00:00.000000Z"},
              {"leaseTransitions", 4}}}};
  ASSERT_TRUE(server.create("leases", l));
  ManualClock clock(0);
  auto b = elector(*clientB, "b", clock);
  EXPECT_FALSE(*b->tryAcquireOrRenew());
  clock.advance(14999);
  EXPECT_FALSE(*b->tryAcquireOrRenew());
  clock.advance(1);
  EXPECT_TRUE(*b->tryAcquireOrRenew());
  EXPECT_EQ(lease()["spec"]["leaseTransitions"], 5);
}

TEST_F(LeaderElectionTest, ConcurrentCandidatesOnAnExpiredLeaseGetOneWinner) {
  ManualClock clock(0);
  auto a = elector(*clientA, "a", clock);
  ASSERT_TRUE(*a->tryAcquireOrRenew());
  // Both see A's lease, wait out its duration on their own clocks, then race for it.
  ManualClock cb(0), cc(0);
  auto b = elector(*clientB, "b", cb);
  auto c = elector(*clientC, "c", cc);
  ASSERT_FALSE(*b->tryAcquireOrRenew());
  ASSERT_FALSE(*c->tryAcquireOrRenew());
  cb.advance(16000);
  cc.advance(16000);
  std::atomic<int> winners{0};
  std::thread tb([&] { winners += *b->tryAcquireOrRenew() ? 1 : 0; });
  std::thread tc([&] { winners += *c->tryAcquireOrRenew() ? 1 : 0; });
  tb.join();
  tc.join();
  EXPECT_EQ(winners.load(), 1);
  const std::string holder = lease()["spec"]["holderIdentity"];
  EXPECT_TRUE(holder == "b" || holder == "c") << holder;
  EXPECT_EQ(b->isLeader(), holder == "b");
  EXPECT_EQ(c->isLeader(), holder == "c");
  EXPECT_EQ(lease()["spec"]["leaseTransitions"], 1);
}

TEST_F(LeaderElectionTest, ReleaseLetsAStandbyTakeOverAtItsNextTry) {
  ManualClock clock(0);
  auto a = elector(*clientA, "a", clock);
  auto b = elector(*clientB, "b", clock);
  ASSERT_TRUE(*a->tryAcquireOrRenew());
  ASSERT_FALSE(*b->tryAcquireOrRenew());
  ASSERT_TRUE(a->release());
  EXPECT_FALSE(a->isLeader());
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "");
  EXPECT_EQ(lease()["spec"]["leaseDurationSeconds"], 1);
  // No waiting out the 15 s: an empty holder is free.
  EXPECT_TRUE(*b->tryAcquireOrRenew());
  EXPECT_EQ(lease()["spec"]["leaseTransitions"], 1);
  // Releasing what one does not hold changes nothing.
  ASSERT_TRUE(a->release());
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "b");
}

TEST_F(LeaderElectionTest, AnAnswerThatIsNeitherSuccessNorConflictIsAnError) {
  ManualClock clock(0);
  auto a = elector(*clientA, "a", clock);
  server.refuseWrites(
      [](const std::string& resource, const json&) { return resource == "leases" ? 503 : 0; });
  auto got = a->tryAcquireOrRenew();
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message.find("503"), std::string::npos) << got.error().message;
  EXPECT_FALSE(a->isLeader());
  EXPECT_FALSE(server.get("leases", "tessera-system", "tessera-control-plane"));
}

// run() with real time and short timings: the leader renews; cut off from the API server it
// stops being leader within its renew deadline and run() returns; the standby takes over
// after the lease duration, and at no instant are both leaders.
TEST_F(LeaderElectionTest, ALeaderCutOffStepsDownAndAStandbyTakesOver) {
  SteadyClock clock;
  LeaderElectionConfig c;
  c.leaseDurationMs = 2000;
  c.renewDeadlineMs = 1200;
  c.retryPeriodMs = 200;
  auto a = elector(*clientA, "a", clock, c);
  auto b = elector(*clientB, "b", clock, c);
  std::atomic<bool> aStarted{false}, aStopped{false}, bStarted{false};
  std::atomic<Millis> aStoppedAt{0}, bStartedAt{0};
  std::thread ta([&] {
    a->run({.onStartedLeading = [&] { aStarted = true; },
            .onStoppedLeading =
                [&] {
                  aStoppedAt = clock.nowMs();
                  aStopped = true;
                },
            .onNewLeader = nullptr});
  });
  while (!aStarted) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::thread tb([&] {
    b->run({.onStartedLeading =
                [&] {
                  bStartedAt = clock.nowMs();
                  bStarted = true;
                },
            .onStoppedLeading = nullptr,
            .onNewLeader = nullptr});
  });
  // A few renewals pass; B stays a standby.
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  EXPECT_TRUE(a->isLeader());
  EXPECT_FALSE(b->isLeader());
  EXPECT_FALSE(bStarted);
  const std::string renewed = lease()["spec"]["renewTime"];

  // The API server refuses A's writes from now on.
  const Millis cutAt = clock.nowMs();
  server.refuseWrites([](const std::string& resource, const json& body) {
    return resource == "leases" && body["spec"].value("holderIdentity", "") == "a" ? 503 : 0;
  });
  bool overlap = false;
  while (!bStarted && clock.nowMs() - cutAt < 10000) {
    if (a->isLeader() && b->isLeader()) overlap = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ta.join();
  EXPECT_FALSE(overlap);
  ASSERT_TRUE(aStopped);
  ASSERT_TRUE(bStarted);
  // A stepped down within its renew deadline (it tries for that long after a retry period),
  // with slack for a loaded machine; B took over only once the lease had run out on its clock
  // (its last renewal came at most a retry period and a request before the cut).
  std::printf("cut off at 0: leader stepped down at +%lld ms, standby took over at +%lld ms\n",
              static_cast<long long>(aStoppedAt - cutAt),
              static_cast<long long>(bStartedAt - cutAt));
  EXPECT_LE(aStoppedAt - cutAt, c.retryPeriodMs + c.renewDeadlineMs + 1500);
  EXPECT_GE(bStartedAt - cutAt, c.leaseDurationMs - c.retryPeriodMs - 200);
  EXPECT_GE(bStartedAt.load(), aStoppedAt.load());
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "b");
  EXPECT_NE(lease()["spec"]["renewTime"], renewed);
  b->stop();
  tb.join();
  // B stopped while leading: it handed the lease back.
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "");
}

}  // namespace
}  // namespace tessera::k8s
