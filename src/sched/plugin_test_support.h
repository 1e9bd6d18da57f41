#pragma once
// Small hand-built cluster states for plugin tests: nodes and replicas go in through the
// same events the server applies, on a manual clock and the built-in GPU catalogue.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpu_catalog.h"
#include "sched/cluster_state.h"
#include "sched/mig_choice.h"
#include "sched/plugin.h"
#include "sched/types.h"

namespace tessera::sched::testing {

constexpr std::int64_t kGib = 1024;

inline model::GpuSpec gpuSpec(std::string id, std::string type) {
  model::GpuSpec g;
  g.id = std::move(id);
  g.type = std::move(type);
  return g;
}

inline model::NodeSpec nodeSpec(std::string name, const std::string& type, int gpus) {
  model::NodeSpec n;
  n.name = std::move(name);
  n.cpuMilli = 64'000;
  n.hostMemoryMib = 512 * kGib;
  for (int i = 0; i < gpus; ++i) n.gpus.push_back(gpuSpec(std::to_string(i), type));
  return n;
}

inline model::PlacementRequest makeRequest(std::string id, std::int64_t weightsMib, int gpus = 1) {
  model::PlacementRequest r;
  r.replicaId = std::move(id);
  r.model.name = "model";
  r.model.weightsMib = weightsMib;
  r.model.gpusPerReplica = gpus;
  return r;
}

class PluginTest : public ::testing::Test {
 protected:
  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{0};
  EngineOptions options_;
  ClusterState state_{catalog_, clock_, options_};

  NodeId addNode(const model::NodeSpec& spec) {
    auto r = state_.apply(NodeAdded{spec});
    EXPECT_TRUE(r) << r.error().message;
    return *state_.findNode(spec.name);
  }
  GpuId gpu(const std::string& node, const std::string& id) const {
    return *state_.findGpu(node, id);
  }

  // Places a replica that holds `reservedMib` and `computeMilli` on each of `gpus` (shared),
  // or the whole card (exclusive).
  void place(const std::string& replicaId, std::vector<GpuId> gpus, std::int64_t reservedMib,
             std::int32_t computeMilli = 0, model::SharingMode mode = model::SharingMode::kShared,
             const std::string& modelName = "other", const std::string& deployment = "",
             double bandwidthGBps = 0) {
    Placement p;
    p.replicaId = replicaId;
    p.modelName = modelName;
    p.deployment = deployment.empty() ? modelName : deployment;
    p.mode = mode;
    p.node = state_.gpu(gpus.front()).node;
    for (GpuId g : gpus) {
      GpuAssignment a;
      a.gpu = g;
      a.estimateMib = reservedMib;
      a.reservedMib = reservedMib;
      a.computeMilli = computeMilli;
      a.bandwidthGBps = bandwidthGBps;
      p.gpus.push_back(a);
    }
    auto r = state_.apply(replicaPlaced(state_, p, clock_.nowMs()));
    ASSERT_TRUE(r) << r.error().message;
  }

  // Places a replica of `request` into the MIG slice chooseMigSlice picks.
  void placeMig(const std::string& replicaId, GpuId gpu, const model::PlacementRequest& request) {
    const Needs needs = deriveNeeds(request, options_);
    auto choice = chooseMigSlice(state_, gpu, request, needs);
    ASSERT_TRUE(choice);
    const model::GpuType& type = catalog_.at(state_.gpu(gpu).typeIndex);
    Placement p;
    p.replicaId = replicaId;
    p.modelName = request.model.name;
    p.deployment = request.model.name;
    p.mode = model::SharingMode::kMig;
    p.node = state_.gpu(gpu).node;
    GpuAssignment a;
    a.gpu = gpu;
    a.estimateMib = needs.estimateMib;
    a.reservedMib = type.migProfiles[static_cast<std::size_t>(choice->profileIndex)].memoryMib;
    a.migProfile = choice->profileIndex;
    a.migStart = choice->start;
    p.gpus.push_back(a);
    auto r = state_.apply(replicaPlaced(state_, p, clock_.nowMs()));
    ASSERT_TRUE(r) << r.error().message;
  }

  Needs needsOf(const model::PlacementRequest& request) const {
    return deriveNeeds(request, options_);
  }

  static Option option(NodeId node, std::vector<GpuId> gpus,
                       model::SharingMode mode = model::SharingMode::kShared) {
    Option o;
    o.node = node;
    o.mode = mode;
    o.gpuCount = static_cast<std::int8_t>(gpus.size());
    for (std::size_t i = 0; i < gpus.size(); ++i) o.gpus[i] = gpus[i];
    return o;
  }
};

}  // namespace tessera::sched::testing
