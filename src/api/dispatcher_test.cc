// The dispatcher's threading and the one write order (assume, persist, confirm or forget),
// against the real HTTP server, the real control plane and a real SQLite store, wrapped in a
// store port that can hold a commit on a latch or refuse it:
//  - reads (GET routes, the extender's filter) are answered while a writer's commit is held,
//    and they see the write as assumed;
//  - a commit the store refuses leaves memory and the store exactly as they were, for every
//    kind of mutating operation;
//  - writers on several threads, some of whose commits are refused, leave the store equal to
//    what a restart rebuilds (randomised: the seed is printed);
//  - the leadership gate stops every mutating call, also the server's own (withPlane).

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "api/control_plane.h"
#include "api/dispatcher.h"
#include "api/http_server.h"
#include "api/json_api.h"
#include "common/clock.h"
#include "model/gpu_catalog.h"
#include "store/store.h"
#include "store/testing/forwarding_store.h"
#include "store/testing/temp_dir.h"

namespace tessera::api {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A real SQLite store behind a port that can hold the next matching commit until released
// (hold), refuse matching commits (refuse), or refuse at random (flaky).
class LatchedStore final : public store::testing::ForwardingStore {
 public:
  explicit LatchedStore(std::unique_ptr<store::Store> inner)
      : ForwardingStore(std::move(inner)) {}

  Result<void> commitAtomically(const store::WriteSet& batch) override {
    {
      std::unique_lock l(m_);
      if (holdNext_) {
        holdNext_ = false;
        held_ = true;
        cv_.notify_all();
        cv_.wait_for(l, 30s, [&] { return released_; });
        released_ = false;
        held_ = false;
        cv_.notify_all();
      }
      if (refuse_ && refuse_(batch)) return fail(Error::internal("the disk is full (test)"));
      if (flakyPercent_ > 0 && std::uniform_int_distribution<int>(0, 99)(rng_) < flakyPercent_) {
        ++refused_;
        return fail(Error::internal("the disk is full (test, random)"));
      }
    }
    return ForwardingStore::commitAtomically(batch);
  }

  void holdNext() {
    std::lock_guard l(m_);
    holdNext_ = true;
  }
  bool waitUntilHeld() {
    std::unique_lock l(m_);
    return cv_.wait_for(l, 10s, [&] { return held_; });
  }
  bool held() {
    std::lock_guard l(m_);
    return held_;
  }
  void release() {
    std::lock_guard l(m_);
    released_ = true;
    cv_.notify_all();
  }
  void refuse(std::function<bool(const store::WriteSet&)> which) {
    std::lock_guard l(m_);
    refuse_ = std::move(which);
  }
  void flaky(int percent, std::uint32_t seed) {
    std::lock_guard l(m_);
    flakyPercent_ = percent;
    rng_.seed(seed);
  }
  int refused() {
    std::lock_guard l(m_);
    return refused_;
  }
  // Every document, as a restart reads them (revisions and times left out).
  json documents() const {
    auto all = inner().loadAll();
    EXPECT_TRUE(all) << all.error().message;
    json out = json::object();
    if (!all) return out;
    for (const store::Document& d : all->documents)
      out[d.kind + "/" + d.name] = json::parse(d.json);
    return out;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool holdNext_ = false, held_ = false, released_ = false;
  std::function<bool(const store::WriteSet&)> refuse_;
  int flakyPercent_ = 0;
  int refused_ = 0;
  std::mt19937 rng_;
};

// Joins a thread at scope exit, after `unblock` (a failed assertion must not leave it joinable).
struct JoinOnExit {
  std::thread& thread;
  std::function<void()> unblock;
  ~JoinOnExit() {
    if (unblock) unblock();
    if (thread.joinable()) thread.join();
  }
};

// Whether the batch writes or deletes the document (kind, name).
bool touches(const store::WriteSet& batch, std::string_view kind, std::string_view name) {
  for (const auto& w : batch.writes()) {
    if (w.kind == kind && w.name == name) return true;
  }
  return false;
}

json nodeBody(const std::string& name, int gpus) {
  json list = json::array();
  for (int i = 0; i < gpus; ++i) list.push_back({{"type", "A100-80GB"}});
  return {{"name", name}, {"cpu", 64}, {"hostMemory", "512Gi"}, {"gpus", list}};
}

// Arrays sorted (recursively) by their elements' text: slot order is not kept by a restart.
json sorted(json j) {
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) v = sorted(std::move(v));
  } else if (j.is_array()) {
    for (auto& v : j) v = sorted(std::move(v));
    std::sort(j.begin(), j.end(), [](const json& a, const json& b) { return a.dump() < b.dump(); });
  }
  return j;
}

// Everything a client reads that the store keeps.
json view(const ControlPlane& p) {
  json replicas = p.listReplicas()["replicas"];
  json deployments = json::array();
  const json listed = p.listDeployments();  // kept: the loop reads into it
  for (const json& d : listed["deployments"]) {
    deployments.push_back({{"name", d["name"]},
                           {"model", d["model"]},
                           {"minReplicas", d["minReplicas"]},
                           {"maxReplicas", d["maxReplicas"]}});
  }
  json nodes = json::array();
  const json nodeList = p.listNodes();
  for (const json& n : nodeList["nodes"]) {
    json copy = n;
    copy.erase("devicePool");
    nodes.push_back(std::move(copy));
  }
  return sorted({{"nodes", std::move(nodes)},
                 {"models", p.listModels()},
                 {"replicas", std::move(replicas)},
                 {"deployments", std::move(deployments)}});
}

class DispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = store::Store::open(dir_.file("state.db"));
    ASSERT_TRUE(opened) << opened.error().message;
    store_ = std::make_unique<LatchedStore>(std::move(*opened));
    auto plane = ControlPlane::create(catalog_, clock_, config(), store_.get());
    ASSERT_TRUE(plane) << plane.error().message;
    plane_ = std::move(*plane);
  }
  void TearDown() override {
    if (store_) store_->release();
    if (server_) server_->stop();
  }
  int serve(ServerConfig config = {}) {
    config.port = 0;
    config.threads = 8;
    server_ = std::make_unique<HttpServer>(*plane_, std::move(config));
    auto port = server_->start();
    EXPECT_TRUE(port) << port.error().message;
    return port ? *port : 0;
  }
  // A cordon of node gpu-a whose commit the store holds: posted from a thread of its own after
  // holdNext(); the caller joins it (JoinOnExit) and waits until the store holds it.
  std::thread cordonHeldInTheStore(int port, int& status) {
    store_->holdNext();
    return std::thread([port, &status] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(30);
      auto r = c.Post("/api/v1/nodes/gpu-a/cordon");
      status = r ? r->status : -1;
    });
  }
  // Event times from a calendar that stands still, so that stored placement times convert
  // back exactly.
  static ControlPlaneConfig config() {
    ControlPlaneConfig c;
    c.eventClockMs = [] { return Millis{1'700'000'000'000}; };
    return c;
  }
  // A plane rebuilt from what the store holds (a restart).
  std::unique_ptr<ControlPlane> restart() {
    auto fresh = ControlPlane::create(catalog_, clock_, config(), store_.get());
    EXPECT_TRUE(fresh) << fresh.error().message;
    return fresh ? std::move(*fresh) : nullptr;
  }

  store::testing::TempDir dir_;
  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{0};
  std::unique_ptr<LatchedStore> store_;
  std::unique_ptr<ControlPlane> plane_;
  std::unique_ptr<HttpServer> server_;
};

// While a cordon's commit is held in the store, reads are answered, and they already see the
// node cordoned (assumed); the writer then finishes. With one lock across the store I/O, the
// reads would wait for the commit and time out here.
TEST_F(DispatcherTest, ReadsAreAnsweredWhileAWritersCommitIsHeld) {
  const int port = serve();
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5);
  auto reg = client.Post("/api/v1/nodes", nodeBody("gpu-a", 2).dump(), "application/json");
  ASSERT_TRUE(reg && reg->status == 201) << (reg ? reg->body : "no answer");

  int cordonStatus = 0;
  std::thread writer = cordonHeldInTheStore(port, cordonStatus);
  JoinOnExit joinWriter{writer, [&] { store_->release(); }};
  ASSERT_TRUE(store_->waitUntilHeld()) << "the cordon never reached the store";

  const auto start = std::chrono::steady_clock::now();
  auto nodes = client.Get("/api/v1/nodes");
  ASSERT_TRUE(nodes) << "GET /api/v1/nodes did not answer while a commit was held";
  EXPECT_EQ(nodes->status, 200);
  EXPECT_EQ(json::parse(nodes->body)["nodes"][0]["cordoned"], true)
      << "not assumed: " << nodes->body;
  const json pod = {
      {"metadata", {{"name", "p"}, {"namespace", "ns"}, {"uid", "u-1"}}},
      {"spec",
       {{"containers",
         {{{"name", "c"}, {"resources", {{"limits", {{"tessera.io/gpu-memory", "20480"}}}}}}}}}}};
  auto filter = client.Post(
      "/scheduler/filter", json{{"Pod", pod}, {"NodeNames", {"gpu-a"}}}.dump(), "application/json");
  ASSERT_TRUE(filter) << "/scheduler/filter did not answer while a commit was held";
  EXPECT_EQ(filter->status, 200) << filter->body;
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics) << "/metrics did not answer while a commit was held";
  EXPECT_EQ(metrics->status, 200);
  EXPECT_TRUE(store_->held()) << "the commit was let go before the reads were answered";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);

  store_->release();
  writer.join();
  EXPECT_EQ(cordonStatus, 200);
  EXPECT_EQ(store_->documents()["node/gpu-a"]["cordoned"], true);
}

// Bodies are decoded into typed requests before the dispatcher takes its writer lock: while a
// writer's commit is held in the store (the writer lock taken), a malformed body to every route
// that takes one is answered at once, with the error the API has always given (a 404 first
// when what the path names does not exist, as before: a read). Decoded after the lock, each
// would wait for the held commit and time out here.
TEST_F(DispatcherTest, AMalformedBodyIsAnsweredWithoutWaitingForTheWriterLock) {
  const int port = serve();
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5);
  ASSERT_EQ(client.Post("/api/v1/nodes", nodeBody("gpu-a", 1).dump(), "application/json")->status,
            201);
  int cordonStatus = 0;
  std::thread writer = cordonHeldInTheStore(port, cordonStatus);
  JoinOnExit joinWriter{writer, [&] { store_->release(); }};
  ASSERT_TRUE(store_->waitUntilHeld()) << "the cordon never reached the store";

  struct Case {
    std::string path;
    json body;
    int status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"/api/v1/nodes",
       {{"name", "gpu-b"}, {"gpus", {{{"type", "A100-80GB"}}, {{"type", "B9000"}}}}},
       400,
       "gpus[1].type: "},
      {"/api/v1/nodes", json::array(), 400, "body: expected a node object"},
      {"/api/v1/nodes/gpu-a/heartbeat",
       {{"gpus", {{{"id", "0"}, {"utilization", 2}}}}},
       400,
       "gpus[0].utilization: expected a number from 0 to 1"},
      {"/api/v1/nodes/gpu-z/heartbeat", {{"nope", 1}}, 404, "node gpu-z is not registered"},
      {"/api/v1/nodes/gpu-a/allocations", {{"replica", 5}}, 400, "replica: required text"},
      {"/api/v1/models", {{"name", "m"}, {"weightsMib", -1}}, 400, "weightsMib: "},
      {"/api/v1/replicas", {{"replicaId", "r-0"}}, 400, "model: required"},
      {"/api/v1/explain", {{"replicaId", "r-0"}, {"model", 7.5}, {"count", 2}}, 400, "count: "},
      {"/api/v1/deployments", {{"name", "chat"}}, 400, "model: required text"},
      {"/api/v1/deployments",
       {{"name", "chat"}, {"model", "m"}, {"autoscaling", {{"recommender", "nope"}}}},
       400,
       "autoscaling: "},
      {"/api/v1/replicas/r-9/signals", {{"waiting", -1}}, 404, "replica r-9 is not placed"},
      {"/api/v1/deployments/chat/signals", {{"late", 1}}, 404, "deployment chat does not exist"},
  };
  const auto start = std::chrono::steady_clock::now();
  for (const Case& c : cases) {
    auto r = client.Post(c.path, c.body.dump(), "application/json");
    ASSERT_TRUE(r) << c.path << " " << c.body.dump() << ": no answer while a write was held";
    EXPECT_EQ(r->status, c.status) << c.path << ": " << r->body;
    const std::string message = json::parse(r->body)["error"].value("message", "");
    EXPECT_TRUE(message.starts_with(c.message)) << c.path << ": " << message;
  }
  EXPECT_TRUE(store_->held()) << "the commit was let go before the bodies were answered";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);

  store_->release();
  writer.join();
  EXPECT_EQ(cordonStatus, 200);
  // Nothing the malformed bodies said reached the books or the store.
  EXPECT_EQ(client.Get("/api/v1/nodes/gpu-b")->status, 404);
  EXPECT_EQ(client.Get("/api/v1/models")->body, R"({"models":[]})");
  EXPECT_EQ(view(*plane_), view(*restart()));
}

// A commit the store refuses is forgotten before the writer returns, and the next writer (held
// behind it on the writer lock, never in between) works on the state as it was.
TEST_F(DispatcherTest, ARefusedPersistIsForgottenBeforeTheNextWriterApplies) {
  const int port = serve();
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(10);
  ASSERT_EQ(client.Post("/api/v1/nodes", nodeBody("gpu-a", 1).dump(), "application/json")->status,
            201);
  store_->refuse([](const store::WriteSet& b) { return touches(b, "node", "gpu-a"); });
  int cordonStatus = 0;
  std::thread cordon = cordonHeldInTheStore(port, cordonStatus);
  JoinOnExit joinCordon{cordon, [&] { store_->release(); }};
  ASSERT_TRUE(store_->waitUntilHeld());
  // A second writer arrives while the first one's persist is in flight: it waits.
  json model;
  std::thread second([&] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30);
    auto r = c.Post("/api/v1/models", json{{"name", "m"}, {"weights", "16Gi"}}.dump(),
                    "application/json");
    if (r && r->status == 200) model = json::parse(r->body);
  });
  JoinOnExit joinSecond{second, [&] { store_->release(); }};
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(model.is_null()) << "a second writer ran while the first one's persist was open";
  store_->release();
  cordon.join();
  second.join();
  EXPECT_EQ(cordonStatus, 500);
  EXPECT_EQ(model.value("name", ""), "m");
  auto node = client.Get("/api/v1/nodes/gpu-a");
  ASSERT_TRUE(node);
  EXPECT_EQ(json::parse(node->body)["cordoned"], false) << node->body;
  EXPECT_EQ(store_->documents()["node/gpu-a"]["cordoned"], false);
  EXPECT_EQ(view(*plane_), view(*restart()));
}

// For each kind of mutating operation: the store refuses its commit, and memory and the store
// are exactly as before (nothing half-applied), and a restart rebuilds the same state.
TEST_F(DispatcherTest, ARefusedCommitLeavesMemoryAndStoreAsTheyWere) {
  ASSERT_TRUE(json_api::registerNode(*plane_, nodeBody("gpu-a", 2)));
  ASSERT_TRUE(json_api::registerNode(*plane_, nodeBody("gpu-b", 2)));
  ASSERT_TRUE(json_api::putModel(*plane_, {{"name", "llama-8b"}, {"weights", "16Gi"}}));
  ASSERT_TRUE(json_api::putModel(*plane_, {{"name", "spare"}, {"weights", "8Gi"}}));
  ASSERT_TRUE(json_api::placeReplicas(*plane_, {{"replicaId", "r-0"}, {"model", "llama-8b"}}));
  ASSERT_TRUE(json_api::placeReplicas(*plane_, {{"replicaId", "r-1"}, {"model", "llama-8b"}}));
  ASSERT_TRUE(json_api::putDeployment(*plane_, {{"name", "chat"},
                                                {"model", "llama-8b"},
                                                {"minReplicas", 1},
                                                {"maxReplicas", 3},
                                                {"autoscaling", {{"recommender", "hpa"}}}}));
  std::string nodeOfR0 = (*plane_->getReplica("r-0"))["node"];

  struct Op {
    std::string name;
    std::function<bool(ControlPlane&)> run;  // true when it succeeded
    std::string refusedEvent;                // the event it records when the store takes it
  };
  const std::vector<Op> ops = {
      {"cordon", [](ControlPlane& p) { return p.setCordoned("gpu-a", true).has_value(); },
       "NodeCordoned"},
      {"drain", [&](ControlPlane& p) { return p.drainNode(nodeOfR0).has_value(); }, "NodeDraining"},
      {"remove node (force)",
       [&](ControlPlane& p) { return p.removeNode(nodeOfR0, true).has_value(); }, "NodeRemoved"},
      {"register node",
       [](ControlPlane& p) { return json_api::registerNode(p, nodeBody("gpu-c", 1)).has_value(); },
       "NodeRegistered"},
      {"update model",
       [](ControlPlane& p) {
         return json_api::putModel(p, {{"name", "llama-8b"}, {"weights", "20Gi"}}).has_value();
       },
       "ModelUpdated"},
      {"new model",
       [](ControlPlane& p) {
         return json_api::putModel(p, {{"name", "new"}, {"weights", "4Gi"}}).has_value();
       },
       "ModelRegistered"},
      {"delete model", [](ControlPlane& p) { return p.deleteModel("spare").has_value(); },
       "ModelDeleted"},
      {"place",
       [](ControlPlane& p) {
         return json_api::placeReplicas(p, {{"replicaId", "r-9"}, {"model", "llama-8b"}})
             .has_value();
       },
       "ReplicaPlaced"},
      {"loaded", [](ControlPlane& p) { return p.replicaLoaded("r-0").has_value(); },
       "ReplicaLoaded"},
      {"remove replica", [](ControlPlane& p) { return p.removeReplica("r-1").has_value(); },
       "ReplicaRemoved"},
      {"new deployment",
       [](ControlPlane& p) {
         return json_api::putDeployment(p,
                                        {{"name", "other"}, {"model", "spare"}, {"minReplicas", 0}})
             .has_value();
       },
       "DeploymentCreated"},
      {"update deployment",
       [](ControlPlane& p) {
         return json_api::putDeployment(p, {{"name", "chat"},
                                            {"model", "llama-8b"},
                                            {"minReplicas", 1},
                                            {"maxReplicas", 5},
                                            {"autoscaling", {{"recommender", "hpa"}}}})
             .has_value();
       },
       "DeploymentUpdated"},
      {"delete deployment", [](ControlPlane& p) { return p.deleteDeployment("chat").has_value(); },
       "DeploymentDeleted"},
  };
  for (const Op& op : ops) {
    SCOPED_TRACE(op.name + " (" + op.refusedEvent + ")");
    const json memory = view(*plane_);
    const json stored = store_->documents();
    const json before = plane_->listDeployments()["deployments"];
    const json events = plane_->events(0, 10'000);
    store_->refuse([](const store::WriteSet&) { return true; });
    EXPECT_FALSE(op.run(*plane_)) << "the store refused, yet the operation succeeded";
    store_->refuse(nullptr);
    // A refused commit records no event.
    EXPECT_EQ(plane_->events(0, 10'000), events);
    EXPECT_EQ(view(*plane_), memory);
    EXPECT_EQ(plane_->listDeployments()["deployments"], before);  // nothing draining either
    EXPECT_EQ(store_->documents(), stored);
    EXPECT_TRUE(plane_->state().checkInvariants())
        << plane_->state().checkInvariants().error().message;
    EXPECT_EQ(view(*restart()), memory);
  }
  // And the books still work: the same operations now succeed.
  EXPECT_TRUE(plane_->setCordoned("gpu-a", true));
  EXPECT_TRUE(plane_->removeNode(nodeOfR0, true));
  EXPECT_EQ(view(*restart()), view(*plane_));
}

// Writers on several threads (some of whose commits the store refuses) and readers at once:
// the store ends equal to what a restart rebuilds, and the books stay consistent.
TEST_F(DispatcherTest, ConcurrentWritersLeaveTheStoreAsARestartRebuildsIt) {
  // TESSERA_TEST_SEED=<n> replays a run.
  const char* fixed = std::getenv("TESSERA_TEST_SEED");
  const std::uint32_t seed =
      fixed != nullptr
          ? static_cast<std::uint32_t>(std::strtoul(fixed, nullptr, 10))
          : static_cast<std::uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::printf("DispatcherTest.ConcurrentWriters seed %u\n", seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int port = serve();
  {
    httplib::Client c("127.0.0.1", port);
    for (int i = 0; i < 4; ++i) {
      ASSERT_EQ(c.Post("/api/v1/nodes", nodeBody("gpu-" + std::to_string(i), 2).dump(),
                       "application/json")
                    ->status,
                201);
    }
  }
  store_->flaky(15, seed);
  constexpr int kWriters = 4, kOps = 60;
  std::atomic<int> answered{0}, failedRequests{0};
  std::atomic<bool> done{false};
  auto writer = [&](int w) {
    std::mt19937 rng(seed + static_cast<std::uint32_t>(w));
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30);
    auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
    for (int i = 0; i < kOps; ++i) {
      const std::string node = "gpu-" + std::to_string(pick(5));  // gpu-4 never exists
      const std::string model = "m" + std::to_string(pick(3));
      const std::string replica = "r" + std::to_string(pick(12));
      std::optional<httplib::Result> r;
      switch (pick(11)) {
        case 0:
          r = c.Post("/api/v1/nodes/" + node + "/cordon");
          break;
        case 1:
          r = c.Post("/api/v1/nodes/" + node + "/uncordon");
          break;
        case 2:
          r = c.Post("/api/v1/models",
                     json{{"name", model}, {"weights", std::to_string(4 + pick(20)) + "Gi"}}.dump(),
                     "application/json");
          break;
        case 3:
          r = c.Delete("/api/v1/models/" + model);
          break;
        case 4:
        case 5:
          r = c.Post("/api/v1/replicas", json{{"replicaId", replica}, {"model", model}}.dump(),
                     "application/json");
          break;
        case 6:
          r = c.Delete("/api/v1/replicas/" + replica);
          break;
        case 7:
          r = c.Post("/api/v1/replicas/" + replica + "/loaded");
          break;
        case 8:
          r = c.Post("/api/v1/nodes/" + node + "/drain");
          break;
        case 9:
          r = pick(2) == 0
                  ? c.Delete("/api/v1/nodes/" + node + "?force=true")
                  : c.Post("/api/v1/nodes", nodeBody(node, 1 + pick(2)).dump(), "application/json");
          break;
        default:
          r = pick(2) == 0 ? c.Post("/api/v1/deployments",
                                    json{{"name", "d" + std::to_string(pick(2))},
                                         {"model", model},
                                         {"minReplicas", pick(3)},
                                         {"maxReplicas", 4}}
                                        .dump(),
                                    "application/json")
                           : c.Delete("/api/v1/deployments/d" + std::to_string(pick(2)));
          break;
      }
      if (!r || !*r) {
        ++failedRequests;
      } else {
        ++answered;
      }
    }
  };
  std::thread reader([&] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30);
    while (!done) {
      auto r = c.Get("/api/v1/replicas");
      if (!r || r->status != 200) ++failedRequests;
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) writers.emplace_back(writer, w);
  for (auto& t : writers) t.join();
  done = true;
  reader.join();
  server_->stop();
  EXPECT_EQ(failedRequests.load(), 0);
  EXPECT_EQ(answered.load(), kWriters * kOps);
  EXPECT_GT(store_->refused(), 0) << "the store refused nothing: forget was not exercised";
  store_->flaky(0, seed);
  EXPECT_TRUE(plane_->state().checkInvariants())
      << plane_->state().checkInvariants().error().message;
  EXPECT_EQ(view(*restart()), view(*plane_));
}

// The leadership gate is the dispatcher's: on a standby no mutating call runs, neither an HTTP
// one nor the server's own (withPlane); reads are served.
TEST_F(DispatcherTest, TheLeadershipGateStopsEveryMutatingCall) {
  std::atomic<bool> leading{true};
  ServerConfig config;
  config.leader = [&] { return leading.load(); };
  config.leaderName = [] { return std::string("replica-b"); };
  const int port = serve(config);
  httplib::Client client("127.0.0.1", port);
  ASSERT_EQ(client.Post("/api/v1/nodes", nodeBody("gpu-a", 1).dump(), "application/json")->status,
            201);
  leading = false;
  auto refused = client.Post("/api/v1/nodes/gpu-a/cordon");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_NE(refused->body.find("replica-b"), std::string::npos) << refused->body;
  bool ran = false;
  EXPECT_FALSE(server_->withPlane([&](ControlPlane&) { ran = true; }));
  EXPECT_FALSE(ran);
  auto write =
      server_->dispatcher().write([](ControlPlane& p) { return p.setCordoned("gpu-a", true); });
  ASSERT_FALSE(write);
  EXPECT_NE(write.error().message.find("standby"), std::string::npos);
  auto nodes = client.Get("/api/v1/nodes");
  ASSERT_TRUE(nodes);
  EXPECT_EQ(nodes->status, 200);
  EXPECT_EQ(json::parse(nodes->body)["nodes"][0]["cordoned"], false);
  EXPECT_EQ(store_->documents()["node/gpu-a"]["cordoned"], false);
  leading = true;
  EXPECT_TRUE(server_->withPlane([&](ControlPlane&) { ran = true; }));
  EXPECT_TRUE(ran);
}

// bind's Binding POST runs outside both locks: a heartbeat and a cordon (a writer with store
// I/O) are answered while a Binding is held in flight.
TEST_F(DispatcherTest, ABindingInFlightHoldsUpNoWriter) {
  std::mutex m;
  std::condition_variable cv;
  bool posting = false, let = false;
  plane_->setBinder([&](const std::string&, const std::string&, const std::string&,
                        const std::string&) -> Result<void> {
    std::unique_lock l(m);
    posting = true;
    cv.notify_all();
    cv.wait_for(l, 30s, [&] { return let; });
    return {};
  });
  const int port = serve();
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5);
  ASSERT_EQ(client.Post("/api/v1/nodes", nodeBody("gpu-a", 2).dump(), "application/json")->status,
            201);
  ASSERT_EQ(client.Post("/api/v1/nodes", nodeBody("gpu-b", 2).dump(), "application/json")->status,
            201);
  const json pod = {
      {"metadata", {{"name", "p"}, {"namespace", "ns"}, {"uid", "u-1"}}},
      {"spec",
       {{"containers",
         {{{"name", "c"}, {"resources", {{"limits", {{"tessera.io/gpu-memory", "20480"}}}}}}}}}}};
  ASSERT_EQ(client
                .Post("/scheduler/filter", json{{"Pod", pod}, {"NodeNames", {"gpu-a"}}}.dump(),
                      "application/json")
                ->status,
            200);
  std::string answer;
  std::thread binding([&] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30);
    auto r = c.Post(
        "/scheduler/bind",
        json{{"PodName", "p"}, {"PodNamespace", "ns"}, {"PodUID", "u-1"}, {"Node", "gpu-a"}}.dump(),
        "application/json");
    if (r && r->status == 200) answer = r->body;
  });
  JoinOnExit joinBinding{binding, [&] {
                           std::lock_guard l(m);
                           let = true;
                           cv.notify_all();
                         }};
  {
    std::unique_lock l(m);
    ASSERT_TRUE(cv.wait_for(l, 10s, [&] { return posting; }));
  }
  auto heartbeat = client.Post("/api/v1/nodes/gpu-a/heartbeat", json{{"healthy", true}}.dump(),
                               "application/json");
  EXPECT_TRUE(heartbeat && heartbeat->status == 200);
  auto cordon = client.Post("/api/v1/nodes/gpu-b/cordon");
  EXPECT_TRUE(cordon && cordon->status == 200);
  {
    std::lock_guard l(m);
    let = true;
    cv.notify_all();
  }
  binding.join();
  ASSERT_FALSE(answer.empty());
  EXPECT_EQ(json::parse(answer)["Error"], "") << answer;
  EXPECT_TRUE(plane_->getReplica("ns/p"));
  EXPECT_EQ(view(*restart()), view(*plane_));
}

}  // namespace
}  // namespace tessera::api
