// The leader's pod label, through a real KubeClient against the test API server: merge
// patches of metadata.labels (what kube-apiserver answers to them, 409 on a stale
// resourceVersion, 415 on another patch type), the demotion of a stale leader, and the
// downward-API variables read with clear errors.
#include "k8s/pod_role.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include "k8s/kube_client.h"
#include "k8s/testing/fake_apiserver.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;

json rolePod(const std::string& name, const std::string& role) {
  json p = {{"metadata",
             {{"name", name},
              {"namespace", "tessera-system"},
              {"labels", {{"app.kubernetes.io/name", "tessera"}}}}},
            {"spec", {{"nodeName", "n1"}}}};
  if (!role.empty()) p["metadata"]["labels"]["tessera.io/role"] = role;
  return p;
}

std::string roleOf(testing::FakeApiServer& api, const std::string& name) {
  auto p = api.get("pods", "tessera-system", name);
  if (!p) return "(gone)";
  return p->value("/metadata/labels"_json_pointer, json::object()).value("tessera.io/role", "");
}

class PodRoleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api.start());
    KubeConfig c;
    c.server = api.url();
    auto made = KubeClient::create(c);
    ASSERT_TRUE(made) << made.error().message;
    client = std::move(*made);
  }
  testing::FakeApiServer api;
  std::unique_ptr<KubeClient> client;
};

TEST_F(PodRoleTest, LabelsOnlyTheRoleAndDemotesAStaleLeader) {
  ASSERT_TRUE(api.create("pods", rolePod("cp-a", "")));
  ASSERT_TRUE(api.create("pods", rolePod("cp-b", "leader")));  // killed before it stepped down
  ASSERT_TRUE(api.create("pods", rolePod("cp-c", "standby")));
  const std::string rvBefore =
      (*api.get("pods", "tessera-system", "cp-a"))["metadata"]["resourceVersion"];

  const PodRef a{"tessera-system", "cp-a"};
  auto demoted = demoteOtherLeaders(*client, a);
  ASSERT_TRUE(demoted) << demoted.error().message;
  EXPECT_EQ(*demoted, 1);
  ASSERT_TRUE(setPodRole(*client, a, kRoleLeader));
  EXPECT_EQ(roleOf(api, "cp-a"), "leader");
  EXPECT_EQ(roleOf(api, "cp-b"), "standby");
  EXPECT_EQ(roleOf(api, "cp-c"), "standby");
  // The patch touched the label alone: the other labels and the spec are kept, the version moved.
  const json stored = *api.get("pods", "tessera-system", "cp-a");
  EXPECT_EQ(stored["metadata"]["labels"]["app.kubernetes.io/name"], "tessera");
  EXPECT_EQ(stored["spec"]["nodeName"], "n1");
  EXPECT_NE(stored["metadata"]["resourceVersion"], rvBefore);
  // Demoting again finds only itself.
  demoted = demoteOtherLeaders(*client, a);
  ASSERT_TRUE(demoted);
  EXPECT_EQ(*demoted, 0);

  // A pod that is not there: an error naming it and the answer.
  auto missing = setPodRole(*client, {"tessera-system", "cp-z"}, kRoleLeader);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("tessera-system/cp-z"), std::string::npos);
  EXPECT_NE(missing.error().message.find("404"), std::string::npos) << missing.error().message;
}

TEST_F(PodRoleTest, MergePatchAnswersAsTheApiServerDoes) {
  ASSERT_TRUE(api.create("pods", rolePod("cp-a", "standby")));
  httplib::Client http(api.url());
  const std::string path = "/api/v1/namespaces/tessera-system/pods/cp-a";
  // null removes a key (RFC 7386).
  auto r = http.Patch(path, R"({"metadata":{"labels":{"tessera.io/role":null}}})",
                      "application/merge-patch+json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(roleOf(api, "cp-a"), "");
  // A stale resourceVersion in the patch is a precondition: 409.
  r = http.Patch(path, R"({"metadata":{"resourceVersion":"1","labels":{"x":"y"}}})",
                 "application/merge-patch+json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 409) << r->body;
  // Another patch type: 415; not JSON: 400; no such pod: 404. Nothing changes.
  r = http.Patch(path, R"([{"op":"add","path":"/metadata/labels/x","value":"y"}])",
                 "application/json-patch+json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 415);
  r = http.Patch(path, "{nope", "application/merge-patch+json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  r = http.Patch("/api/v1/namespaces/tessera-system/pods/cp-z", "{}",
                 "application/merge-patch+json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_FALSE((*api.get("pods", "tessera-system", "cp-a"))["metadata"]["labels"].contains("x"));
}

TEST(PodRole, SelfFromTheDownwardApiWithClearErrors) {
  ::unsetenv("POD_NAME");
  ::setenv("POD_NAMESPACE", "tessera-system", 1);
  auto none = selfPodFromEnv();
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("POD_NAME"), std::string::npos);
  EXPECT_NE(none.error().message.find("metadata.name"), std::string::npos);
  ::setenv("POD_NAME", "Bad/Name", 1);
  auto bad = selfPodFromEnv();
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("Bad/Name"), std::string::npos);
  ::setenv("POD_NAME", "tessera-7d9f-abcde", 1);
  auto ok = selfPodFromEnv();
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->ns, "tessera-system");
  EXPECT_EQ(ok->name, "tessera-7d9f-abcde");
  ::unsetenv("POD_NAME");
  ::unsetenv("POD_NAMESPACE");
}

}  // namespace
}  // namespace tessera::k8s
