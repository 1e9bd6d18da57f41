// Golden tests of the kube-scheduler extender: request bodies in the form kube-scheduler
// sends them (full v1.Pod and v1.NodeList JSON, in testdata/), answers checked field by field.

#include "k8s/extender.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "k8s/pod.h"
#include "model/gpu_catalog.h"
#include "sched/cluster_state.h"
#include "sched/testing/random_cluster.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;

json loadTestdata(const std::string& name) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/src/k8s/testdata/" + name);
  EXPECT_TRUE(in) << name;
  return json::parse(in);
}

model::GpuSpec gpu(std::string id, std::string type) {
  model::GpuSpec g;
  g.id = std::move(id);
  g.type = std::move(type);
  return g;
}

model::NodeSpec node(std::string name, std::vector<model::GpuSpec> gpus) {
  model::NodeSpec n;
  n.name = std::move(name);
  n.cpuMilli = 64000;
  n.hostMemoryMib = 512 * 1024;
  n.gpus = std::move(gpus);
  n.labels["tessera.io/pool"] = "inference";
  n.taints.push_back({"nvidia.com/gpu", "present", "NoSchedule"});
  return n;
}

// gpu-a: two empty A100-80GB. gpu-b: one A100-80GB mostly held by a low-priority replica.
// gpu-t4: one T4 (16 GB, smaller than the pod's 24 GB with the safety factor). gpu-c: an
// A100-80GB tainted for training. gpu-d: an A100-80GB with a small replica (still room).
// "not-tessera" is a Kubernetes node no agent reports.
class ExtenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sched::registerBuiltinPlugins(registry_);
    const sched::Profile profile = sched::defaultProfile();
    auto plugins = sched::buildPlugins(profile, registry_);
    ASSERT_TRUE(plugins);
    engine_ = std::make_unique<sched::PlacementEngine>(std::move(*plugins), profile.options);
    ASSERT_TRUE(state_.apply(
        sched::NodeAdded{node("gpu-a", {gpu("0", "A100-80GB"), gpu("1", "A100-80GB")})}));
    ASSERT_TRUE(state_.apply(sched::NodeAdded{node("gpu-b", {gpu("0", "A100-80GB")})}));
    ASSERT_TRUE(state_.apply(sched::NodeAdded{node("gpu-t4", {gpu("0", "T4")})}));
    model::NodeSpec tainted = node("gpu-c", {gpu("0", "A100-80GB")});
    tainted.taints.push_back({"dedicated", "training", "NoSchedule"});
    ASSERT_TRUE(state_.apply(sched::NodeAdded{tainted}));
    ASSERT_TRUE(state_.apply(sched::NodeAdded{node("gpu-d", {gpu("0", "A100-80GB")})}));
    placeOn("gpu-b", "batch/old-job", 50'000, -5);
    placeOn("gpu-d", "batch/small", 10'000, 0);
    extender_ = std::make_unique<Extender>(
        state_, *engine_,
        [](std::string_view name) -> std::optional<model::ModelProfile> {
          if (name != "llama-7b") return std::nullopt;
          model::ModelProfile p;
          p.name = "llama-7b";
          p.weightsMib = 13'000;
          p.kvCacheMib = 4'000;
          p.overheadMib = 2'000;
          return p;
        },
        [this](const std::string& ns, const std::string& name, const std::string& uid,
               const std::string& n) -> Result<void> {
          bindings_.push_back(ns + "/" + name + "@" + n + " uid=" + uid);
          if (failBinding_) return fail(Error::internal("the API server said 409"));
          return {};
        });
  }

  void placeOn(const std::string& nodeName, const std::string& id, std::int64_t mib, int prio) {
    model::PlacementRequest r;
    r.replicaId = id;
    r.deployment = id;
    r.model.name = id;
    r.model.weightsMib = mib;
    r.model.priority = prio;
    r.tolerations.push_back({"", "Exists", "", ""});
    sched::DecideOptions only;
    only.onlyNode = state_.findNode(nodeName);
    ASSERT_TRUE(engine_->place(state_, r, only).placement) << id;
  }

  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{0};
  sched::ClusterState state_{catalog_, clock_};
  sched::PluginRegistry registry_;
  std::unique_ptr<sched::PlacementEngine> engine_;
  std::unique_ptr<Extender> extender_;
  std::vector<std::string> bindings_;
  bool failBinding_ = false;
};

TEST_F(ExtenderTest, ReadsTheGoldenPodAsAPlacementRequest) {
  const json pod = loadTestdata("pod_llama.json");
  auto r = readPod(pod, [](std::string_view n) -> std::optional<model::ModelProfile> {
    model::ModelProfile p;
    p.name = std::string(n);
    p.weightsMib = 13'000;
    p.priority = 3;
    return p;
  });
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->managed);
  EXPECT_EQ(r->uid, "4b1c2d3e-5f60-4718-9a2b-3c4d5e6f7081");
  EXPECT_EQ(r->request.replicaId, "serving/llama-7b-6d9f8c7b5-x2k4p");
  EXPECT_EQ(r->request.deployment, "serving/llama-7b-6d9f8c7b5");  // the owner ReplicaSet
  EXPECT_EQ(r->request.model.name, "llama-7b");
  EXPECT_EQ(r->request.model.memoryPerGpuMib(), 20480);  // the explicit resource wins
  EXPECT_EQ(r->request.model.computeMilli, 500);
  EXPECT_EQ(r->request.model.gpusPerReplica, 1);
  EXPECT_EQ(r->request.model.priority, 3);     // from the profile; spec.priority 0 is not set
  EXPECT_EQ(r->request.model.cpuMilli, 2100);  // requests, both containers
  EXPECT_EQ(r->request.model.hostMemoryMib, 16 * 1024 + 64);
  EXPECT_EQ(r->request.nodeSelector.at("tessera.io/pool"), "inference");
  ASSERT_EQ(r->request.tolerations.size(), 3u);
  EXPECT_EQ(r->request.tolerations[2].key, "nvidia.com/gpu");
  EXPECT_EQ(r->request.tolerations[2].op, "Exists");
}

TEST_F(ExtenderTest, FilterWithNodeListReturnsThePassingNodeObjectsAndAReasonPerFailure) {
  const json args = loadTestdata("filter_args_nodes.json");
  auto out = extender_->filter(args);
  ASSERT_TRUE(out) << out.error().message;
  ASSERT_TRUE((*out)["Nodes"].is_object());
  EXPECT_TRUE((*out)["NodeNames"].is_null());
  std::vector<std::string> passed;
  for (const json& item : (*out)["Nodes"]["items"]) {
    passed.push_back(item["metadata"]["name"]);
    // The Node objects come back unchanged.
    for (const json& in : args["Nodes"]["items"]) {
      if (in["metadata"]["name"] == item["metadata"]["name"]) {
        EXPECT_EQ(in, item);
      }
    }
  }
  EXPECT_EQ(passed, (std::vector<std::string>{"gpu-a"}));  // gpu-d is not in the NodeList
  const json& failed = (*out)["FailedNodes"];
  const json& unresolvable = (*out)["FailedAndUnresolvableNodes"];
  // gpu-b: full for now; evicting its low-priority replica would help.
  ASSERT_TRUE(failed.contains("gpu-b")) << out->dump(1);
  EXPECT_NE(failed["gpu-b"].get<std::string>().find("MemoryFit"), std::string::npos);
  // gpu-t4: its only GPU is smaller than the request; gpu-c: a taint; not-tessera: unknown.
  ASSERT_TRUE(unresolvable.contains("gpu-t4")) << out->dump(1);
  EXPECT_NE(unresolvable["gpu-t4"].get<std::string>().find("GPU 0"), std::string::npos);
  ASSERT_TRUE(unresolvable.contains("gpu-c")) << out->dump(1);
  EXPECT_NE(unresolvable["gpu-c"].get<std::string>().find("TaintToleration"), std::string::npos);
  ASSERT_TRUE(unresolvable.contains("not-tessera"));
  EXPECT_EQ(failed.size() + unresolvable.size() + passed.size(), args["Nodes"]["items"].size());
  EXPECT_EQ((*out)["Error"], "");
  // Filtering books nothing.
  EXPECT_FALSE(state_.findReplica("serving/llama-7b-6d9f8c7b5-x2k4p"));
}

TEST_F(ExtenderTest, FilterWithNodeNamesAnswersASubsetOfTheNames) {
  const json args = loadTestdata("filter_args_names.json");
  auto out = extender_->filter(args);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_TRUE((*out)["Nodes"].is_null());
  EXPECT_EQ((*out)["NodeNames"], json({"gpu-a"}));  // gpu-d is not among the candidates
  EXPECT_TRUE((*out)["FailedNodes"].contains("gpu-b"));
  EXPECT_EQ((*out)["FailedAndUnresolvableNodes"].size(), 3u);
}

TEST_F(ExtenderTest, DecodesGoFieldNamesIgnoringCase) {
  json args = loadTestdata("filter_args_names.json");
  json lower = {{"pod", args["Pod"]}, {"nodenames", {"gpu-a", "gpu-d"}}};
  auto out = extender_->filter(lower);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ((*out)["NodeNames"], json({"gpu-a", "gpu-d"}));
  json upper = {{"POD", args["Pod"]}, {"NODENAMES", {"gpu-b"}}};
  out = extender_->filter(upper);
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)["NodeNames"], json::array());
}

TEST_F(ExtenderTest, PrioritizeScoresEveryCandidateFeasibleOnesFromOneToTen) {
  json args = loadTestdata("filter_args_names.json");
  args["NodeNames"] = {"gpu-a", "gpu-b", "gpu-t4", "gpu-d", "not-tessera"};
  auto out = extender_->prioritize(args);
  ASSERT_TRUE(out) << out.error().message;
  ASSERT_TRUE(out->is_array());
  ASSERT_EQ(out->size(), 5u);
  std::map<std::string, std::int64_t> score;
  for (const json& hp : *out) score[hp["Host"]] = hp["Score"];
  EXPECT_EQ(score["gpu-b"], 0);
  EXPECT_EQ(score["gpu-t4"], 0);
  EXPECT_EQ(score["not-tessera"], 0);
  EXPECT_GE(score["gpu-a"], 1);
  EXPECT_GE(score["gpu-d"], 1);
  EXPECT_EQ(std::max(score["gpu-a"], score["gpu-d"]), 10);
  // The node scored 10 is where the engine itself would place the pod.
  auto pod = readPod(args["Pod"], [](std::string_view) {
    model::ModelProfile p;
    p.name = "llama-7b";
    return std::optional<model::ModelProfile>(p);
  });
  ASSERT_TRUE(pod);
  const sched::Decision d = engine_->decide(state_, pod->request);
  ASSERT_TRUE(d.placement);
  EXPECT_EQ(score[state_.node(d.placement->node).spec.name], 10);
}

TEST_F(ExtenderTest, PreemptKeepsNodesWhereTheVictimsMakeRoom) {
  const json pod = loadTestdata("pod_llama.json");
  json victim = {{"metadata", {{"name", "old-job"}, {"namespace", "batch"}, {"uid", "uid-old"}}}};
  json args = {{"Pod", pod},
               {"NodeNameToVictims",
                {{"gpu-b", {{"Pods", {victim}}, {"NumPDBViolations", 1}}},
                 {"gpu-t4", {{"Pods", json::array()}, {"NumPDBViolations", 0}}}}}};
  auto out = extender_->preempt(args);
  ASSERT_TRUE(out) << out.error().message;
  const json& meta = (*out)["NodeNameToMetaVictims"];
  ASSERT_TRUE(meta.contains("gpu-b")) << out->dump();
  EXPECT_EQ(meta["gpu-b"]["Pods"], json::array({{{"UID", "uid-old"}}}));
  EXPECT_EQ(meta["gpu-b"]["NumPDBViolations"], 1);
  EXPECT_FALSE(meta.contains("gpu-t4"));  // nothing evicted there makes a T4 big enough
  // The what-if touched nothing.
  EXPECT_TRUE(state_.findReplica("batch/old-job"));

  // A meta victim Tessera never bound frees nothing it knows of: gpu-b is dropped.
  json metaArgs = {{"Pod", pod},
                   {"NodeNameToMetaVictims",
                    {{"gpu-b", {{"Pods", {{{"UID", "uid-unknown"}}}}, {"NumPDBViolations", 0}}}}}};
  out = extender_->preempt(metaArgs);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_TRUE((*out)["NodeNameToMetaVictims"].empty()) << out->dump();
}

TEST_F(ExtenderTest, BindBooksTheGpusPostsTheBindingAndRollsBackOnFailure) {
  const json args = loadTestdata("filter_args_names.json");
  ASSERT_TRUE(extender_->filter(args));
  const json bindArgs = {{"PodName", "llama-7b-6d9f8c7b5-x2k4p"},
                         {"PodNamespace", "serving"},
                         {"PodUID", "4b1c2d3e-5f60-4718-9a2b-3c4d5e6f7081"},
                         {"Node", "gpu-a"}};
  failBinding_ = true;
  auto out = extender_->bind(bindArgs);
  ASSERT_TRUE(out);
  EXPECT_NE((*out)["Error"].get<std::string>().find("409"), std::string::npos);
  EXPECT_FALSE(state_.findReplica("serving/llama-7b-6d9f8c7b5-x2k4p"));  // rolled back
  ASSERT_TRUE(state_.checkInvariants());

  failBinding_ = false;
  out = extender_->bind(bindArgs);
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)["Error"], "");
  ASSERT_EQ(bindings_.size(), 2u);
  EXPECT_EQ(bindings_[1],
            "serving/llama-7b-6d9f8c7b5-x2k4p@gpu-a uid=4b1c2d3e-5f60-4718-9a2b-3c4d5e6f7081");
  const auto replica = state_.findReplica("serving/llama-7b-6d9f8c7b5-x2k4p");
  ASSERT_TRUE(replica);
  const sched::Placement& p = state_.replica(*replica).placement;
  EXPECT_EQ(state_.node(p.node).spec.name, "gpu-a");
  ASSERT_EQ(p.gpus.size(), 1u);
  EXPECT_EQ(p.gpus[0].computeMilli, 500);
  EXPECT_EQ(p.gpus[0].reservedMib, 24576);  // 20 GiB × the 1.2 safety factor
  ASSERT_TRUE(state_.checkInvariants());
}

// Without a binder (no Kubernetes API), a bind Tessera cannot book (a pod it never filtered, or
// the same pod bound a second time) says so, naming the pod.
TEST_F(ExtenderTest, ABindWithoutABinderNamesThePodAndWhy) {
  Extender standalone(state_, *engine_,
                      [](std::string_view) { return std::optional<model::ModelProfile>(); });
  auto out = standalone.bind({{"PodName", "web-0"},
                              {"PodNamespace", "ml"},
                              {"PodUID", "uid-never-filtered"},
                              {"Node", "gpu-a"}});
  ASSERT_TRUE(out) << out.error().message;
  const std::string error = (*out)["Error"].get<std::string>();
  EXPECT_NE(error.find("pod ml/web-0 is not one Tessera filtered (or it was bound already)"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("--kube-api-server"), std::string::npos) << error;
  EXPECT_FALSE(state_.findReplica("ml/web-0"));
}

TEST_F(ExtenderTest, PodsWithoutGpuRequestsPassUntouched) {
  json args = loadTestdata("filter_args_names.json");
  json& res = args["Pod"]["spec"]["containers"][0]["resources"];
  res = {{"requests", {{"cpu", "1"}}}};
  args["Pod"]["metadata"]["annotations"] = json::object();
  auto out = extender_->filter(args);
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)["NodeNames"], args["NodeNames"]);
  EXPECT_TRUE((*out)["FailedNodes"].empty());
  auto prio = extender_->prioritize(args);
  ASSERT_TRUE(prio);
  for (const json& hp : *prio) EXPECT_EQ(hp["Score"], 0);
}

TEST_F(ExtenderTest, MalformedArgumentsNameTheFieldAndChangeNothing) {
  const json good = loadTestdata("filter_args_names.json");
  struct Case {
    json args;
    std::string expect;
  };
  json badQuantity = good;
  badQuantity["Pod"]["spec"]["containers"][0]["resources"]["requests"]["tessera.io/gpu-memory"] =
      "lots";
  json badNames = good;
  badNames["NodeNames"] = "gpu-a";
  json noPod = good;
  noPod.erase("Pod");
  json badModel = good;
  badModel["Pod"]["metadata"]["annotations"]["tessera.io/model"] = "no-such-model";
  json bothKinds = good;
  bothKinds["Pod"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1";
  json badSharing = good;
  badSharing["Pod"]["metadata"]["annotations"]["tessera.io/sharing"] = "exclusive,magic";
  for (const Case& c : {Case{json::array(), "body"}, Case{noPod, "Pod"},
                        Case{badQuantity, "requests[\"tessera.io/gpu-memory\"]"},
                        Case{badNames, "NodeNames"}, Case{badModel, "no-such-model"},
                        Case{bothKinds, "nvidia.com/gpu"}, Case{badSharing, "magic"}}) {
    const std::uint64_t before = state_.generation();
    auto out = extender_->filter(c.args);
    ASSERT_FALSE(out) << c.args.dump().substr(0, 200);
    EXPECT_NE(out.error().message.find(c.expect), std::string::npos) << out.error().message;
    EXPECT_EQ(state_.generation(), before);
  }
  auto bind = extender_->bind(json{{"PodName", 7}});
  ASSERT_FALSE(bind);
  EXPECT_NE(bind.error().message.find("PodName"), std::string::npos);
  auto preempt = extender_->preempt(json{{"Pod", good["Pod"]}, {"NodeNameToVictims", 3}});
  ASSERT_FALSE(preempt);
  EXPECT_NE(preempt.error().message.find("NodeNameToVictims"), std::string::npos);
}

// The extender keeps the engine's answer for a request shape on a state generation and each
// failing node's reason by node generation; a fresh Extender (no cache) must answer every
// filter and prioritize exactly alike, over random clusters, pods of a few shapes and a
// stream of placements, unloads, node updates and removals. Reproduce with TESSERA_SEED.
TEST(ExtenderCacheTest, CachedAnswersEqualFreshOnesOverRandomClustersAndEvents) {
  const std::uint64_t master = sched::testkit::fuzzSeed();
  std::printf("ExtenderCacheTest seed: TESSERA_SEED=%llu\n",
              static_cast<unsigned long long>(master));
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  sched::PluginRegistry registry;
  sched::registerBuiltinPlugins(registry);
  const sched::Profile profile = sched::defaultProfile();
  const int cases = sched::testkit::fuzzIterations(25);
  for (int c = 0; c < cases; ++c) {
    const std::uint64_t seed = sched::testkit::caseSeed(master, c);
    SCOPED_TRACE("case " + std::to_string(c) + " seed " + std::to_string(seed));
    sched::testkit::Rng rng(seed);
    ManualClock clock{0};
    sched::ClusterState state{catalog, clock, profile.options};
    auto plugins = sched::buildPlugins(profile, registry);
    ASSERT_TRUE(plugins);
    sched::PlacementEngine engine(std::move(*plugins), profile.options);
    sched::testkit::ClusterShape clusterShape;
    std::vector<model::NodeSpec> specs = sched::testkit::randomCluster(rng, catalog, clusterShape);
    for (const auto& n : specs) ASSERT_TRUE(state.apply(sched::NodeAdded{n}));
    // A few deployments; pods name them by the model annotation.
    sched::testkit::RequestShape requestShape;
    requestShape.invalidProbability = 0.05;
    std::vector<model::PlacementRequest> deployments;
    for (int d = rng.between(1, 4); d > 0; --d) {
      deployments.push_back(sched::testkit::randomDeployment(
          rng, catalog, "model-" + std::to_string(deployments.size()), requestShape));
    }
    ModelLookup lookup =
        [&deployments](std::string_view name) -> std::optional<model::ModelProfile> {
      for (const auto& d : deployments) {
        if (d.model.name == name) return d.model;
      }
      return std::nullopt;
    };
    Extender cached(state, engine, lookup);
    int podIndex = 0, placed = 0;
    auto podArgs = [&](int deployment, int index) {
      const model::PlacementRequest& d = deployments[static_cast<std::size_t>(deployment)];
      json annotations = {{"tessera.io/model", d.model.name}};
      if (!d.gpuTypes.empty()) {
        std::string types;
        for (const auto& t : d.gpuTypes) types += (types.empty() ? "" : ",") + t;
        annotations["tessera.io/gpu-types"] = types;
      }
      json spec = {{"containers", json::array({{{"name", "server"}}})}};
      if (!d.nodeSelector.empty()) spec["nodeSelector"] = d.nodeSelector;
      if (!d.tolerations.empty()) {
        json tols = json::array();
        for (const auto& t : d.tolerations) {
          json tj = {{"operator", t.op.empty() ? "Equal" : t.op}};
          if (!t.key.empty()) tj["key"] = t.key;
          if (!t.value.empty()) tj["value"] = t.value;
          if (!t.effect.empty()) tj["effect"] = t.effect;
          tols.push_back(tj);
        }
        spec["tolerations"] = tols;
      }
      json pod = {{"metadata",
                   {{"name", d.model.name + "-" + std::to_string(index)},
                    {"namespace", "serving"},
                    {"uid", "uid-" + std::to_string(index)},
                    {"annotations", annotations}}},
                  {"spec", spec}};
      json names = json::array();
      for (const auto& n : state.nodes()) {
        if (rng.chance(0.9)) names.push_back(n.spec.name);
      }
      if (rng.chance(0.2)) names.push_back("not-tessera");
      return json{{"Pod", pod}, {"NodeNames", names}};
    };
    const int steps = static_cast<int>(rng.between(20, 60));
    for (int step = 0; step < steps; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const std::size_t what = rng.weighted({10, 3, 2, 1});
      const int deployment = rng.upTo(static_cast<int>(deployments.size()) - 1);
      if (what == 0) {
        // A pod (sometimes one seen before) through filter then prioritize.
        const int index = podIndex > 0 && rng.chance(0.2) ? rng.upTo(podIndex - 1) : podIndex++;
        const json args = podArgs(deployment, index);
        Extender fresh(state, engine, lookup);
        auto a = cached.filter(args);
        auto b = fresh.filter(args);
        ASSERT_EQ(a.has_value(), b.has_value());
        if (a) {
          ASSERT_EQ(a->dump(), b->dump()) << args.dump();
        }
        Extender fresh2(state, engine, lookup);
        auto pa = cached.prioritize(args);
        auto pb = fresh2.prioritize(args);
        ASSERT_EQ(pa.has_value(), pb.has_value());
        if (pa) {
          ASSERT_EQ(pa->dump(), pb->dump()) << args.dump();
        }
      } else if (what == 1) {
        // A replica of a deployment booked by the engine (changes one node).
        model::PlacementRequest r = deployments[static_cast<std::size_t>(deployment)];
        // Same id as a pod sometimes: its filter then sees "already placed".
        r.replicaId = rng.chance(0.3) && podIndex > 0
                          ? "serving/" + r.model.name + "-" + std::to_string(rng.upTo(podIndex - 1))
                          : "other/" + std::to_string(placed++);
        (void)engine.place(state, r);
      } else if (what == 2) {
        const auto replicas = state.replicas();
        std::vector<std::string> live;
        for (const auto& rr : replicas) {
          if (!rr.removed) live.push_back(rr.placement.replicaId);
        }
        if (!live.empty()) (void)state.apply(sched::ReplicaUnloaded{rng.pick(live)});
      } else if (!specs.empty()) {
        // A node changes (cordon flips) or goes away.
        model::NodeSpec n = rng.pick(specs);
        if (rng.chance(0.8)) {
          n.cordoned = !n.cordoned;
          (void)state.apply(sched::NodeUpdated{n});
        } else {
          (void)state.apply(sched::NodeRemoved{n.name, true});
        }
      }
    }
  }
}

}  // namespace
}  // namespace tessera::k8s
