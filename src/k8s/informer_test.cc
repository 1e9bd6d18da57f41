// The informer against the test API server (src/k8s/testing): list then watch, events in
// order, re-watch after the server ends a watch, relist after 410, bookmarks, backoff.
#include "k8s/informer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/testing/eventually.h"
#include "k8s/testing/fake_apiserver.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;
using testing::FakeApiServer;

json informerPod(const std::string& name, const std::string& app = "a") {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", {{"app", app}}}}},
          {"spec", {{"containers", json::array({{{"name", "c"}, {"image", "x"}}})}}}};
}

struct Recorder {
  std::mutex mu;
  std::vector<std::string> events;
  Informer::Handler handler() {
    return [this](Informer::Change c, const json& obj, const json* old) {
      const char* kind = c == Informer::Change::kAdded      ? "ADDED"
                         : c == Informer::Change::kModified ? "MODIFIED"
                                                            : "DELETED";
      std::lock_guard lock(mu);
      events.push_back(std::string(kind) + " " + objectKey(obj) + (old != nullptr ? " old" : ""));
    };
  }
  std::vector<std::string> snapshot() {
    std::lock_guard lock(mu);
    return events;
  }
};

class InformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server.start());
    KubeConfig config;
    config.server = server.url();
    auto made = KubeClient::create(config);
    ASSERT_TRUE(made) << made.error().message;
    client = std::move(*made);
  }
  InformerOptions options(const std::string& path = "/api/v1/pods") {
    InformerOptions o;
    o.path = path;
    o.pageSize = 2;
    o.backoffInitialMs = 10;
    o.backoffMaxMs = 100;
    o.jitterSeed = 7;
    return o;
  }
  FakeApiServer server;
  std::unique_ptr<KubeClient> client;
  Recorder rec;
};

TEST(WatchEventTest, ParsesEveryTypeAndRefusesJunk) {
  auto e = parseWatchEvent(R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}})");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, WatchEventType::kBookmark);
  EXPECT_EQ(resourceVersionOf(e->object), "9");
  EXPECT_EQ(parseWatchEvent(R"({"type":"ERROR","object":{"code":410}})")->type,
            WatchEventType::kError);
  EXPECT_FALSE(parseWatchEvent(R"({"type":"SOMETHING","object":{}})"));
  EXPECT_FALSE(parseWatchEvent(R"({"type":"ADDED"})"));
  EXPECT_FALSE(parseWatchEvent("not json"));
}

TEST_F(InformerTest, ListsInPagesThenWatchesEventsInOrder) {
  for (const char* n : {"p1", "p2", "p3"}) ASSERT_TRUE(server.create("pods", informerPod(n)));
  Informer informer(*client, options(), rec.handler());
  informer.start();
  ASSERT_TRUE(eventually([&] { return informer.hasSynced(); }));
  EXPECT_EQ(rec.snapshot(),
            (std::vector<std::string>{"ADDED ml/p1", "ADDED ml/p2", "ADDED ml/p3"}));
  EXPECT_EQ(informer.list().size(), 3u);
  EXPECT_EQ(server.lists("pods"), 1);  // one LIST, two pages

  ASSERT_TRUE(eventually([&] { return server.openWatches() == 1; }));
  ASSERT_TRUE(server.create("pods", informerPod("p4")));
  json p1 = *server.get("pods", "ml", "p1");
  p1["metadata"]["labels"]["tier"] = "gold";
  ASSERT_TRUE(server.update("pods", p1));
  ASSERT_TRUE(server.remove("pods", "ml", "p2"));
  ASSERT_TRUE(eventually([&] { return rec.snapshot().size() == 6; }));
  EXPECT_EQ(rec.snapshot(),
            (std::vector<std::string>{"ADDED ml/p1", "ADDED ml/p2", "ADDED ml/p3", "ADDED ml/p4",
                                      "MODIFIED ml/p1 old", "DELETED ml/p2 old"}));
  EXPECT_EQ(informer.get("ml/p1")->at("metadata").at("labels").at("tier"), "gold");
  EXPECT_FALSE(informer.get("ml/p2"));
  EXPECT_EQ(informer.resourceVersion(), std::to_string(server.resourceVersion()));
  EXPECT_EQ(informer.stats().relists, 0);
}

TEST_F(InformerTest, WatchesAgainFromTheLastResourceVersionWhenTheServerEndsTheWatch) {
  ASSERT_TRUE(server.create("pods", informerPod("p1")));
  Informer informer(*client, options(), rec.handler());
  informer.start();
  ASSERT_TRUE(eventually([&] { return server.openWatches() == 1; }));
  for (int round = 0; round < 3; ++round) {
    server.closeWatches();
    ASSERT_TRUE(server.create("pods", informerPod("q" + std::to_string(round))));
    ASSERT_TRUE(
        eventually([&] { return informer.get("ml/q" + std::to_string(round)).has_value(); }));
  }
  EXPECT_GE(server.watches("pods"), 2);
  EXPECT_EQ(server.lists("pods"), 1);  // never relisted
  EXPECT_EQ(informer.stats().lists, 1);
  // Every object was reported once: nothing was replayed.
  EXPECT_EQ(rec.snapshot(),
            (std::vector<std::string>{"ADDED ml/p1", "ADDED ml/q0", "ADDED ml/q1", "ADDED ml/q2"}));
}

TEST_F(InformerTest, RelistsWhenTheResourceVersionIsGone) {
  for (const char* n : {"p1", "p2"}) ASSERT_TRUE(server.create("pods", informerPod(n)));
  Informer informer(*client, options(), rec.handler());
  informer.start();
  ASSERT_TRUE(eventually([&] { return server.openWatches() == 1; }));
  // Cut off, the informer misses a create and a delete, and the server forgets them.
  server.pauseWatches();
  ASSERT_TRUE(eventually([&] { return server.openWatches() == 0; }));
  ASSERT_TRUE(server.create("pods", informerPod("p3")));
  ASSERT_TRUE(server.remove("pods", "ml", "p1"));
  server.compact();
  server.resumeWatches();
  ASSERT_TRUE(
      eventually([&] { return informer.stats().relists == 1 && informer.stats().lists == 2; }));
  ASSERT_TRUE(eventually([&] { return informer.list().size() == 2; }));
  EXPECT_TRUE(informer.get("ml/p3"));
  EXPECT_FALSE(informer.get("ml/p1"));
  EXPECT_EQ(server.lists("pods"), 2);
  // The relist reported the difference (the handler hears of it after the copy is replaced).
  ASSERT_TRUE(eventually([&] { return rec.snapshot().size() >= 4; }));
  const auto events = rec.snapshot();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[2], "DELETED ml/p1 old");
  EXPECT_EQ(events[3], "ADDED ml/p3");
  // And it watches on from the new list.
  ASSERT_TRUE(server.create("pods", informerPod("p4")));
  ASSERT_TRUE(eventually([&] { return informer.get("ml/p4").has_value(); }));
}

// A collection that stops answering is reported once, however often the informer retries, and
// again when it answers: what `tessera serve` logs for an unreachable Kubernetes API.
TEST_F(InformerTest, TellsOnceWhenTheServerStopsAnsweringAndOnceWhenItAnswersAgain) {
  ASSERT_TRUE(server.create("pods", informerPod("p1")));
  std::mutex mu;
  std::vector<std::pair<bool, std::string>> told;
  InformerOptions o = options();
  o.onHealth = [&](bool answering, const std::string& what) {
    std::lock_guard lock(mu);
    told.emplace_back(answering, what);
  };
  auto heard = [&] {
    std::lock_guard lock(mu);
    return told;
  };
  Informer informer(*client, o, rec.handler());
  informer.start();
  ASSERT_TRUE(eventually([&] { return server.openWatches() == 1; }));
  EXPECT_TRUE(heard().empty());  // it answered from the start: nothing to tell

  const std::string url = server.url();
  const int port = std::atoi(url.substr(url.rfind(':') + 1).c_str());
  server.stop();
  ASSERT_TRUE(eventually([&] { return informer.stats().failures >= 4; }));
  ASSERT_EQ(heard().size(), 1u);
  EXPECT_FALSE(heard()[0].first);
  EXPECT_NE(heard()[0].second.find("/api/v1/pods"), std::string::npos) << heard()[0].second;

  ASSERT_TRUE(server.start(port));
  // A watch resumed from its resourceVersion says nothing until something happens.
  ASSERT_TRUE(server.create("pods", informerPod("p2")));
  ASSERT_TRUE(eventually([&] { return heard().size() == 2; }));
  EXPECT_TRUE(heard()[1].first);
  EXPECT_NE(heard()[1].second.find("answers again after"), std::string::npos) << heard()[1].second;
  EXPECT_TRUE(eventually([&] { return informer.get("ml/p2").has_value(); }));
  EXPECT_EQ(heard().size(), 2u);
}

TEST_F(InformerTest, BookmarksMoveTheResourceVersionWithoutEvents) {
  InformerOptions o = options();
  o.labelSelector = "app=a";
  Informer informer(*client, o, rec.handler());
  informer.start();
  ASSERT_TRUE(eventually([&] { return server.openWatches() == 1; }));
  const std::string before = informer.resourceVersion();
  // Changes the selector filters out move the server's resourceVersion only.
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(server.create("pods", informerPod("b" + std::to_string(i), "b")));
  EXPECT_EQ(informer.resourceVersion(), before);
  server.sendBookmarks();
  ASSERT_TRUE(eventually([&] { return informer.stats().bookmarks == 1; }));
  EXPECT_EQ(informer.resourceVersion(), std::to_string(server.resourceVersion()));
  EXPECT_TRUE(rec.snapshot().empty());
  EXPECT_TRUE(informer.list().empty());
  // After compaction a watch from the bookmark's resourceVersion still works: no relist.
  server.compact();
  server.closeWatches();
  ASSERT_TRUE(server.create("pods", informerPod("a1")));
  ASSERT_TRUE(eventually([&] { return informer.get("ml/a1").has_value(); }));
  EXPECT_EQ(informer.stats().relists, 0);
  EXPECT_EQ(server.lists("pods"), 1);
}

TEST_F(InformerTest, BacksOffWhileTheServerIsAwayAndStopsPromptly) {
  // A port nothing listens on: the informer keeps failing, waiting longer each time.
  server.stop();
  Informer informer(*client, options(), rec.handler());
  informer.start();
  ASSERT_TRUE(eventually([&] { return informer.stats().failures >= 3; }));
  EXPECT_FALSE(informer.hasSynced());
  informer.stop();  // returns (a hang would time the test out)
  EXPECT_EQ(informer.stats().lists, 0);
}

TEST_F(InformerTest, StopEndsAnOpenWatch) {
  Informer informer(*client, options("/api/v1/nodes"), rec.handler());
  informer.start();
  ASSERT_TRUE(eventually([&] { return server.openWatches() == 1; }));
  // The watch would last 300 s: stop() returning at all shows that it cut the stream.
  const auto began = std::chrono::steady_clock::now();
  informer.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(250));
  const int watches = server.watches("nodes");
  ASSERT_TRUE(server.create("nodes", {{"metadata", {{"name", "late"}}}}));
  EXPECT_FALSE(informer.get("late"));
  EXPECT_EQ(server.watches("nodes"), watches);  // and it did not watch again
}

TEST_F(InformerTest, CollectionPathsAndSelectorsReachTheServer) {
  ASSERT_TRUE(server.create("modeldeployments", {{"metadata", {{"name", "m"}, {"namespace", "ml"}}},
                                                 {"spec", {{"model", "x"}}}}));
  ASSERT_TRUE(server.create("nodes", {{"metadata", {{"name", "n1"}}}}));
  Informer mds(*client, options("/apis/tessera.io/v1alpha1/modeldeployments"), rec.handler());
  Informer nodes(*client, options("/api/v1/nodes"), rec.handler());
  mds.start();
  nodes.start();
  ASSERT_TRUE(eventually([&] { return mds.hasSynced() && nodes.hasSynced(); }));
  EXPECT_TRUE(mds.get("ml/m"));
  EXPECT_TRUE(nodes.get("n1"));
  EXPECT_EQ(mds.get("ml/m")->at("kind"), "ModelDeployment");
}

}  // namespace
}  // namespace tessera::k8s
