// `tessera serve --leader-elect`: real processes against the test API server's Leases. One
// replica leads and serves mutating calls, the standby answers 503 not_leader; kill -9 of the
// leader hands over after the lease runs out; a leader cut off from the API server exits 1
// within its renew deadline; SIGTERM hands the lease back at once.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <httplib.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/serve_test_support.h"
#include "k8s/testing/fake_apiserver.h"

namespace {

using nlohmann::json;
using tessera::k8s::testing::FakeApiServer;
using Clock = std::chrono::steady_clock;

struct LeaderReplica {
  pid_t pid = -1;
  int port = 0;
  std::string name;
};

LeaderReplica startReplica(const std::string& name, const std::string& apiServer) {
  const auto p = tessera::testing::startServe(
      {"--listen", "127.0.0.1:0", "--store", ":memory:", "--threads", "2", "--kube-api-server",
       apiServer, "--controller", "false", "--leader-elect", "--leader-elect-lease-duration", "2s",
       "--leader-elect-renew-deadline", "1500ms", "--leader-elect-retry-period", "500ms"},
      {{"POD_NAME", name}, {"POD_NAMESPACE", "tessera-system"}});
  return {p.pid, p.port, name};
}

// The replica's pod, as the Deployment would have made it (the tessera.io/role label is
// what the replicas keep on it).
void addPod(FakeApiServer& api, const std::string& name) {
  ASSERT_TRUE(api.create("pods", {{"metadata", {{"name", name}, {"namespace", "tessera-system"}}},
                                  {"spec", {{"nodeName", "cp-node"}}}}));
}

std::string role(FakeApiServer& api, const std::string& pod) {
  auto p = api.get("pods", "tessera-system", pod);
  if (!p) return "";
  return p->value("/metadata/labels"_json_pointer, json::object()).value("tessera.io/role", "");
}

// The status a mutating call gets (a node with a bad body: 400 from a leader, 503 from a
// standby), or 0 when nothing answers.
int mutate(const LeaderReplica& r) {
  httplib::Client client("127.0.0.1", r.port);
  client.set_connection_timeout(1);
  client.set_read_timeout(2);
  auto res = client.Post("/api/v1/nodes", "{}", "application/json");
  return res ? res->status : 0;
}

std::string holder(FakeApiServer& server) {
  auto l = server.get("leases", "tessera-system", "tessera-control-plane");
  if (!l) return "";
  return (*l)["spec"].value("holderIdentity", "");
}

bool startsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Waits for the process to exit, at most `ms`; its exit status, or -1 when still running.
int waitExit(pid_t pid, int ms) {
  const auto until = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < until) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

template <typename Pred>
bool waitFor(Pred pred, int ms) {
  const auto until = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

long long msSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

TEST(ServeLeader, OneLeaderServesFailsOverOnKillAndStepsDownWhenCutOff) {
  FakeApiServer api;
  ASSERT_TRUE(api.start());
  for (const char* pod : {"replica-a", "replica-b", "replica-c"}) addPod(api, pod);
  LeaderReplica a = startReplica("replica-a", api.url());
  LeaderReplica b = startReplica("replica-b", api.url());
  ASSERT_GT(a.port, 0);
  ASSERT_GT(b.port, 0);

  ASSERT_TRUE(waitFor([&] { return !holder(api).empty(); }, 10000)) << "no replica took the lease";
  const bool aLeads = startsWith(holder(api), "replica-a_");
  LeaderReplica& leader = aLeads ? a : b;
  LeaderReplica& standby = aLeads ? b : a;
  // The leader serves the call (and refuses the bad body), the standby refuses to act.
  ASSERT_TRUE(waitFor([&] { return mutate(leader) == 400; }, 5000));
  EXPECT_EQ(mutate(standby), 503);
  // The pods say who leads: what the Service selects (tessera.io/role=leader).
  EXPECT_TRUE(waitFor([&] { return role(api, leader.name) == "leader"; }, 3000));
  EXPECT_TRUE(waitFor([&] { return role(api, standby.name) == "standby"; }, 3000));
  {
    // The refusal names the leader once the standby has read the lease (its next retry).
    httplib::Client client("127.0.0.1", standby.port);
    std::string last;
    EXPECT_TRUE(waitFor(
        [&] {
          auto res = client.Post("/api/v1/nodes", "{}", "application/json");
          if (!res || res->status != 503) return false;
          last = res->body;
          const json body = json::parse(res->body, nullptr, false);
          return body.is_object() && body["error"]["code"] == "not_leader" &&
                 body["error"]["message"].get<std::string>().find(leader.name) != std::string::npos;
        },
        3000))
        << last;
    auto read = client.Get("/api/v1/nodes");  // reads are served by every replica
    ASSERT_TRUE(read);
    EXPECT_EQ(read->status, 200);
  }

  // kill -9 of the leader: the standby takes over once the lease has run out on its clock.
  const auto killed = Clock::now();
  ::kill(leader.pid, SIGKILL);
  ::waitpid(leader.pid, nullptr, 0);
  ASSERT_TRUE(waitFor([&] { return mutate(standby) == 400; }, 10000)) << "no failover";
  const long long failover = msSince(killed);
  std::printf("failover after kill -9: %lld ms (lease 2 s, retry 0.5 s)\n", failover);
  EXPECT_GE(failover, 1000);  // not before the lease could have expired (2 s from its last renew)
  EXPECT_TRUE(startsWith(holder(api), standby.name + "_"));
  // The new leader takes the label, and the killed one's pod (it could not step down) loses it.
  EXPECT_TRUE(waitFor([&] { return role(api, standby.name) == "leader"; }, 3000));
  std::printf("routed to the new leader (its pod labelled) %lld ms after kill -9\n",
              msSince(killed));
  EXPECT_EQ(role(api, leader.name), "standby");

  // Cut off: the API server refuses the new leader's lease writes. It stops acting within
  // its renew deadline and exits 1.
  const std::string cutHolder = holder(api);
  api.refuseWrites([cutHolder](const std::string& resource, const json& body) {
    return resource == "leases" && body["spec"].value("holderIdentity", "") == cutHolder ? 503 : 0;
  });
  const auto cut = Clock::now();
  ASSERT_TRUE(waitFor([&] { return mutate(standby) != 400; }, 5000)) << "still acting when cut off";
  const long long stoppedActing = msSince(cut);
  const int status = waitExit(standby.pid, 8000);
  std::printf("cut off: stopped acting after %lld ms, exited %d after %lld ms\n", stoppedActing,
              status, msSince(cut));
  EXPECT_LE(stoppedActing, 1500 + 500 + 1500);  // renew deadline + a retry + slack
  EXPECT_EQ(status, 1);
  api.refuseWrites(nullptr);

  // A fresh replica takes the lease (after it runs out), and hands it back on SIGTERM.
  LeaderReplica c = startReplica("replica-c", api.url());
  ASSERT_GT(c.port, 0);
  ASSERT_TRUE(waitFor([&] { return startsWith(holder(api), "replica-c_"); }, 10000));
  ASSERT_TRUE(waitFor([&] { return mutate(c) == 400; }, 5000));
  EXPECT_TRUE(waitFor([&] { return role(api, "replica-c") == "leader"; }, 3000));
  ::kill(c.pid, SIGTERM);
  EXPECT_EQ(waitExit(c.pid, 8000), 0);
  EXPECT_EQ(holder(api), "");
  EXPECT_EQ(role(api, "replica-c"), "standby");  // stepped down on SIGTERM
}

}  // namespace
