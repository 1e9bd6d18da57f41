#pragma once
// Checks of ClusterState's books that do not trust the state: everything is recomputed from
// the public accessors (checkBooks), from the rules a placement must satisfy
// (admissionProblem), or from an independent model of the memory accounting fed the same
// events (ShadowBooks, written from the rules at the top of cluster_state.h).
//
// Each returns human-readable problems; empty means the books agree. Header-only, for tests
// and benchmarks. Threading: none; callers own their states.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "model/mig.h"
#include "sched/cluster_state.h"

namespace tessera::sched::testkit {

using Problems = std::vector<std::string>;

inline std::string gpuName(const ClusterState& s, GpuId g) {
  return s.node(s.gpu(g).node).spec.name + "/" + s.gpu(g).spec.id;
}

// The MIG layout of a GPU as model/mig.h sees it.
inline std::vector<model::MigPlacement> migLayout(const GpuRecord& g) {
  std::vector<model::MigPlacement> layout;
  for (const MigInstance& m : g.migInstances) layout.push_back({m.profile, m.start});
  return layout;
}

// One line per replica on the GPU: the figures the memory accounting works from.
inline std::string describeGpu(const ClusterState& s, GpuId gid) {
  const GpuRecord& g = s.gpu(gid);
  std::string d = gpuName(s, gid) + " capacity " + std::to_string(g.spec.memoryMib) + " foreign " +
                  std::to_string(g.foreignMib) + " free " + std::to_string(g.freeMemoryMib());
  for (ReplicaId r : g.replicas) {
    const ReplicaRecord& rec = s.replica(r);
    for (std::size_t slot = 0; slot < rec.placement.gpus.size(); ++slot) {
      const GpuAssignment& a = rec.placement.gpus[slot];
      if (a.gpu != gid) continue;
      d += "\n    " + rec.placement.replicaId + ": estimate " + std::to_string(a.estimateMib) +
           " reserved " + std::to_string(a.reservedMib) + " seen " +
           std::to_string(rec.attributedMib[slot]) + " charge " +
           std::to_string(rec.chargeMib[slot]) + (rec.reservationActive ? " active" : " lapsed") +
           (rec.phase == ReplicaPhase::kLoaded ? " loaded" : " reserved") + " placed at " +
           std::to_string(rec.placedAtMs);
    }
  }
  return d;
}

// A placement and the GPUs it names, for failure messages.
inline std::string describePlacement(const ClusterState& s, const Placement& p) {
  std::string d = p.replicaId + " " + model::sharingModeName(p.mode) + " on node " +
                  std::to_string(p.node) + ", cpu " + std::to_string(p.cpuMilli);
  for (const GpuAssignment& a : p.gpus) {
    d += "\n    gpu " + std::to_string(a.gpu) + ": estimate " + std::to_string(a.estimateMib) +
         " reserved " + std::to_string(a.reservedMib) + " compute " +
         std::to_string(a.computeMilli) + " bandwidth " + std::to_string(a.bandwidthGBps) +
         " mig " + std::to_string(a.migProfile) + "@" + std::to_string(a.migStart);
    if (a.gpu >= 0 && std::size_t(a.gpu) < s.gpus().size()) {
      const GpuRecord& g = s.gpu(a.gpu);
      d += " | " + gpuName(s, a.gpu) + " booked compute " + std::to_string(g.bookedComputeMilli) +
           "/" + std::to_string(g.spec.computeMilli) + ", " + std::to_string(g.replicas.size()) +
           " replicas, " + (g.spec.migEnabled ? "MIG, " : "") + "free " +
           std::to_string(g.freeMemoryMib()) + " MiB";
    }
  }
  return d;
}

// The largest memory a new placement could get on a GPU, from model/mig.h's legality rules:
// free memory on a plain GPU (0 when held exclusively), the largest free or legally
// creatable instance on a MIG GPU (free only, when the options forbid creating instances).
inline std::int64_t expectedPlaceableMib(const ClusterState& s, GpuId gid) {
  const GpuRecord& g = s.gpu(gid);
  if (!g.spec.migEnabled) return g.exclusive ? 0 : std::max<std::int64_t>(0, g.freeMemoryMib());
  const model::GpuType& type = s.catalog().at(g.typeIndex);
  std::int64_t best = 0;
  for (const MigInstance& m : g.migInstances) {
    if (m.occupant < 0) best = std::max(best, type.migProfiles[std::size_t(m.profile)].memoryMib);
  }
  if (!s.options().migCreation) return best;  // only existing instances (EngineOptions)
  // What can be created depends on the type and the layout only, and layouts repeat a lot.
  // Keyed by type name: custom catalogues do not share indices.
  static thread_local std::map<std::pair<std::string, std::vector<std::pair<int, int>>>,
                               std::int64_t>
      memo;
  std::vector<std::pair<int, int>> key;
  for (const MigInstance& m : g.migInstances) key.emplace_back(m.profile, m.start);
  std::sort(key.begin(), key.end());
  auto [it, fresh] = memo.try_emplace({type.name, std::move(key)}, 0);
  if (fresh) {
    const auto layout = migLayout(g);
    for (std::size_t p = 0; p < type.migProfiles.size(); ++p) {
      if (!model::legalMigPlacements(type, static_cast<int>(p), layout).empty()) {
        it->second = std::max(it->second, type.migProfiles[p].memoryMib);
      }
    }
  }
  return std::max(best, it->second);
}

// Every bookkeeping invariant, recomputed from the records.
//
// Memory is the one dimension telemetry can push past capacity after the fact: a replica
// whose reservation lapsed to its estimate, or that settled on a low reading, may later show
// more usage, in space that has meanwhile been given to another replica. The books then
// rightly show negative free memory (and take no new placement there). `usageGrew(gpu)`
// names such GPUs (ShadowBooks::usageGrew); on every other GPU the sum of
// min(charge, reserved) must stay within capacity.
inline Problems checkBooks(const ClusterState& s,
                           const std::function<bool(GpuId)>& usageGrew = nullptr) {
  Problems out;
  auto check = [&](bool ok, auto&& message) {
    if (!ok) out.push_back(message());
  };
  const auto nodes = s.nodes();
  const auto gpus = s.gpus();
  const auto reps = s.replicas();
  std::vector<std::int64_t> compute(gpus.size(), 0), memory(gpus.size(), 0),
      charged(gpus.size(), 0);
  std::vector<double> bandwidth(gpus.size(), 0);
  std::vector<std::vector<ReplicaId>> holders(gpus.size());
  std::vector<std::vector<ReplicaId>> onNode(nodes.size());
  std::vector<std::int64_t> cpu(nodes.size(), 0), host(nodes.size(), 0);
  int live = 0;
  for (std::size_t ri = 0; ri < reps.size(); ++ri) {
    const ReplicaRecord& rec = reps[ri];
    if (rec.removed) continue;
    ++live;
    const Placement& p = rec.placement;
    const auto id = static_cast<ReplicaId>(ri);
    check(s.findReplica(p.replicaId) == id,
          [&] { return "replica " + p.replicaId + ": not indexed"; });
    if (p.node < 0 || std::size_t(p.node) >= nodes.size() || s.node(p.node).removed) {
      out.push_back("replica " + p.replicaId + ": on a missing or removed node");
      continue;
    }
    onNode[std::size_t(p.node)].push_back(id);
    cpu[std::size_t(p.node)] += p.cpuMilli;
    host[std::size_t(p.node)] += p.hostMemoryMib;
    check(rec.chargeMib.size() == p.gpus.size() && rec.attributedMib.size() == p.gpus.size(),
          [&] { return "replica " + p.replicaId + ": per-GPU vectors have the wrong length"; });
    for (std::size_t slot = 0; slot < p.gpus.size() && slot < rec.chargeMib.size(); ++slot) {
      const GpuAssignment& a = p.gpus[slot];
      const auto g = std::size_t(a.gpu);
      check(s.gpu(a.gpu).node == p.node,
            [&] { return "replica " + p.replicaId + ": GPU off its node"; });
      for (std::size_t other = 0; other < slot; ++other) {
        check(p.gpus[other].gpu != a.gpu, [&] { return "replica " + p.replicaId + ": GPU twice"; });
      }
      check(s.gpu(a.gpu).spec.migEnabled == (p.mode == model::SharingMode::kMig),
            [&] { return "replica " + p.replicaId + ": MIG mode does not match the GPU"; });
      compute[g] += a.computeMilli;
      bandwidth[g] += a.bandwidthGBps;
      memory[g] += std::min(rec.chargeMib[slot], a.reservedMib);
      charged[g] += rec.chargeMib[slot];
      holders[g].push_back(id);
    }
  }
  check(live == s.liveReplicaCount(), [&] { return std::string("liveReplicaCount is wrong"); });

  int liveGpus = 0;
  std::vector<std::pair<std::int64_t, GpuId>> expectedIndex;
  std::vector<std::int64_t> nodeKey(nodes.size(), -1);
  std::vector<std::int32_t> nodeCompute(nodes.size(), -1);
  std::vector<bool> nodeHasMig(nodes.size(), false);
  for (std::size_t gi = 0; gi < gpus.size(); ++gi) {
    const GpuRecord& g = gpus[gi];
    const auto gid = static_cast<GpuId>(gi);
    const std::string name = gpuName(s, gid);
    const bool nodeLive = !s.node(g.node).removed;
    liveGpus += nodeLive ? 1 : 0;
    auto have = g.replicas;
    std::sort(have.begin(), have.end());
    check(have == holders[gi], [&] { return name + ": replica list differs from placements"; });
    check(compute[gi] == g.bookedComputeMilli, [&] { return name + ": booked compute drifted"; });
    check(compute[gi] <= g.spec.computeMilli, [&] {
      return name + ": compute over-committed (" + std::to_string(compute[gi]) + " > " +
             std::to_string(g.spec.computeMilli) + ")";
    });
    check(g.spec.memoryBandwidthGBps <= 0 || bandwidth[gi] <= g.spec.memoryBandwidthGBps + 1e-6,
          [&] { return name + ": bandwidth over-committed"; });
    check(charged[gi] == g.chargedMib, [&] { return name + ": charged memory drifted"; });
    check(g.spec.migEnabled || memory[gi] <= g.spec.memoryMib || (usageGrew && usageGrew(gid)),
          [&] {
            return name + ": memory over-committed: sum of min(charge, reserved) " +
                   std::to_string(memory[gi]) + " MiB > " + std::to_string(g.spec.memoryMib) +
                   " MiB; " + describeGpu(s, gid);
          });
    bool holdsExclusive = false;
    for (ReplicaId r : holders[gi]) {
      holdsExclusive |= s.replica(r).placement.mode == model::SharingMode::kExclusive;
    }
    check(g.exclusive == holdsExclusive, [&] { return name + ": exclusive flag is wrong"; });
    check(!g.exclusive || holders[gi].size() == 1,
          [&] { return name + ": exclusive GPU does not hold exactly one replica"; });
    check(g.spec.timeSlicingReplicas <= 0 ||
              static_cast<int>(holders[gi].size()) <= g.spec.timeSlicingReplicas,
          [&] { return name + ": time-slicing limit exceeded"; });
    if (g.spec.migEnabled) {
      const model::GpuType& type = s.catalog().at(g.typeIndex);
      const auto layout = migLayout(g);
      if (auto legal = model::checkMigLayout(type, layout); !legal) {
        out.push_back(name + ": illegal MIG layout: " + legal.error().message);
      } else {
        check(model::migSliceMask(type, layout) == g.migSlotsUsed,
              [&] { return name + ": MIG slot mask drifted"; });
      }
      for (const MigInstance& m : g.migInstances) {
        check(!m.dynamic || m.occupant >= 0,
              [&] { return name + ": a created instance outlived its replica"; });
        if (m.occupant < 0) continue;
        const bool ok = std::any_of(holders[gi].begin(), holders[gi].end(), [&](ReplicaId r) {
          if (r != m.occupant) return false;
          for (const auto& a : s.replica(r).placement.gpus) {
            if (a.gpu == gid) return a.migProfile == m.profile && a.migStart == m.start;
          }
          return false;
        });
        check(ok, [&] { return name + ": a MIG instance's occupant does not hold that slice"; });
      }
      for (ReplicaId r : holders[gi]) {
        const auto n = std::count_if(g.migInstances.begin(), g.migInstances.end(),
                                     [&](const MigInstance& m) { return m.occupant == r; });
        check(n == 1, [&] {
          return name + ": a MIG replica occupies " + std::to_string(n) + " instances";
        });
      }
    } else {
      check(g.migInstances.empty() && g.migSlotsUsed == 0,
            [&] { return name + ": MIG instances on a plain GPU"; });
    }
    if (!nodeLive) {
      check(holders[gi].empty(), [&] { return name + ": replicas on a removed node"; });
      check(s.indexedPlaceableMib(gid) == -1, [&] { return name + ": removed, still indexed"; });
      continue;
    }
    const std::int64_t placeable = expectedPlaceableMib(s, gid);
    const std::int64_t stated = s.placeableMemoryMib(gid);
    check(placeable == stated, [&] {
      return name + ": placeable memory " + std::to_string(stated) + " MiB, expected " +
             std::to_string(placeable);
    });
    // The capacity keys the engine skips GPUs and nodes by (a stale key hides capacity).
    const std::int64_t key = g.healthy() ? placeable : -1;
    check(s.indexedPlaceableMib(gid) == key, [&] {
      return name + ": capacity key " + std::to_string(s.indexedPlaceableMib(gid)) + ", expected " +
             std::to_string(key);
    });
    if (key < 0) continue;
    expectedIndex.emplace_back(key, gid);
    nodeKey[std::size_t(g.node)] = std::max(nodeKey[std::size_t(g.node)], key);
    nodeCompute[std::size_t(g.node)] =
        std::max(nodeCompute[std::size_t(g.node)], g.freeComputeMilli());
    nodeHasMig[std::size_t(g.node)] = nodeHasMig[std::size_t(g.node)] || g.spec.migEnabled;
  }
  check(liveGpus == s.liveGpuCount(), [&] { return std::string("liveGpuCount is wrong"); });
  std::sort(expectedIndex.begin(), expectedIndex.end());
  std::vector<std::pair<std::int64_t, GpuId>> index;
  s.forEachGpuWithPlaceableMemory(0, [&](GpuId g) {
    index.emplace_back(s.indexedPlaceableMib(g), g);
    return true;
  });
  check(index == expectedIndex, [&] { return std::string("capacity index order is wrong"); });

  int liveNodes = 0;
  for (std::size_t ni = 0; ni < nodes.size(); ++ni) {
    const NodeRecord& n = nodes[ni];
    const auto nid = static_cast<NodeId>(ni);
    if (n.removed) {
      check(onNode[ni].empty() && n.replicas.empty(),
            [&] { return n.spec.name + ": removed with replicas"; });
      check(s.nodePlaceableMib(nid) == -1,
            [&] { return n.spec.name + ": removed, still indexed"; });
      continue;
    }
    ++liveNodes;
    check(s.nodePlaceableMib(nid) == nodeKey[ni], [&] {
      return n.spec.name + ": node capacity key " + std::to_string(s.nodePlaceableMib(nid)) +
             ", expected " + std::to_string(nodeKey[ni]);
    });
    // An upper bound on any healthy GPU's free compute; exact without MIG cards.
    check(s.nodeMaxFreeComputeMilli(nid) >= nodeCompute[ni] &&
              (nodeHasMig[ni] || s.nodeMaxFreeComputeMilli(nid) == nodeCompute[ni]),
          [&] {
            return n.spec.name + ": node compute key " +
                   std::to_string(s.nodeMaxFreeComputeMilli(nid)) + ", largest free " +
                   std::to_string(nodeCompute[ni]);
          });
    check(s.findNode(n.spec.name) == static_cast<NodeId>(ni),
          [&] { return n.spec.name + ": not indexed"; });
    auto have = n.replicas;
    std::sort(have.begin(), have.end());
    check(have == onNode[ni],
          [&] { return n.spec.name + ": replica list differs from placements"; });
    check(cpu[ni] == n.bookedCpuMilli && cpu[ni] <= n.spec.cpuMilli,
          [&] { return n.spec.name + ": CPU books wrong or over-committed"; });
    check(host[ni] == n.bookedHostMemoryMib && host[ni] <= n.spec.hostMemoryMib,
          [&] { return n.spec.name + ": host memory books wrong or over-committed"; });
  }
  check(liveNodes == s.liveNodeCount(), [&] { return std::string("liveNodeCount is wrong"); });
  return out;
}

// Why the books must refuse `p` in state `s` (nullopt: it must be accepted), from the rules
// a placement keeps: nothing over-committed, MIG slices legal (model/mig.h), exclusive and
// time-sliced GPUs respected, healthy GPUs of one live node.
inline std::optional<std::string> admissionProblem(const ClusterState& s, const Placement& p) {
  if (p.replicaId.empty()) return "empty replica id";
  if (s.findReplica(p.replicaId)) return "replica id taken";
  if (p.node < 0 || std::size_t(p.node) >= s.nodes().size() || s.node(p.node).removed) {
    return "no such node";
  }
  const NodeRecord& n = s.node(p.node);
  if (p.cpuMilli < 0 || p.hostMemoryMib < 0) return "negative host resources";
  if (p.cpuMilli > n.freeCpuMilli() || p.hostMemoryMib > n.freeHostMemoryMib()) {
    return "node CPU or host memory";
  }
  if (p.gpus.size() > std::size_t(kMaxGpusPerReplica)) return "too many GPUs";
  std::set<GpuId> seen;
  for (const GpuAssignment& a : p.gpus) {
    if (a.gpu < 0 || std::size_t(a.gpu) >= s.gpus().size() || s.gpu(a.gpu).node != p.node) {
      return "GPU not on the node";
    }
    if (!seen.insert(a.gpu).second) return "GPU twice";
    const GpuRecord& g = s.gpu(a.gpu);
    if (a.reservedMib < 0 || a.estimateMib < 0 || a.computeMilli < 0 || a.bandwidthGBps < 0) {
      return "negative amount";
    }
    if (!g.healthy()) return "unhealthy GPU";
    if (g.exclusive) return "GPU held exclusively";
    if (p.mode == model::SharingMode::kExclusive && !g.replicas.empty()) {
      return "exclusive on a used GPU";
    }
    if (g.spec.timeSlicingReplicas > 0 &&
        static_cast<int>(g.replicas.size()) >= g.spec.timeSlicingReplicas) {
      return "time-slicing limit";
    }
    if (g.bookedComputeMilli + a.computeMilli > g.spec.computeMilli) return "compute";
    if (g.spec.memoryBandwidthGBps > 0 &&
        g.bookedBandwidthGBps + a.bandwidthGBps > g.spec.memoryBandwidthGBps + 1e-9) {
      return "bandwidth";
    }
    if (g.spec.migEnabled != (p.mode == model::SharingMode::kMig)) return "MIG mode mismatch";
    if (g.spec.migEnabled) {
      const model::GpuType& type = s.catalog().at(g.typeIndex);
      if (a.migProfile < 0 || std::size_t(a.migProfile) >= type.migProfiles.size()) {
        return "no such MIG profile";
      }
      const bool freeInstance =
          std::any_of(g.migInstances.begin(), g.migInstances.end(), [&](const MigInstance& m) {
            return m.profile == a.migProfile && m.start == a.migStart && m.occupant < 0;
          });
      const auto legal = model::legalMigPlacements(type, a.migProfile, migLayout(g));
      const bool creatable =
          s.options().migCreation &&
          std::find(legal.begin(), legal.end(), model::MigPlacement{a.migProfile, a.migStart}) !=
              legal.end();
      if (!freeInstance && !creatable) return "MIG slice not available";
      if (a.reservedMib > type.migProfiles[std::size_t(a.migProfile)].memoryMib) {
        return "more than the MIG slice";
      }
    } else if (a.reservedMib > g.freeMemoryMib()) {
      return "memory";
    }
  }
  return std::nullopt;
}

// A hash of everything an event may change: a refused event must leave it as it was.
inline std::uint64_t booksFingerprint(const ClusterState& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the raw values
  auto mix = [&](std::uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ (v & 0xff)) * 0x100000001b3ULL;
  };
  auto add = [&](const auto& v) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, std::string>) {
      for (char c : v) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
      mix(v.size());
    } else if constexpr (std::is_floating_point_v<T>) {
      mix(std::bit_cast<std::uint64_t>(static_cast<double>(v)));
    } else {
      mix(static_cast<std::uint64_t>(v));
    }
  };
  for (const NodeRecord& n : s.nodes()) {
    add(n.spec.name), add(n.removed), add(n.rank), add(n.generation), add(n.bookedCpuMilli);
    add(n.bookedHostMemoryMib), add(n.spec.cpuMilli), add(n.spec.hostMemoryMib);
    add(n.spec.healthy), add(n.spec.cordoned), add(n.spec.taints.size());
    for (const auto& [k, v] : n.spec.labels) add(k), add(v);
    for (ReplicaId r : n.replicas) add(r);
  }
  for (const GpuRecord& g : s.gpus()) {
    add(g.chargedMib), add(g.foreignMib), add(g.bookedComputeMilli), add(g.bookedBandwidthGBps);
    add(g.exclusive), add(g.migSlotsUsed), add(g.hasTelemetry), add(g.telemetryUsedMib);
    add(g.utilizationMilli), add(g.telemetryAtMs), add(g.spec.healthy);
    add(g.spec.timeSlicingReplicas), add(g.spec.memoryBandwidthGBps), add(g.spec.numaNode);
    add(g.spec.nvlinkGroup);
    for (const MigInstance& m : g.migInstances) {
      add(m.profile), add(m.start), add(m.occupant), add(m.dynamic);
    }
    for (ReplicaId r : g.replicas) add(r);
  }
  for (const ReplicaRecord& r : s.replicas()) {
    add(r.placement.replicaId), add(r.removed), add(static_cast<int>(r.phase));
    add(r.reservationActive), add(r.placedAtMs), add(r.lastActiveMs);
    for (auto c : r.chargeMib) add(c);
    for (auto a : r.attributedMib) add(a);
  }
  add(s.generation()), add(s.liveNodeCount()), add(s.liveGpuCount()), add(s.liveReplicaCount());
  add(s.activeReservationCount()), add(s.nextReservationExpiryMs().value_or(-1));
  return h;
}

// An independent model of reservations and memory charges, fed every event the state
// accepted. Events name nodes, GPUs and replicas; the model resolves a GPU's name to its
// index once, when its node is added, and checks the state still agrees.
class ShadowBooks {
 public:
  explicit ShadowBooks(const EngineOptions& options) : ttlMs_(options.reservationTtlMs) {}

  // `after` is the state after it accepted `event`; times come from the event.
  void onApplied(const ClusterState& after, const Event& event) {
    std::visit([&](const auto& ev) { on(after, ev); }, event);
  }

  // Whether telemetry raised the GPU's usage since its last placement (see checkBooks).
  bool usageGrew(GpuId gpu) const {
    auto it = gpus_.find(gpu);
    return it != gpus_.end() && it->second.usageGrew;
  }

  Problems compare(const ClusterState& s) const {
    Problems out;
    int active = 0;
    std::optional<Millis> next;
    std::map<GpuId, std::int64_t> charged;
    for (const auto& [id, r] : replicas_) {
      auto rid = s.findReplica(id);
      if (!rid) {
        out.push_back("replica " + id + " is missing from the state");
        continue;
      }
      const ReplicaRecord& rec = s.replica(*rid);
      if (r.active) {
        ++active;
        next = std::min(next.value_or(r.placedAtMs + ttlMs_), r.placedAtMs + ttlMs_);
      }
      if (rec.reservationActive != r.active) {
        out.push_back("replica " + id + ": reservation " +
                      (rec.reservationActive ? "active" : "lapsed") + ", expected " +
                      (r.active ? "active" : "lapsed") + " (placed at " +
                      std::to_string(r.placedAtMs) + ", ttl " + std::to_string(ttlMs_) + ")");
      }
      if ((rec.phase == ReplicaPhase::kLoaded) != r.loaded) {
        out.push_back("replica " + id + ": phase");
      }
      if (rec.placedAtMs != r.placedAtMs || rec.lastActiveMs != r.lastActiveMs) {
        out.push_back("replica " + id + ": placement or activity time");
      }
      for (std::size_t slot = 0; slot < r.assignments.size(); ++slot) {
        const std::int64_t want = charge(r, slot);
        charged[r.assignments[slot].gpu] += want;
        if (slot >= rec.chargeMib.size() || rec.chargeMib[slot] != want) {
          out.push_back("replica " + id + " on " + gpuName(s, r.assignments[slot].gpu) +
                        ": charge " +
                        (slot < rec.chargeMib.size() ? std::to_string(rec.chargeMib[slot]) : "?") +
                        " MiB, expected " + std::to_string(want));
        }
      }
    }
    if (static_cast<int>(replicas_.size()) != s.liveReplicaCount()) {
      out.push_back("live replicas " + std::to_string(s.liveReplicaCount()) + ", expected " +
                    std::to_string(replicas_.size()));
    }
    if (active != s.activeReservationCount()) out.push_back("active reservation count");
    if (next != s.nextReservationExpiryMs()) out.push_back("next reservation expiry");
    for (const auto& [gid, g] : gpus_) {
      const GpuRecord& rec = s.gpu(gid);
      if (s.node(rec.node).removed || s.node(rec.node).spec.name != g.node || rec.spec.id != g.id) {
        out.push_back("GPU " + g.node + "/" + g.id + " is missing");
        continue;
      }
      const std::int64_t free = g.capacityMib - g.foreignMib - charged[gid];
      if (rec.foreignMib != g.foreignMib || rec.freeMemoryMib() != free ||
          rec.healthy() != g.healthy) {
        out.push_back("GPU " + g.node + "/" + g.id + ": free " +
                      std::to_string(rec.freeMemoryMib()) + " MiB (foreign " +
                      std::to_string(rec.foreignMib) + "), expected " + std::to_string(free) +
                      " (foreign " + std::to_string(g.foreignMib) + ")");
      }
      // Every placement fits what is free, and only telemetry raises a charge afterwards.
      if (!g.usageGrew && rec.freeMemoryMib() < 0) {
        out.push_back("GPU " + g.node + "/" + g.id + " is over-committed (free " +
                      std::to_string(rec.freeMemoryMib()) +
                      " MiB) although no telemetry raised its usage since its last placement");
      }
    }
    return out;
  }

 private:
  struct Replica {
    std::string node;
    std::vector<GpuAssignment> assignments;
    bool mig = false;
    bool exclusive = false;
    std::vector<std::int64_t> cardMib;  // per slot: the GPU's capacity
    Millis placedAtMs = 0;
    Millis lastActiveMs = 0;
    bool loaded = false;
    bool active = true;
    std::vector<std::int64_t> seenMib;  // -1: not named by the GPU's last telemetry
  };
  struct Gpu {
    std::string node, id;
    std::int64_t capacityMib = 0;
    std::int64_t foreignMib = 0;
    bool healthy = true;
    bool mig = false;
    bool usageGrew = false;  // telemetry raised foreign + charges since the last placement
  };

  // The accounting rules of cluster_state.h, restated.
  static std::int64_t charge(const Replica& r, std::size_t slot) {
    const GpuAssignment& a = r.assignments[slot];
    if (r.mig) return a.reservedMib;
    if (r.exclusive) return std::max(a.reservedMib, r.cardMib[slot]);  // held whole
    if (r.active) return std::max(a.reservedMib, r.seenMib[slot]);
    if (r.seenMib[slot] >= 0) return r.seenMib[slot];
    return a.estimateMib;
  }
  static void settle(Replica& r) {
    if (r.active && r.loaded &&
        std::all_of(r.seenMib.begin(), r.seenMib.end(), [](std::int64_t v) { return v >= 0; })) {
      r.active = false;
    }
  }
  std::int64_t usedMib(GpuId gpu) const {
    std::int64_t used = gpus_.at(gpu).foreignMib;
    for (const auto& [id, r] : replicas_) {
      for (std::size_t slot = 0; slot < r.assignments.size(); ++slot) {
        if (r.assignments[slot].gpu == gpu) used += charge(r, slot);
      }
    }
    return used;
  }

  void on(const ClusterState& s, const NodeAdded& ev) {
    for (const auto& spec : ev.node.gpus) {
      Gpu g;
      g.node = ev.node.name;
      g.id = spec.id;
      const auto* type = s.catalog().find(spec.type);
      g.capacityMib = spec.memoryMib > 0 ? spec.memoryMib : type->memoryMib.value_or(0);
      g.healthy = spec.healthy;
      g.mig = spec.migEnabled;
      gpus_[*s.findGpu(ev.node.name, spec.id)] = g;
    }
  }
  void on(const ClusterState& s, const NodeUpdated& ev) {
    for (const auto& spec : ev.node.gpus) {
      gpus_.at(*s.findGpu(ev.node.name, spec.id)).healthy = spec.healthy;
    }
  }
  void on(const ClusterState& s, const NodePatched& ev) {
    for (const auto& [id, healthy] : ev.gpuHealthy)
      gpus_.at(*s.findGpu(ev.name, id)).healthy = healthy;
  }
  void on(const ClusterState&, const NodeRemoved& ev) {
    std::erase_if(gpus_, [&](const auto& kv) { return kv.second.node == ev.name; });
    std::erase_if(replicas_, [&](const auto& kv) { return kv.second.node == ev.name; });
  }
  void on(const ClusterState& s, const GpuTelemetry& ev) {
    const GpuId gid = *s.findGpu(ev.node, ev.gpuId);
    const std::int64_t before = usedMib(gid);
    Gpu& g = gpus_.at(gid);
    g.healthy = ev.healthy;
    std::int64_t attributed = 0;
    for (auto& [id, r] : replicas_) {
      for (std::size_t slot = 0; slot < r.assignments.size(); ++slot) {
        if (r.assignments[slot].gpu != gid) continue;
        auto it = ev.replicaUsedMib.find(id);
        r.seenMib[slot] = it == ev.replicaUsedMib.end() ? -1 : it->second;
        if (it != ev.replicaUsedMib.end()) attributed += it->second;
        settle(r);
      }
    }
    const bool exclusive = std::any_of(replicas_.begin(), replicas_.end(), [&](const auto& kv) {
      const Replica& r = kv.second;
      return r.exclusive && std::any_of(r.assignments.begin(), r.assignments.end(),
                                        [&](const GpuAssignment& a) { return a.gpu == gid; });
    });
    g.foreignMib = g.mig || exclusive ? 0 : std::max<std::int64_t>(0, ev.usedMib - attributed);
    if (usedMib(gid) > before) g.usageGrew = true;
  }
  void on(const ClusterState& s, const ReplicaPlaced& ev) {
    Replica r;
    r.node = ev.placement.node;
    r.assignments = s.resolve(ev.placement)->gpus;  // accepted, so its names resolve
    r.seenMib.assign(r.assignments.size(), -1);
    r.mig = ev.placement.mode == model::SharingMode::kMig;
    r.exclusive = ev.placement.mode == model::SharingMode::kExclusive;
    r.placedAtMs = r.lastActiveMs = ev.atMs;
    for (const auto& a : r.assignments) {
      Gpu& g = gpus_.at(a.gpu);
      g.usageGrew = false;
      r.cardMib.push_back(g.capacityMib);
      if (r.exclusive) g.foreignMib = 0;
    }
    replicas_[ev.placement.replicaId] = std::move(r);
  }
  void on(const ClusterState& s, const ReplicaRestored& ev) {
    on(s, ReplicaPlaced{ev.placement, ev.placedAtMs});
    Replica& r = replicas_.at(ev.placement.replicaId);
    r.active = ev.reservationActive && ev.placedAtMs + ttlMs_ > ev.atMs;
    r.loaded = ev.loaded;
    if (!ev.attributedMib.empty()) r.seenMib = ev.attributedMib;
    settle(r);
    // Restored without a memory check: it may over-commit, as telemetry may.
    for (const auto& a : r.assignments) gpus_.at(a.gpu).usageGrew = true;
  }
  void on(const ClusterState&, const ReplicaLoaded& ev) {
    Replica& r = replicas_.at(ev.replicaId);
    r.loaded = true;
    settle(r);
  }
  void on(const ClusterState&, const ReplicaUnloaded& ev) { replicas_.erase(ev.replicaId); }
  void on(const ClusterState&, const ReplicaActivity& ev) {
    Replica& r = replicas_.at(ev.replicaId);
    r.lastActiveMs = std::max(r.lastActiveMs, ev.atMs);
  }
  void on(const ClusterState&, const ReservationsExpired& ev) {
    for (auto& [id, r] : replicas_) {
      if (r.active && r.placedAtMs + ttlMs_ <= ev.nowMs) r.active = false;
    }
  }

  Millis ttlMs_;
  std::map<std::string, Replica> replicas_;
  std::map<GpuId, Gpu> gpus_;  // GPUs of live nodes
};

}  // namespace tessera::sched::testkit
