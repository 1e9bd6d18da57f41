// The control plane with its state in the API server (k8s::KubeStateStore) against the test
// API server: the extender's bind writes the booking onto the pod before it posts the
// Binding (assume, persist, commit), forgets it when either step fails, and a control plane
// started with nothing local reads every booking and node back.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "api/control_plane.h"
#include "api/json_api.h"
#include "k8s/kube_client.h"
#include "k8s/kube_state_store.h"
#include "k8s/testing/fake_apiserver.h"
#include "model/gpu_catalog.h"

namespace tessera::api {
namespace {

using nlohmann::json;

constexpr const char* kNs = "tessera-system";

json node(const std::string& name, int gpus) {
  json list = json::array();
  for (int i = 0; i < gpus; ++i) list.push_back({{"type", "A100-80GB"}, {"nvlinkGroup", 0}});
  return {{"name", name}, {"cpu", 96}, {"hostMemory", "1Ti"}, {"gpus", list}};
}

class KubeStateTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(api_.start()); }

  std::unique_ptr<k8s::KubeClient> client() {
    k8s::KubeConfig c;
    c.server = api_.url();
    auto made = k8s::KubeClient::create(c);
    EXPECT_TRUE(made) << made.error().message;
    return std::move(*made);
  }
  // A control plane with empty disks: everything it knows comes from the API server.
  std::unique_ptr<ControlPlane> start() {
    clients_.push_back(client());
    stores_.push_back(std::make_unique<k8s::KubeStateStore>(*clients_.back(), kNs));
    ControlPlaneConfig config;
    // Unix time that runs with the books' clock, as the system clock runs with a steady one.
    config.eventClockMs = [this] { return 1'700'000'000'000 + clock_.nowMs(); };
    auto plane = ControlPlane::create(catalog_, clock_, config, stores_.back().get());
    EXPECT_TRUE(plane) << plane.error().message;
    return plane ? std::move(*plane) : nullptr;
  }
  // A pending pod asking for 40 GiB of GPU memory (or `memoryMib`); returns its UID.
  std::string createPod(const std::string& name, const std::string& memoryMib = "40960") {
    const json pod = {
        {"metadata", {{"name", name}, {"namespace", "ml"}}},
        {"spec",
         {{"containers",
           {{{"name", "c"},
             {"resources", {{"limits", {{"tessera.io/gpu-memory", memoryMib}}}}}}}}}}};
    auto made = api_.create("pods", pod);
    EXPECT_TRUE(made) << made.error().message;
    return (*made)["metadata"]["uid"];
  }
  // kube-scheduler's filter then bind for the pod onto `node`; returns bind's Error text.
  std::string schedule(ControlPlane& plane, const std::string& name, const std::string& node) {
    const json pod = *api_.get("pods", "ml", name);
    auto filtered = plane.extender().filter({{"Pod", pod}, {"NodeNames", {node}}});
    EXPECT_TRUE(filtered) << filtered.error().message;
    auto bound = plane.extenderBind({{"PodName", name},
                                     {"PodNamespace", "ml"},
                                     {"PodUID", pod["metadata"]["uid"]},
                                     {"Node", node}});
    EXPECT_TRUE(bound) << bound.error().message;
    return bound ? (*bound)["Error"].get<std::string>() : "no answer";
  }
  json booking(const std::string& name) {
    const json pod = *api_.get("pods", "ml", name);
    const json a = pod["metadata"].value("annotations", json::object());
    return a.contains("tessera.io/booking")
               ? json::parse(a["tessera.io/booking"].get<std::string>())
               : json(nullptr);
  }

  k8s::testing::FakeApiServer api_;
  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{1000};
  std::vector<std::unique_ptr<k8s::KubeClient>> clients_;
  std::vector<std::unique_ptr<k8s::KubeStateStore>> stores_;
};

TEST_F(KubeStateTest, TheBookingIsOnThePodBeforeItsBindingAndComesBackWithNothingLocal) {
  auto plane = start();
  ASSERT_TRUE(plane);
  // Three cards; a 40 GiB pod takes one to itself (two would not fit 80 GB with the margin).
  ASSERT_TRUE(json_api::registerNode(*plane, node("gpu-a", 3)));
  auto binds = client();
  bool bookedFirst = false;
  plane->setBinder([&](const std::string& ns, const std::string& name, const std::string& uid,
                       const std::string& to) -> Result<void> {
    bookedFirst = !booking(name).is_null();  // what the API server holds at the commit point
    return binds->bindPod(ns, name, uid, to);
  });
  createPod("p0");
  createPod("p1");
  EXPECT_EQ(schedule(*plane, "p0", "gpu-a"), "");
  EXPECT_TRUE(bookedFirst);
  EXPECT_EQ(schedule(*plane, "p1", "gpu-a"), "");
  EXPECT_EQ((*api_.get("pods", "ml", "p0"))["spec"]["nodeName"], "gpu-a");
  const json b0 = booking("p0");
  ASSERT_TRUE(b0.is_object());
  EXPECT_EQ(b0["placement"]["node"], "gpu-a");
  EXPECT_EQ(b0["pod"], json({{"namespace", "ml"}, {"name", "p0"}}));

  // A second control plane, started from nothing: the node and both bookings are back, on
  // the same GPUs.
  const json before = plane->listReplicas()["replicas"];
  auto next = start();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->listNodes()["nodes"].size(), 1u);
  const json after = next->listReplicas()["replicas"];
  ASSERT_EQ(after.size(), 2u);
  auto gpuIds = [](const json& r) {
    json ids = json::array();
    for (const json& g : r["gpus"]) ids.push_back(g["id"]);
    return ids;
  };
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i]["replica"], before[i]["replica"]);
    EXPECT_EQ(after[i]["node"], "gpu-a");
    EXPECT_EQ(gpuIds(after[i]), gpuIds(before[i])) << after[i].dump();
  }
  // And it goes on booking next to them without over-committing: the third pod gets the
  // card neither of the restored ones holds, and a fourth finds none.
  createPod("p2");
  createPod("p3");
  next->setBinder([&](const std::string& ns, const std::string& name, const std::string& uid,
                      const std::string& to) { return binds->bindPod(ns, name, uid, to); });
  EXPECT_EQ(schedule(*next, "p2", "gpu-a"), "");
  const json all = next->listReplicas()["replicas"];
  ASSERT_EQ(all.size(), 3u);
  std::set<json> cards;
  for (const json& r : all) cards.insert(gpuIds(r));
  EXPECT_EQ(cards.size(), 3u);
  EXPECT_NE(schedule(*next, "p3", "gpu-a").find("does not fit"), std::string::npos);
}

// A new leader rebuilds the bookings as they were: p0's reservation had lapsed (charged its
// 37000 MiB estimate) when p1 booked 44400 MiB next to it; booked afresh, p0 would hold 44400
// and the two would not fit the card the API server says they share.
TEST_F(KubeStateTest, ANewLeaderChargesALapsedReservationAsLapsed) {
  auto plane = start();
  ASSERT_TRUE(plane);
  ASSERT_TRUE(json_api::registerNode(*plane, node("gpu-a", 1)));
  auto binds = client();
  plane->setBinder([&](const std::string& ns, const std::string& name, const std::string& uid,
                       const std::string& to) { return binds->bindPod(ns, name, uid, to); });
  createPod("p0", "37000");
  createPod("p1", "37000");
  EXPECT_EQ(schedule(*plane, "p0", "gpu-a"), "");
  clock_.advance(31'000);
  plane->tick();
  EXPECT_EQ(schedule(*plane, "p1", "gpu-a"), "");
  const json before = {{"nodes", plane->listNodes()}, {"replicas", plane->listReplicas()}};
  EXPECT_EQ(before["nodes"]["nodes"][0]["gpus"][0]["chargedMib"], 37000 + 44400);

  auto next = start();
  ASSERT_TRUE(next);
  EXPECT_EQ(json({{"nodes", next->listNodes()}, {"replicas", next->listReplicas()}}), before);
  EXPECT_TRUE(next->state().checkInvariants());
}

TEST_F(KubeStateTest, AFailedBindingForgetsTheBookingInMemoryAndOnThePod) {
  auto plane = start();
  ASSERT_TRUE(plane);
  ASSERT_TRUE(json_api::registerNode(*plane, node("gpu-a", 1)));
  plane->setBinder([](const std::string&, const std::string&, const std::string&,
                      const std::string&) -> Result<void> {
    return fail(Error::internal("503 ServiceUnavailable"));
  });
  createPod("p0");
  const std::string error = schedule(*plane, "p0", "gpu-a");
  EXPECT_NE(error.find("binding failed"), std::string::npos) << error;
  EXPECT_TRUE(booking("p0").is_null());
  EXPECT_TRUE(plane->listReplicas()["replicas"].empty());
  EXPECT_TRUE(start()->listReplicas()["replicas"].empty());
}

TEST_F(KubeStateTest, ABookingTheApiServerRefusesIsNeitherKeptNorBound) {
  auto plane = start();
  ASSERT_TRUE(plane);
  ASSERT_TRUE(json_api::registerNode(*plane, node("gpu-a", 1)));
  int bindings = 0;
  plane->setBinder([&](const std::string&, const std::string&, const std::string&,
                       const std::string&) -> Result<void> {
    ++bindings;
    return {};
  });
  createPod("p0");
  api_.refuseWrites(
      [](const std::string& resource, const json&) { return resource == "pods" ? 503 : 0; });
  const std::string error = schedule(*plane, "p0", "gpu-a");
  api_.refuseWrites(nullptr);
  EXPECT_NE(error.find("could not be stored"), std::string::npos) << error;
  EXPECT_EQ(bindings, 0);
  EXPECT_TRUE(plane->listReplicas()["replicas"].empty());
  // The GPU is free again: the next try books and binds.
  EXPECT_EQ(schedule(*plane, "p0", "gpu-a"), "");
  EXPECT_EQ(bindings, 1);
}

TEST_F(KubeStateTest, ABookingWhoseNodeIsGoneIsSkippedNotFatal) {
  auto plane = start();
  ASSERT_TRUE(plane);
  ASSERT_TRUE(json_api::registerNode(*plane, node("gpu-a", 1)));
  auto binds = client();
  plane->setBinder([&](const std::string& ns, const std::string& name, const std::string& uid,
                       const std::string& to) { return binds->bindPod(ns, name, uid, to); });
  createPod("p0");
  ASSERT_EQ(schedule(*plane, "p0", "gpu-a"), "");
  // The node's document goes (removed by hand, or a write that could not be undone) while the
  // pod still carries its booking.
  for (const json& cm : api_.list("configmaps")) {
    if (cm["metadata"]["labels"].value("tessera.io/state-kind", "") == "node") {
      ASSERT_TRUE(api_.remove("configmaps", kNs, cm["metadata"]["name"]));
    }
  }
  auto next = start();
  ASSERT_TRUE(next) << "a stray booking kept the control plane from starting";
  EXPECT_TRUE(next->listReplicas()["replicas"].empty());
  bool said = false;
  const json events = next->events(0, 100);
  for (const json& e : events["events"]) {
    said = said || (e["type"] == "BookingSkipped" && e["subject"] == "ml/p0");
  }
  EXPECT_TRUE(said) << events.dump();
  EXPECT_NE(next->metricsText().find("tessera_internal_errors_total{where=\"restore\"} 1"),
            std::string::npos);
}

// GPU mode dra with the state in the API server: a pod booked before it exists cannot have its
// booking written onto it, so bookClaim hands the document back and the pod is created
// carrying it; once bound, a control plane started from nothing reads it back.
TEST_F(KubeStateTest, AClaimBookingTravelsOnThePodItIsCreatedWith) {
  auto plane = start();
  ASSERT_TRUE(plane);
  ASSERT_TRUE(json_api::registerNode(*plane, node("gpu-a", 2)));
  json pod = {
      {"metadata", {{"name", "d0"}, {"namespace", "ml"}}},
      {"spec",
       {{"containers",
         {{{"name", "c"}, {"resources", {{"limits", {{"tessera.io/gpu-memory", "20480"}}}}}}}}}}};
  auto choice = plane->bookClaim(pod);
  ASSERT_TRUE(choice) << choice.error().message;
  EXPECT_EQ((*choice)["node"], "gpu-a");
  ASSERT_TRUE((*choice).contains("booking")) << choice->dump();
  const json doc = json::parse((*choice)["booking"].get<std::string>());
  EXPECT_EQ(doc["pod"], json({{"namespace", "ml"}, {"name", "d0"}}));
  EXPECT_EQ(doc["placement"]["node"], "gpu-a");
  EXPECT_TRUE(plane->getReplica("ml/d0"));
  // The controller creates the pod with the document; kube-scheduler binds it.
  pod["metadata"]["annotations"]["tessera.io/booking"] = (*choice)["booking"];
  pod["metadata"]["labels"]["tessera.io/booked"] = "true";
  pod["spec"]["nodeName"] = "gpu-a";
  ASSERT_TRUE(api_.create("pods", pod));
  auto next = start();
  ASSERT_TRUE(next);
  const json replicas = next->listReplicas()["replicas"];
  ASSERT_EQ(replicas.size(), 1u);
  EXPECT_EQ(replicas[0]["replica"], "ml/d0");
  EXPECT_EQ(replicas[0]["node"], "gpu-a");
  // Taking a claim booking back clears it wherever it is (here: on the pod).
  next->forgetClaim("ml/d0", "test");
  EXPECT_FALSE(next->getReplica("ml/d0"));
  EXPECT_TRUE(booking("d0").is_null());
}

}  // namespace
}  // namespace tessera::api
