#pragma once
// Checks of placement decisions that do not trust the engine: the constraints a placement
// must respect (checkPlacement), and whether any option exists at all by the documented
// rules of the default filters (fitsByHand), written from the plugin docs rather than
// from the plugins. Plus Engines: long-lived and freshly built engines for differential
// checks. Header-only, for tests and benchmarks; see book_checks.h for the state's books.
//
// Threading: none; callers own their states and engines.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "model/mig.h"
#include "sched/engine.h"
#include "sched/mig_choice.h"
#include "sched/profile.h"
#include "sched/testing/book_checks.h"

namespace tessera::sched::testkit {

// What the engine accepts as a request at all.
inline bool requestValid(const model::PlacementRequest& r) {
  const auto& m = r.model;
  return !r.replicaId.empty() && m.gpusPerReplica >= 0 && m.gpusPerReplica <= kMaxGpusPerReplica &&
         m.weightsMib >= 0 && m.kvCacheMib >= 0 && m.overheadMib >= 0 && m.computeMilli >= 0 &&
         m.computeMilli <= 1000 && m.memoryBandwidthGBps >= 0 && m.cpuMilli >= 0 &&
         m.hostMemoryMib >= 0 && (m.sharing & model::kAllSharingModes) != 0;
}

inline bool nodeAdmits(const ClusterState& s, NodeId id, const model::PlacementRequest& r,
                       const Needs& needs) {
  const NodeRecord& n = s.node(id);
  if (n.removed || !n.spec.healthy || n.spec.cordoned) return false;
  for (const auto& [key, value] : r.nodeSelector) {
    auto it = n.spec.labels.find(key);
    if (it == n.spec.labels.end() || it->second != value) return false;
  }
  for (const model::Taint& t : n.spec.taints) {
    if (t.effect != "NoSchedule" && t.effect != "NoExecute") continue;
    if (std::none_of(r.tolerations.begin(), r.tolerations.end(),
                     [&](const model::Toleration& tol) { return tol.tolerates(t); })) {
      return false;
    }
  }
  return n.freeCpuMilli() >= needs.cpuMilli && n.freeHostMemoryMib() >= needs.hostMemoryMib;
}

inline bool typeAllowed(const ClusterState& s, GpuId g, const model::PlacementRequest& r) {
  return r.gpuTypes.empty() ||
         std::any_of(r.gpuTypes.begin(), r.gpuTypes.end(), [&](const std::string& name) {
           return s.catalog().indexOf(name) == s.gpu(g).typeIndex;
         });
}

// Checks every GPU keeps whatever the sharing mode.
inline bool gpuAdmits(const ClusterState& s, GpuId id, const model::PlacementRequest& r,
                      const Needs& needs) {
  const GpuRecord& g = s.gpu(id);
  return g.healthy() && typeAllowed(s, id, r) && !g.exclusive &&
         g.bookedComputeMilli + needs.computeMilli <= g.spec.computeMilli &&
         (g.spec.memoryBandwidthGBps <= 0 || needs.bandwidthGBps <= 0 ||
          g.bookedBandwidthGBps + needs.bandwidthGBps <= g.spec.memoryBandwidthGBps + 1e-9) &&
         (g.spec.timeSlicingReplicas <= 0 ||
          static_cast<int>(g.replicas.size()) < g.spec.timeSlicingReplicas);
}

inline bool plainGpuFits(const ClusterState& s, GpuId id, const model::PlacementRequest& r,
                         const Needs& needs) {
  const GpuRecord& g = s.gpu(id);
  const bool shared = model::allows(r.model.sharing, model::SharingMode::kShared);
  const bool exclusive = model::allows(r.model.sharing, model::SharingMode::kExclusive);
  return !g.spec.migEnabled && (shared || exclusive) && gpuAdmits(s, id, r, needs) &&
         (g.spec.memoryMib > 0 || needs.memoryMib == 0) && (shared || g.replicas.empty()) &&
         g.freeMemoryMib() >= needs.memoryMib;
}

// A MIG slice of an acceptable profile is free, or can legally be created (model/mig.h) when
// the state's options allow creating instances.
inline bool migGpuFits(const ClusterState& s, GpuId id, const model::PlacementRequest& r,
                       const Needs& needs) {
  const GpuRecord& g = s.gpu(id);
  if (!g.spec.migEnabled || !model::allows(r.model.sharing, model::SharingMode::kMig) ||
      !gpuAdmits(s, id, r, needs)) {
    return false;
  }
  const model::GpuType& type = s.catalog().at(g.typeIndex);
  auto acceptable = [&](int p) {
    return type.migProfiles[std::size_t(p)].memoryMib >= needs.memoryMib &&
           migProfileAtLeast(type, p, r.model.migProfile);
  };
  for (const MigInstance& m : g.migInstances) {
    if (m.occupant < 0 && acceptable(m.profile)) return true;
  }
  if (!s.options().migCreation) return false;  // only existing instances (EngineOptions)
  const auto layout = migLayout(g);
  for (int p = 0; p < static_cast<int>(type.migProfiles.size()); ++p) {
    if (acceptable(p) && !model::legalMigPlacements(type, p, layout).empty()) return true;
  }
  return false;
}

// Whether any node offers an option, by the documented rules of the default filters.
inline bool fitsByHand(const ClusterState& s, const model::PlacementRequest& r,
                       const Needs& needs) {
  const int k = needs.gpuCount;
  for (NodeId n = 0; n < static_cast<NodeId>(s.nodes().size()); ++n) {
    if (!nodeAdmits(s, n, r, needs)) continue;
    if (k == 0) return true;
    std::map<std::pair<int, int>, int> domains;
    for (GpuId g : s.node(n).gpuIds) {
      const auto& spec = s.gpu(g).spec;
      if (k == 1) {
        const bool numaOk = !r.model.numaAligned || spec.numaNode >= 0;
        if (numaOk && (plainGpuFits(s, g, r, needs) || migGpuFits(s, g, r, needs))) return true;
        continue;
      }
      if (!plainGpuFits(s, g, r, needs)) continue;
      if ((r.model.nvlinkRequired && spec.nvlinkGroup < 0) ||
          (r.model.numaAligned && spec.numaNode < 0)) {
        continue;
      }
      const std::pair<int, int> d{r.model.nvlinkRequired ? spec.nvlinkGroup : 0,
                                  r.model.numaAligned ? spec.numaNode : 0};
      if (++domains[d] >= k) return true;
    }
  }
  return false;
}

// What a placement must respect, whatever the scores chose.
inline void checkPlacement(const ClusterState& s, const model::PlacementRequest& r,
                           const Needs& needs, const Placement& p, Problems& out) {
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) out.push_back("placement of " + r.replicaId + ": " + what);
  };
  check(p.replicaId == r.replicaId && p.modelName == r.model.name && p.priority == r.model.priority,
        "identity fields");
  check(p.deployment == (r.deployment.empty() ? r.model.name : r.deployment), "deployment");
  check(p.cpuMilli == needs.cpuMilli && p.hostMemoryMib == needs.hostMemoryMib, "host resources");
  // (A CPU-only replica's mode means nothing.)
  check(needs.gpuCount == 0 || model::allows(r.model.sharing, p.mode),
        std::string("sharing mode ") + model::sharingModeName(p.mode) + " not among " +
            std::to_string(r.model.sharing));
  check(static_cast<int>(p.gpus.size()) == needs.gpuCount, "GPU count");
  if (p.node < 0 || std::size_t(p.node) >= s.nodes().size()) return check(false, "no such node");
  check(nodeAdmits(s, p.node, r, needs), "node health, selector, taints or resources");
  std::set<int> links, numas;
  for (const GpuAssignment& a : p.gpus) {
    const GpuRecord& g = s.gpu(a.gpu);
    const std::string where = " on " + gpuName(s, a.gpu);
    check(g.node == p.node, "GPU off the node" + where);
    check(g.healthy() && !g.exclusive, "unhealthy or exclusively held GPU" + where);
    check(typeAllowed(s, a.gpu, r), "GPU type" + where);
    check(g.bookedComputeMilli + needs.computeMilli <= g.spec.computeMilli,
          "compute " + std::to_string(g.bookedComputeMilli) + " + " +
              std::to_string(needs.computeMilli) + " > " + std::to_string(g.spec.computeMilli) +
              where);
    check(g.spec.memoryBandwidthGBps <= 0 || needs.bandwidthGBps <= 0 ||
              g.bookedBandwidthGBps + needs.bandwidthGBps <= g.spec.memoryBandwidthGBps + 1e-9,
          "bandwidth" + where);
    check(g.spec.timeSlicingReplicas <= 0 ||
              static_cast<int>(g.replicas.size()) < g.spec.timeSlicingReplicas,
          "time slicing" + where);
    check(g.spec.migEnabled == (p.mode == model::SharingMode::kMig), "MIG mode" + where);
    check(a.estimateMib == needs.estimateMib, "estimate" + where);
    links.insert(g.spec.nvlinkGroup);
    numas.insert(g.spec.numaNode);
    switch (p.mode) {
      case model::SharingMode::kShared:
        check(a.reservedMib == needs.memoryMib && a.reservedMib <= g.freeMemoryMib(),
              "memory" + where);
        check(a.computeMilli == needs.computeMilli, "compute" + where);
        break;
      case model::SharingMode::kExclusive:
        check(g.replicas.empty() && a.reservedMib >= needs.memoryMib &&
                  a.reservedMib <= g.freeMemoryMib(),
              "exclusive GPU not empty or memory" + where);
        break;
      case model::SharingMode::kMig: {
        const model::GpuType& type = s.catalog().at(g.typeIndex);
        check(p.gpus.size() == 1 && a.migProfile >= 0 &&
                  std::size_t(a.migProfile) < type.migProfiles.size(),
              "MIG profile" + where);
        if (a.migProfile < 0 || std::size_t(a.migProfile) >= type.migProfiles.size()) break;
        const auto& prof = type.migProfiles[std::size_t(a.migProfile)];
        check(prof.memoryMib >= needs.memoryMib && a.reservedMib == prof.memoryMib,
              "MIG slice memory" + where);
        check(migProfileAtLeast(type, a.migProfile, r.model.migProfile),
              "MIG profile floor" + where);
        break;
      }
    }
  }
  if (r.model.nvlinkRequired && p.gpus.size() > 1) {
    check(links.size() == 1 && *links.begin() >= 0, "NVLink group");
  }
  if (r.model.numaAligned && !p.gpus.empty()) {
    check(numas.size() == 1 && *numas.begin() >= 0, "NUMA node");
  }
  if (auto why = admissionProblem(s, p)) {
    check(false, "the books would refuse (" + *why + "): " + describePlacement(s, p));
  }
}

// Same node, mode, GPUs and booked figures.
inline bool samePlacement(const Placement& a, const Placement& b) {
  if (a.node != b.node || a.mode != b.mode || a.gpus.size() != b.gpus.size()) return false;
  for (std::size_t i = 0; i < a.gpus.size(); ++i) {
    const auto& x = a.gpus[i];
    const auto& y = b.gpus[i];
    if (std::tie(x.gpu, x.reservedMib, x.computeMilli, x.migProfile, x.migStart) !=
        std::tie(y.gpu, y.reservedMib, y.computeMilli, y.migProfile, y.migStart)) {
      return false;
    }
  }
  return true;
}

// Engines with the default profile. shared() keeps one per option set for the life of the
// pool, so it is reused across states (some at the same address) and decisions; fresh()
// builds a new one. A plugin cache that leaks between states shows up as a difference.
class Engines {
 public:
  Engines() { registerBuiltinPlugins(registry_); }
  std::unique_ptr<PlacementEngine> fresh(const EngineOptions& o) const {
    Profile profile = defaultProfile();
    profile.options = o;
    auto plugins = buildPlugins(profile, registry_);
    if (!plugins) {  // the built-in profile names only built-in plugins
      std::fprintf(stderr, "default profile: %s\n", plugins.error().message.c_str());
      std::abort();
    }
    return std::make_unique<PlacementEngine>(std::move(*plugins), o);
  }
  PlacementEngine& shared(const EngineOptions& o) {
    auto& e = pool_[{o.memorySafetyFactor, o.reservationTtlMs, static_cast<int>(o.gpuTieBreak)}];
    if (!e) e = fresh(o);
    return *e;
  }

 private:
  PluginRegistry registry_;
  std::map<std::tuple<double, Millis, int>, std::unique_ptr<PlacementEngine>> pool_;
};

}  // namespace tessera::sched::testkit
