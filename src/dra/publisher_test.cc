// The slice publisher (dra/publisher.h) against the test API server, through the real
// Kubernetes client: the published pool follows the inventory through adds, removals,
// health and MIG changes, keeps its generation rising, survives a concurrent writer and
// leaves other nodes' slices alone.

#include "dra/publisher.h"

#include <gtest/gtest.h>

#include "k8s/dra_claims.h"
#include "k8s/kube_client.h"
#include "k8s/testing/fake_apiserver.h"

namespace tessera::dra {
namespace {

using json = nlohmann::json;

deviceplugin::GpuDevice gpu(int index) {
  deviceplugin::GpuDevice g;
  g.id = std::to_string(index);
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.type = "H100-80GB";
  g.memoryMib = 81920;
  return g;
}

deviceplugin::Inventory gpus(int n) {
  deviceplugin::Inventory inv;
  for (int i = 0; i < n; ++i) inv.gpus.push_back(gpu(i));
  return inv;
}

class SlicePublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.start());
    k8s::KubeConfig kc;
    kc.server = api_.url();
    auto client = k8s::KubeClient::create(kc);
    ASSERT_TRUE(client) << client.error().message;
    client_ = std::move(*client);
    o_.nodeName = "node-a";
    publisher_ = std::make_unique<SlicePublisher>(*client_, o_);
  }

  // The node's slices as stored, by name.
  std::map<std::string, json> stored(const std::string& node = "node-a") const {
    std::map<std::string, json> out;
    for (const json& s : api_.list("resourceslices")) {
      if (s["spec"]["nodeName"] == node) out.emplace(s["metadata"]["name"], s);
    }
    return out;
  }

  // The stored pool holds exactly the inventory's devices, every slice at `generation`.
  void expectPublished(const deviceplugin::Inventory& inv, std::int64_t generation) {
    SliceOptions o = o_;
    o.generation = generation;
    const std::vector<json> wanted = resourceSlices(inv, o);
    const auto have = stored();
    ASSERT_EQ(have.size(), wanted.size());
    for (const json& w : wanted) {
      const auto it = have.find(w["metadata"]["name"]);
      ASSERT_NE(it, have.end()) << w["metadata"]["name"];
      EXPECT_EQ(it->second["spec"], w["spec"]);
    }
  }

  k8s::testing::FakeApiServer api_;
  std::unique_ptr<k8s::KubeClient> client_;
  SliceOptions o_;
  std::unique_ptr<SlicePublisher> publisher_;
};

TEST_F(SlicePublisherTest, ThePoolFollowsTheInventoryAtARisingGeneration) {
  deviceplugin::Inventory inv = gpus(2);
  auto r = publisher_->publish(inv);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->changed);
  EXPECT_EQ(r->generation, 1);
  EXPECT_EQ(r->devices, 2);
  expectPublished(inv, 1);

  // Nothing changed: nothing written.
  const std::int64_t rv = api_.resourceVersion();
  r = publisher_->publish(inv);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->changed);
  EXPECT_EQ(api_.resourceVersion(), rv);

  inv.gpus.push_back(gpu(2));  // added
  ASSERT_TRUE(publisher_->publish(inv));
  expectPublished(inv, 2);
  inv.gpus.erase(inv.gpus.begin());  // removed
  ASSERT_TRUE(publisher_->publish(inv));
  expectPublished(inv, 3);
  inv.gpus[0].healthy = false;  // health
  r = publisher_->publish(inv);
  ASSERT_TRUE(r);
  expectPublished(inv, 4);
  EXPECT_TRUE(stored().begin()->second["spec"]["devices"][0].contains("taints"));
  inv.gpus[1].migEnabled = true;  // MIG mode, two instances
  inv.gpus[1].migDevices = {{"MIG-x", "1g.10gb", 0, {}}, {"MIG-y", "1g.10gb", 1, {}}};
  r = publisher_->publish(inv);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->devices, 3);
  expectPublished(inv, 5);

  // Grown beyond one slice, then shrunk: the extra slice is deleted.
  r = publisher_->publish(gpus(70));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->slices, 2);
  expectPublished(gpus(70), 6);
  ASSERT_TRUE(publisher_->publish(gpus(1)));
  expectPublished(gpus(1), 7);
}

TEST_F(SlicePublisherTest, TheSlicesAreOwnedByTheNode) {
  auto node = api_.create("nodes", {{"metadata", {{"name", "node-a"}}}});
  ASSERT_TRUE(node);
  ASSERT_TRUE(publisher_->publish(gpus(70)));  // two slices
  ASSERT_EQ(stored().size(), 2u);
  for (const auto& [name, s] : stored()) {
    EXPECT_EQ(s["metadata"]["ownerReferences"], json::array({{{"apiVersion", "v1"},
                                                              {"kind", "Node"},
                                                              {"name", "node-a"},
                                                              {"uid", (*node)["metadata"]["uid"]},
                                                              {"controller", true}}}))
        << name;
  }
}

TEST_F(SlicePublisherTest, ARestartedAgentContinuesTheGeneration) {
  ASSERT_TRUE(publisher_->publish(gpus(2)));
  ASSERT_TRUE(publisher_->publish(gpus(3)));
  SlicePublisher again(*client_, o_);  // the agent restarted
  auto r = again.publish(gpus(3));
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->changed);
  EXPECT_EQ(r->generation, 2);
  r = again.publish(gpus(1));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->generation, 3);
}

TEST_F(SlicePublisherTest, AWriteThatLostARaceIsRetriedOnTheFreshObject) {
  ASSERT_TRUE(publisher_->publish(gpus(2)));
  bool raced = false;
  api_.refuseWrites([&](const std::string& resource, const json&) {
    if (resource == "resourceslices" && !raced) {
      raced = true;  // another writer changes the slice between our list and our PUT
      json s = *api_.get("resourceslices", "", "node-a-gpu.tessera.io-0");
      s["metadata"]["labels"] = {{"touched", "yes"}};
      EXPECT_TRUE(api_.update("resourceslices", s));
    }
    return 0;
  });
  const int conflictsBefore = api_.conflicts();
  auto r = publisher_->publish(gpus(3));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(raced);
  EXPECT_EQ(api_.conflicts(), conflictsBefore + 1);
  expectPublished(gpus(3), 2);
}

TEST_F(SlicePublisherTest, ARefusedWriteIsAnErrorAndOtherNodesAreLeftAlone) {
  SliceOptions other = o_;
  other.nodeName = "node-b";
  SlicePublisher b(*client_, other);
  ASSERT_TRUE(b.publish(gpus(4)));
  ASSERT_TRUE(publisher_->publish(gpus(2)));
  api_.refuseWrites([](const std::string& resource, const json&) {
    return resource == "resourceslices" ? 503 : 0;
  });
  auto r = publisher_->publish(gpus(1));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("node-a-gpu.tessera.io-0"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("503"), std::string::npos) << r.error().message;
  expectPublished(gpus(2), 1);  // what was stored is still there
  api_.refuseWrites({});
  ASSERT_TRUE(publisher_->withdraw());
  EXPECT_TRUE(stored().empty());
  EXPECT_EQ(stored("node-b").size(), 1u);
  EXPECT_EQ(stored("node-b").begin()->second["spec"]["devices"].size(), 4u);
}

TEST_F(SlicePublisherTest, TheApiServerHoldsTheDeviceClassClaimsAndSlicesUnderTheirPaths) {
  auto made =
      client_->request("POST", "/apis/resource.k8s.io/v1/deviceclasses", k8s::deviceClass().dump());
  ASSERT_TRUE(made);
  EXPECT_EQ(made->status, 201) << made->body;
  auto got = client_->request("GET", "/apis/resource.k8s.io/v1/deviceclasses/gpu.tessera.io");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(json::parse(got->body)["spec"], k8s::deviceClass()["spec"]);
  // Claims are namespaced (status subresource), slices and classes are not.
  EXPECT_EQ(client_->request("GET", "/apis/resource.k8s.io/v1/namespaces/x/deviceclasses")->status,
            404);
  ASSERT_TRUE(publisher_->publish(gpus(1)));
  EXPECT_EQ(client_->request("GET", "/apis/resource.k8s.io/v1/resourceslices")->status, 200);
  EXPECT_EQ(client_->request("GET", "/apis/resource.k8s.io/v1/namespaces/x/resourceclaims")->status,
            200);
}

}  // namespace
}  // namespace tessera::dra
