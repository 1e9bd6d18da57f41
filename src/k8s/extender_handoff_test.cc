// The extender's side of the device plugin hand-off (docs/device-plugin.md): bind keeps a pod
// off a node while an unconfirmed booking there has the same GPU count and resource but a
// different share, until the plugin confirms or the guard's TTL passes.

#include <gtest/gtest.h>

#include "k8s/extender.h"
#include "model/gpu_catalog.h"
#include "sched/cluster_state.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;

json handoffPod(const std::string& name, json requests) {
  return {{"metadata", {{"name", name}, {"namespace", "serving"}, {"uid", "uid-" + name}}},
          {"spec",
           {{"containers",
             json::array({{{"name", "engine"}, {"resources", {{"requests", requests}}}}})}}}};
}

json share(const std::string& memoryMib, const std::string& computeMilli) {
  return {{"tessera.io/gpus", "1"},
          {"tessera.io/gpu-memory", memoryMib},
          {"tessera.io/gpu-compute", computeMilli}};
}

class ExtenderHandOffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sched::registerBuiltinPlugins(registry_);
    const sched::Profile profile = sched::defaultProfile();
    auto plugins = sched::buildPlugins(profile, registry_);
    ASSERT_TRUE(plugins);
    engine_ = std::make_unique<sched::PlacementEngine>(std::move(*plugins), profile.options);
    for (const char* name : {"gpu-a", "gpu-b"}) {
      model::NodeSpec n;
      n.name = name;
      n.cpuMilli = 64000;
      n.hostMemoryMib = 512 * 1024;
      for (const char* id : {"0", "1", "2", "3"}) {
        model::GpuSpec g;
        g.id = id;
        g.type = "A100-80GB";
        n.gpus.push_back(g);
      }
      ASSERT_TRUE(state_.apply(sched::NodeAdded{n}));
    }
    extender_ = std::make_unique<Extender>(
        state_, *engine_, [](std::string_view) { return std::optional<model::ModelProfile>(); });
  }

  // filter then bind, as kube-scheduler does; bind's Error ("" when bound).
  std::string schedule(const json& p, const std::string& node) {
    auto f = extender_->filter({{"Pod", p}, {"NodeNames", {node}}});
    EXPECT_TRUE(f) << f.error().message;
    auto b = extender_->bind({{"PodName", p["metadata"]["name"]},
                              {"PodNamespace", "serving"},
                              {"PodUID", p["metadata"]["uid"]},
                              {"Node", node}});
    EXPECT_TRUE(b) << b.error().message;
    return b ? (*b)["Error"].get<std::string>() : "no answer";
  }

  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{0};
  sched::ClusterState state_{catalog_, clock_};
  sched::PluginRegistry registry_;
  std::unique_ptr<sched::PlacementEngine> engine_;
  std::unique_ptr<Extender> extender_;
};

TEST_F(ExtenderHandOffTest, ADifferentShareOfTheSameSizeWaitsForTheConfirmation) {
  ASSERT_EQ(schedule(handoffPod("a", share("20480", "500")), "gpu-a"), "");
  ASSERT_NE(extender_->unconfirmed("serving/a"), nullptr);
  EXPECT_EQ(extender_->unconfirmed("serving/a")->resource, "tessera.io/gpus");

  const std::string refused = schedule(handoffPod("b", share("8192", "250")), "gpu-a");
  EXPECT_NE(refused.find("serving/a"), std::string::npos) << refused;
  EXPECT_NE(refused.find("retry"), std::string::npos) << refused;
  EXPECT_FALSE(state_.findReplica("serving/b"));  // the booking was rolled back
  ASSERT_TRUE(state_.checkInvariants());

  // Elsewhere, the same size and share, or another size: no ambiguity, no wait.
  EXPECT_EQ(schedule(handoffPod("b", share("8192", "250")), "gpu-b"), "");
  EXPECT_EQ(schedule(handoffPod("twin", share("20480", "500")), "gpu-a"), "");
  json two = share("8192", "250");
  two["tessera.io/gpus"] = "2";
  EXPECT_EQ(schedule(handoffPod("pair", two), "gpu-a"), "");
  // Whole GPUs come through another resource (another plugin): no ambiguity either.
  EXPECT_EQ(schedule(handoffPod("whole", {{"nvidia.com/gpu", "1"}}), "gpu-a"), "");
  ASSERT_NE(extender_->unconfirmed("serving/whole"), nullptr);
  EXPECT_EQ(extender_->unconfirmed("serving/whole")->resource, "nvidia.com/gpu");

  // Once a and its twin are confirmed, the different share binds.
  extender_->allocationConfirmed("serving/a");
  EXPECT_NE(schedule(handoffPod("c", share("8192", "250")), "gpu-a"), "");  // twin still pending
  extender_->allocationConfirmed("serving/twin");
  EXPECT_EQ(schedule(handoffPod("c", share("8192", "250")), "gpu-a"), "");
  ASSERT_TRUE(state_.checkInvariants());
}

TEST_F(ExtenderHandOffTest, TheGuardLapsesAfterItsTtlWithoutAConfirmation) {
  extender_->setConfirmTtlMs(5'000);
  ASSERT_EQ(schedule(handoffPod("a", share("20480", "500")), "gpu-a"), "");
  clock_.advance(4'999);
  EXPECT_NE(schedule(handoffPod("b", share("8192", "250")), "gpu-a"), "");
  clock_.advance(1);
  EXPECT_EQ(schedule(handoffPod("b", share("8192", "250")), "gpu-a"), "");
  EXPECT_EQ(extender_->unconfirmed("serving/a"), nullptr);
}

TEST_F(ExtenderHandOffTest, WholeGpusOfDifferentTypesAreDifferentShapes) {
  model::NodeSpec mixed;
  mixed.name = "mixed";
  mixed.cpuMilli = 64000;
  mixed.hostMemoryMib = 512 * 1024;
  for (const char* type : {"A100-80GB", "H100-80GB"}) {
    model::GpuSpec g;
    g.id = type;
    g.type = type;
    mixed.gpus.push_back(g);
  }
  ASSERT_TRUE(state_.apply(sched::NodeAdded{mixed}));
  auto whole = [](const std::string& name, const std::string& type) {
    json p = handoffPod(name, {{"nvidia.com/gpu", "1"}});
    p["metadata"]["annotations"] = {{"tessera.io/gpu-types", type}};
    return p;
  };
  // Same size, same memory, but the plugin could give the A100 pod the H100.
  ASSERT_EQ(schedule(whole("on-a100", "A100-80GB"), "mixed"), "");
  EXPECT_NE(schedule(whole("on-h100", "H100-80GB"), "mixed"), "");
  extender_->allocationConfirmed("serving/on-a100");
  EXPECT_EQ(schedule(whole("on-h100", "H100-80GB"), "mixed"), "");
}

TEST(DeviceResourceTest, WholeGpusWhenAContainerAsksNvidiaGpu) {
  EXPECT_EQ(Extender::deviceResource(handoffPod("x", share("1", "1"))), "tessera.io/gpus");
  EXPECT_EQ(Extender::deviceResource(handoffPod("x", {{"nvidia.com/gpu", "2"}})), "nvidia.com/gpu");
  EXPECT_EQ(Extender::deviceResource(json::object()), "");
  // Memory and compute alone reach no device plugin: nothing to hand off, no guard.
  EXPECT_EQ(Extender::deviceResource(handoffPod("x", {{"tessera.io/gpu-memory", "1"}})), "");
}

}  // namespace
}  // namespace tessera::k8s
