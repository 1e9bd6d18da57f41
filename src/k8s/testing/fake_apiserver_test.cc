// The test API server over raw HTTP, as kube-apiserver answers: create / conflict / delete
// status codes and Status bodies, resourceVersion preconditions, the status subresource and
// generation, paged lists from a snapshot, and a chunked watch stream.
#include "k8s/testing/fake_apiserver.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <string>

namespace tessera::k8s::testing {
namespace {

using nlohmann::json;

class FakeApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server.start());
    http = std::make_unique<httplib::Client>(server.url());
  }
  json post(const std::string& path, const json& body, int want) {
    auto r = http->Post(path, body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, want) << r->body;
    return json::parse(r->body);
  }
  json put(const std::string& path, const json& body, int want) {
    auto r = http->Put(path, body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, want) << r->body;
    return json::parse(r->body);
  }
  FakeApiServer server;
  std::unique_ptr<httplib::Client> http;
};

constexpr const char* kMds = "/apis/tessera.io/v1alpha1/namespaces/ml/modeldeployments";

TEST_F(FakeApiServerTest, CreateUpdateStatusAndDeleteFollowTheApiServersRules) {
  const json made =
      post(kMds, {{"metadata", {{"name", "chat"}}}, {"spec", {{"version", "v1"}}}}, 201);
  EXPECT_EQ(made["metadata"]["namespace"], "ml");
  EXPECT_EQ(made["metadata"]["generation"], 1);
  EXPECT_FALSE(made["metadata"]["uid"].get<std::string>().empty());
  const json again = post(kMds, {{"metadata", {{"name", "chat"}}}}, 409);
  EXPECT_EQ(again["kind"], "Status");
  EXPECT_EQ(again["reason"], "AlreadyExists");

  // A spec change bumps generation; a status write does not, and keeps the spec.
  json next = made;
  next["spec"]["version"] = "v2";
  const json updated = put(std::string(kMds) + "/chat", next, 200);
  EXPECT_EQ(updated["metadata"]["generation"], 2);
  EXPECT_NE(updated["metadata"]["resourceVersion"], made["metadata"]["resourceVersion"]);
  json withStatus = updated;
  withStatus["status"] = {{"replicas", 3}};
  withStatus["spec"]["version"] = "ignored";
  const json statused = put(std::string(kMds) + "/chat/status", withStatus, 200);
  EXPECT_EQ(statused["status"]["replicas"], 3);
  EXPECT_EQ(statused["spec"]["version"], "v2");
  EXPECT_EQ(statused["metadata"]["generation"], 2);
  // The main resource keeps the status.
  json spec = statused;
  spec.erase("status");
  EXPECT_EQ(put(std::string(kMds) + "/chat", spec, 200)["status"]["replicas"], 3);

  // A write from a stale copy is a 409 Conflict.
  const json stale = put(std::string(kMds) + "/chat/status", withStatus, 409);
  EXPECT_EQ(stale["reason"], "Conflict");
  EXPECT_EQ(stale["code"], 409);
  EXPECT_EQ(server.conflicts(), 1);

  auto gone = http->Delete(std::string(kMds) + "/chat");
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 200);
  auto missing = http->Get(std::string(kMds) + "/chat");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(json::parse(missing->body)["reason"], "NotFound");
}

TEST_F(FakeApiServerTest, ListsPageFromOneSnapshotAndExpireWithCompaction) {
  for (int i = 0; i < 5; ++i) {
    post("/api/v1/namespaces/ml/pods", {{"metadata", {{"name", "p" + std::to_string(i)}}}}, 201);
  }
  auto first = http->Get("/api/v1/pods?limit=2");
  ASSERT_TRUE(first);
  const json page1 = json::parse(first->body);
  EXPECT_EQ(page1["kind"], "PodList");
  ASSERT_EQ(page1["items"].size(), 2u);
  const std::string rv = page1["metadata"]["resourceVersion"];
  const std::string cont = page1["metadata"]["continue"];
  // A change after the first page does not show in the later pages.
  post("/api/v1/namespaces/ml/pods", {{"metadata", {{"name", "p9"}}}}, 201);
  auto second = http->Get("/api/v1/pods?limit=10&continue=" + cont);
  ASSERT_TRUE(second);
  const json page2 = json::parse(second->body);
  EXPECT_EQ(page2["items"].size(), 3u);
  EXPECT_EQ(page2["metadata"]["resourceVersion"], rv);
  EXPECT_FALSE(page2["metadata"].contains("continue"));
  // After compaction the continue token has expired.
  server.compact();
  auto expired = http->Get("/api/v1/pods?limit=2&continue=" + cont);
  ASSERT_TRUE(expired);
  EXPECT_EQ(expired->status, 410);
  EXPECT_EQ(json::parse(expired->body)["reason"], "Expired");
}

TEST_F(FakeApiServerTest, WatchStreamsChunkedEventsFromAResourceVersion) {
  const json a = post("/api/v1/namespaces/ml/pods", {{"metadata", {{"name", "a"}}}}, 201);
  post("/api/v1/namespaces/ml/pods", {{"metadata", {{"name", "b"}}}}, 201);
  std::string body, encoding;
  // From a's resourceVersion: b only; the stream ends after timeoutSeconds.
  auto r = http->Get(
      "/api/v1/pods?watch=1&timeoutSeconds=1&resourceVersion=" +
          a["metadata"]["resourceVersion"].get<std::string>(),
      [&](const httplib::Response& res) {
        encoding = res.get_header_value("Transfer-Encoding");
        return true;
      },
      [&](const char* data, size_t n) {
        body.append(data, n);
        return true;
      });
  ASSERT_TRUE(r);
  EXPECT_EQ(encoding, "chunked");
  const json event = json::parse(body.substr(0, body.find('\n')));
  EXPECT_EQ(event["type"], "ADDED");
  EXPECT_EQ(event["object"]["metadata"]["name"], "b");
  EXPECT_EQ(body.find('\n'), body.size() - 1);  // one event, newline-terminated

  // From before the retained window: one ERROR event with a 410 Status.
  server.compact();
  body.clear();
  r = http->Get("/api/v1/pods?watch=1&timeoutSeconds=1&resourceVersion=1",
                [&](const char* data, size_t n) {
                  body.append(data, n);
                  return true;
                });
  ASSERT_TRUE(r);
  const json error = json::parse(body.substr(0, body.find('\n')));
  EXPECT_EQ(error["type"], "ERROR");
  EXPECT_EQ(error["object"]["code"], 410);
}

}  // namespace
}  // namespace tessera::k8s::testing
