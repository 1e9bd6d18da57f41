// The random cases of the placement invariant tests (invariants_test.cc): random clusters
// driven by random event streams, every event followed by ClusterState::checkInvariants and
// by independent checks that recompute the books and model the memory accounting by hand
// (testing/book_checks.h); every decision checked against the request's constraints, a
// hand-written oracle and a node-by-node search when nothing fits (testing/decision_checks.h).
//
// Each test prints its master seed; TESSERA_SEED=<seed> runs it again. A failure names its
// case's seed, which reproduces that case alone with TESSERA_FUZZ_ITERATIONS=1.
// TESSERA_FUZZ_ITERATIONS=<n> runs n cases per test instead of the default (a few hundred in
// all, sized for a Debug+ASan build on one slow core); use thousands for a soak.

#include "sched/invariant_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/gpu_catalog.h"
#include "sched/engine.h"
#include "sched/testing/book_checks.h"
#include "sched/testing/decision_checks.h"
#include "sched/testing/random_cluster.h"

namespace tessera::sched::invariants {
namespace {

using testkit::checkPlacement;
using testkit::Engines;
using testkit::fitsByHand;
using testkit::Problems;
using testkit::requestValid;
using testkit::Rng;
using testkit::samePlacement;

std::uint64_t announceSeed(const char* test) {
  const std::uint64_t seed = testkit::fuzzSeed();
  std::cout << "[   SEED   ] " << test << ": TESSERA_SEED=" << seed << std::endl;
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

// ---- One random case: a cluster and a stream of events ----------------------------------------

class Case {
 public:
  Case(const model::GpuCatalog& catalog, Engines& engines, std::uint64_t seed,
       const testkit::ClusterShape& clusterShape, const testkit::RequestShape& requestShape,
       Coverage& coverage)
      : rng_(seed),
        coverage_(coverage),
        catalog_(catalog),
        engines_(engines),
        clusterShape_(clusterShape),
        requestShape_(requestShape),
        options_(randomOptions(rng_, seed)),
        clock_(rng_.between(0, 1'000'000)),
        state_(catalog, clock_, options_),
        shadow_(options_),
        engine_(engines.shared(options_)) {
    for (const auto& n : testkit::randomCluster(rng_, catalog, clusterShape)) {
      expectApplied(NodeAdded{n});
      specs_[n.name] = n;
    }
    const int deployments = static_cast<int>(rng_.between(2, 8));
    for (int i = 0; i < deployments; ++i) {
      deployments_.push_back(
          testkit::randomDeployment(rng_, catalog, "m" + std::to_string(i), requestShape));
    }
    verify();
  }

  // One random step, then every check. Problems accumulate; the caller stops at the first.
  void step(const Mix& m) {
    std::vector<bool> active;
    for (const auto& r : state_.replicas()) active.push_back(!r.removed && r.reservationActive);
    switch (rng_.weighted({m.place, m.handPlace, m.loaded, m.unloaded, m.activity, m.telemetry,
                           m.clock, m.nodeUpdate, m.nodeRemove, m.nodeAdd, m.eviction, m.batch})) {
      case 0:
        placeWithEngine();
        break;
      case 1:
        placeByHand();
        break;
      case 2:
        replicaEvent<ReplicaLoaded>();
        break;
      case 3:
        replicaEvent<ReplicaUnloaded>();
        break;
      case 4:
        replicaEvent<ReplicaActivity>();
        break;
      case 5:
        telemetry();
        break;
      case 6:
        advanceClock();
        break;
      case 7:
        updateNode();
        break;
      case 8:
        removeNode();
        break;
      case 9:
        addNode();
        break;
      case 10:
        eviction();
        break;
      default:
        batch();
        break;
    }
    for (std::size_t i = 0; i < active.size(); ++i) {
      const ReplicaRecord& r = state_.replicas()[i];
      if (!active[i] || r.removed || r.reservationActive) continue;
      const Millis expiry = r.placedAtMs + options_.reservationTtlMs;
      if (clock_.nowMs() == expiry) ++coverage_.lapsedAtTtl;
      if (clock_.nowMs() < expiry) ++coverage_.settledEarly;
    }
    verify();
  }

  const Problems& problems() const { return problems_; }
  const std::string& lastStep() const { return last_; }

 private:
  static EngineOptions randomOptions(Rng& rng, std::uint64_t seed) {
    EngineOptions o;
    static const std::vector<double> kFactors = {1.0, 1.1, 1.2, 1.5};
    static const std::vector<Millis> kTtls = {1, 500, 30'000};
    o.memorySafetyFactor = rng.pick(kFactors);
    o.reservationTtlMs = rng.pick(kTtls);
    o.gpuTieBreak = rng.chance(0.5) ? GpuTieBreak::kBestFit : GpuTieBreak::kIndex;
    // A quarter of the cases without MIG instance creation (GPU mode dra), taken from the seed
    // rather than the stream so that every other draw of a seed stays what it was.
    std::uint64_t x = seed;
    o.migCreation = testkit::splitmix64(x) % 4 != 0;
    return o;
  }

  void problem(std::string what) { problems_.push_back(std::move(what)); }
  std::function<bool(GpuId)> usageGrew() const {
    return [this](GpuId g) { return shadow_.usageGrew(g); };
  }
  // checkInvariants reports telemetry that outgrew the books as memory over-commit (see
  // checkBooks and DISABLED_UsageGrowthAfterALapseIsNotABookkeepingError). That one report is
  // let through on exactly the GPUs where telemetry raised usage since their last placement;
  // checkBooks covers every other invariant the report may hide.
  bool knownMemoryReport(const std::string& message) const {
    for (GpuId g = 0; g < static_cast<GpuId>(state_.gpus().size()); ++g) {
      if (!state_.node(state_.gpu(g).node).removed && shadow_.usageGrew(g) &&
          message == testkit::gpuName(state_, g) + ": memory over-committed") {
        ++coverage_.usageGrew;
        return true;
      }
    }
    return false;
  }
  void verify() {
    if (auto ok = state_.checkInvariants(); !ok && !knownMemoryReport(ok.error().message)) {
      problem("checkInvariants: " + ok.error().message);
    }
    for (auto& p : testkit::checkBooks(state_, usageGrew())) problem(std::move(p));
    for (auto& p : shadow_.compare(state_)) problem("accounting model: " + p);
  }
  // Applies an event that must be accepted.
  void expectApplied(const Event& e) {
    if (auto ok = state_.apply(e); !ok) {
      return problem(std::string(eventName(e)) + " refused: " + ok.error().message);
    }
    shadow_.onApplied(state_, e);
  }
  // Applies an event that may be refused; a refused event must change nothing.
  bool applyOrUnchanged(const Event& e) {
    const std::uint64_t before = testkit::booksFingerprint(state_);
    if (auto ok = state_.apply(e); !ok) {
      ++coverage_.refusedEvents;
      if (testkit::booksFingerprint(state_) != before) {
        problem(std::string(eventName(e)) + " was refused (" + ok.error().message +
                ") but changed the state");
      }
      return false;
    }
    shadow_.onApplied(state_, e);
    return true;
  }

  std::vector<std::string> liveReplicaIds() const { return testkit::liveReplicaIds(state_); }
  std::vector<NodeId> liveNodes() const { return testkit::liveNodes(state_); }

  model::PlacementRequest newRequest() {
    model::PlacementRequest r =
        rng_.chance(0.1) ? testkit::randomDeployment(
                               rng_, catalog_, "once" + std::to_string(nextId_), requestShape_)
                         : rng_.pick(deployments_);
    r.replicaId = "r" + std::to_string(nextId_++);
    return r;
  }

  // Checks a decision against the request, the hand-written oracle, a brute-force search
  // node by node, and a freshly built engine.
  void checkDecision(const ClusterState& s, const model::PlacementRequest& r, const Decision& d) {
    if (!requestValid(r)) {
      if (d.placement || d.summary.rfind("invalid request", 0) != 0) {
        problem("invalid request " + r.replicaId + " was not refused as invalid: " + d.summary);
      }
      return;
    }
    const Needs needs = deriveNeeds(r, options_);
    const bool byHand = fitsByHand(s, r, needs);
    DecideOptions quiet;
    quiet.explainFailures = false;
    if (d.placement) {
      checkPlacement(s, r, needs, *d.placement, problems_);
      if (!byHand) {
        problem("engine placed " + r.replicaId + " where the hand oracle finds no option");
      }
      quiet.onlyNode = d.placement->node;
      if (!engine_.decide(s, r, quiet).placement) {
        problem("engine placed " + r.replicaId + " on a node where onlyNode finds nothing");
      }
    } else {
      if (d.summary.empty()) problem("no placement and no summary for " + r.replicaId);
      if (byHand) {
        problem("engine found no option for " + r.replicaId + " but one exists: " + d.summary);
      }
      for (NodeId n : liveNodes()) {
        quiet.onlyNode = n;
        if (engine_.decide(s, r, quiet).placement) {
          problem("engine found nothing for " + r.replicaId + " but onlyNode " +
                  s.node(n).spec.name + " finds a placement");
        }
      }
    }
    if (!rng_.chance(0.5)) return;
    const Decision again = engines_.fresh(options_)->decide(s, r);
    if (again.placement.has_value() != d.placement.has_value() ||
        (d.placement &&
         (!samePlacement(*again.placement, *d.placement) || again.totalScore != d.totalScore))) {
      problem("a freshly built engine decides " + r.replicaId + " differently from a reused one");
    }
  }

  void placeWithEngine() {
    const model::PlacementRequest r = newRequest();
    last_ = "place " + r.replicaId + " (" + r.model.name + ")";
    const Decision d = engine_.decide(state_, r);
    checkDecision(state_, r, d);
    if (d.placement) {
      ++coverage_.placed;
      coverage_.placedMig += d.placement->mode == model::SharingMode::kMig;
      coverage_.placedExclusive += d.placement->mode == model::SharingMode::kExclusive;
      coverage_.placedMultiGpu += d.placement->gpus.size() > 1;
      if (fitted_.size() < 16) fitted_.push_back(r);
      expectApplied(replicaPlaced(state_, *d.placement, clock_.nowMs()));
    } else {
      coverage_.unplaceable += requestValid(r);
    }
  }

  // A placement made up by hand: the books accept it exactly when the rules allow it.
  void placeByHand() {
    const auto nodes = liveNodes();
    if (nodes.empty()) return;
    Placement p;
    const auto ids = liveReplicaIds();
    p.replicaId =
        rng_.chance(0.05) && !ids.empty() ? rng_.pick(ids) : "h" + std::to_string(nextId_++);
    p.deployment = p.modelName = "hand";
    p.node = rng_.pick(nodes);
    p.mode = static_cast<model::SharingMode>(1 << rng_.upTo(2));
    const auto& gpus = state_.node(p.node).gpuIds;
    const int k = gpus.empty() ? 0 : rng_.upTo(std::min<int>(3, static_cast<int>(gpus.size())));
    for (int i = 0; i < k; ++i) {
      GpuAssignment a;
      a.gpu = rng_.pick(gpus);
      const GpuRecord& g = state_.gpu(a.gpu);
      if (g.spec.migEnabled && rng_.chance(0.9)) p.mode = model::SharingMode::kMig;
      a.estimateMib = rng_.between(0, std::max<std::int64_t>(g.spec.memoryMib / 2, 1));
      a.reservedMib = a.estimateMib * rng_.between(100, 150) / 100;
      a.computeMilli = static_cast<std::int32_t>(rng_.between(0, 600));
      a.bandwidthGBps = rng_.chance(0.5) ? 0.0 : static_cast<double>(rng_.between(0, 1500));
      if (g.spec.migEnabled) {
        const auto& type = catalog_.at(g.typeIndex);
        a.migProfile =
            static_cast<std::int16_t>(rng_.upTo(static_cast<int>(type.migProfiles.size()) - 1));
        const auto& prof = type.migProfiles[std::size_t(a.migProfile)];
        a.migStart = static_cast<std::int8_t>(rng_.pick(prof.allowedStarts));
        a.reservedMib = rng_.chance(0.9) ? prof.memoryMib : prof.memoryMib + 1;
        a.estimateMib = std::min(a.estimateMib, a.reservedMib);
        // A slice books its share of the SMs, as placementFor does (see
        // DISABLED_MigSliceComputeIsCheckedAsBooked for what other figures do).
        a.computeMilli = prof.computeSlices * g.spec.computeMilli / model::migComputeSlices(type);
      }
      if (rng_.chance(0.02)) a.computeMilli = -1;
      p.gpus.push_back(a);
    }
    p.cpuMilli = rng_.chance(0.5) ? 0 : rng_.between(0, 8'000);
    p.hostMemoryMib = rng_.chance(0.5) ? 0 : rng_.between(0, 64 * 1024);
    last_ = "hand placement " + p.replicaId + " on " + state_.node(p.node).spec.name;
    const auto why = testkit::admissionProblem(state_, p);
    const bool accepted = applyOrUnchanged(replicaPlaced(state_, p, clock_.nowMs()));
    ++(accepted ? coverage_.handAccepted : coverage_.handRefused);
    if (accepted && why) problem("the books accepted a placement that breaks a rule: " + *why);
    if (!accepted && !why) problem("the books refused an admissible placement " + p.replicaId);
  }

  template <typename E>
  void replicaEvent() {
    const auto ids = liveReplicaIds();
    E e;
    e.replicaId = ids.empty() || rng_.chance(0.1) ? "ghost" : rng_.pick(ids);
    if constexpr (std::is_same_v<E, ReplicaActivity>) {
      e.atMs = clock_.nowMs() + rng_.between(-1000, 1000);
    }
    last_ = std::string(eventName(e)) + " " + e.replicaId;
    const bool known = state_.findReplica(e.replicaId).has_value();
    if (applyOrUnchanged(e) != known) problem(last_ + ": accepted iff the replica exists, broken");
  }

  void telemetry() {
    std::vector<GpuId> gpus;
    for (NodeId n : liveNodes()) {
      for (GpuId g : state_.node(n).gpuIds) gpus.push_back(g);
    }
    if (gpus.empty()) return;
    GpuTelemetry t = testkit::randomTelemetry(rng_, state_, rng_.pick(gpus));
    t.atMs = clock_.nowMs();
    bool valid = true;
    if (rng_.chance(0.04)) {
      valid = false;
      switch (rng_.upTo(3)) {
        case 0:
          t.usedMib = -1;
          break;
        case 1:
          t.utilizationMilli = 1001;
          break;
        case 2:
          t.replicaUsedMib["x"] = -5;
          break;
        default:
          t.gpuId = "no-such-gpu";
          break;
      }
    }
    last_ = "telemetry " + t.node + "/" + t.gpuId + " used " + std::to_string(t.usedMib) +
            " attributed " + std::to_string(t.replicaUsedMib.size());
    if (applyOrUnchanged(t) != valid) problem(last_ + ": accepted iff valid, broken");
  }

  void advanceClock() {
    const auto next = state_.nextReservationExpiryMs();
    const Millis now = clock_.nowMs();
    switch (rng_.upTo(3)) {
      case 0:
        clock_.advance(rng_.between(0, 2 * options_.reservationTtlMs));
        break;
      case 1:  // just before a lapse
        if (next) clock_.set(std::max(now, *next - 1));
        break;
      case 2:  // exactly at it
        if (next) clock_.set(std::max(now, *next));
        break;
      default:
        clock_.advance(rng_.between(0, 3));
        break;
    }
    last_ = "clock to " + std::to_string(clock_.nowMs());
    if (rng_.chance(0.85)) {
      last_ += " + ReservationsExpired";
      expectApplied(ReservationsExpired{clock_.nowMs()});
    }
  }

  void updateNode() {
    const auto nodes = liveNodes();
    if (nodes.empty()) return;
    const NodeRecord& rec = state_.node(rng_.pick(nodes));
    model::NodeSpec spec = specs_.at(rec.spec.name);
    bool mustRefuse = false;
    for (int i = rng_.upTo(2); i >= 0; --i) {
      model::GpuSpec* g =
          spec.gpus.empty()
              ? nullptr
              : &spec.gpus[std::size_t(rng_.upTo(static_cast<int>(spec.gpus.size()) - 1))];
      switch (rng_.upTo(8)) {
        case 0:
          spec.healthy = !spec.healthy;
          break;
        case 1:
          spec.cordoned = !spec.cordoned;
          break;
        case 2:
          spec.taints.clear();
          if (rng_.chance(0.5)) spec.taints.push_back(rng_.pick(testkit::taintPool()));
          break;
        case 3:
          if (g) g->healthy = !g->healthy;
          break;
        case 4:
          if (g && !g->migEnabled) g->timeSlicingReplicas = rng_.upTo(3);
          break;
        case 5:  // 0: the catalogue's figure
          if (g) g->memoryBandwidthGBps = rng_.chance(0.5) ? 0.0 : rng_.between(1, 800) * 1.0;
          break;
        case 6:
          if (g) {
            // Only a form factor with NVLink may have a group; a GPU holding replicas keeps
            // its topology.
            const bool linkable = catalog_.find(g->type)->nvlinkGBps.has_value();
            const int link = linkable ? rng_.upTo(2) - 1 : -1;
            const int numa = rng_.upTo(2) - 1;
            g->nvlinkGroup = link;
            g->numaNode = numa;
          }
          break;
        case 7:
          spec.cpuMilli = rng_.between(0, 64'000);
          break;
        default:
          if (g) {
            g->memoryMib = 1 + rng_.between(0, 1000);
            mustRefuse = true;
          }
          break;
      }
    }
    mustRefuse |= spec.cpuMilli < rec.bookedCpuMilli;
    // Judged on the final spec against the books: two mutations may undo each other.
    for (const model::GpuSpec& g : spec.gpus) {
      const auto id = state_.findGpu(spec.name, g.id);
      if (!id || state_.gpu(*id).replicas.empty()) continue;
      const model::GpuSpec& now = state_.gpu(*id).spec;
      mustRefuse |= g.nvlinkGroup != now.nvlinkGroup || g.numaNode != now.numaNode;
    }
    last_ = "update node " + spec.name;
    if (applyOrUnchanged(NodeUpdated{spec})) {
      if (mustRefuse) {
        problem(last_ + ": accepted a capacity change or CPU below what replicas hold");
      }
      specs_[spec.name] = spec;
    }
  }

  void removeNode() {
    const auto nodes = liveNodes();
    if (nodes.empty()) return;
    const NodeRecord& rec = state_.node(rng_.pick(nodes));
    const NodeRemoved ev{rec.spec.name, rng_.chance(0.5)};
    const bool mustRefuse = !ev.force && !rec.replicas.empty();
    last_ = "remove node " + ev.name + (ev.force ? " (force)" : "");
    if (applyOrUnchanged(ev) == mustRefuse) {
      problem(last_ + ": refused iff it held replicas without force, broken");
    }
    if (!mustRefuse) specs_.erase(ev.name);
  }

  void addNode() {
    // A new name, the name of a removed node, or (rarely) a live one, which must be refused.
    std::string name = "node-x" + std::to_string(nextId_++);
    for (const NodeRecord& n : state_.nodes()) {
      if (rng_.chance(0.3) && (n.removed || rng_.chance(0.2))) name = n.spec.name;
    }
    model::NodeSpec spec = testkit::randomNode(rng_, catalog_, name, clusterShape_);
    bool legal = !specs_.contains(name);
    for (auto& g : spec.gpus) {
      if (!g.migEnabled || !rng_.chance(0.3)) continue;
      const auto& type = *catalog_.find(g.type);
      g.migInstances.clear();
      for (int i = rng_.upTo(3); i > 0; --i) {
        g.migInstances.push_back(
            {rng_.pick(type.migProfiles).name, rng_.upTo(type.migMemorySlots)});
      }
      legal = legal && model::resolveMigInstances(type, g.migInstances).has_value();
    }
    last_ = "add node " + name;
    if (applyOrUnchanged(NodeAdded{spec}) != legal) problem(last_ + ": accepted iff legal, broken");
    if (legal) specs_[name] = spec;
  }

  void eviction();
  void batch();

  Rng rng_;
  Coverage& coverage_;
  const model::GpuCatalog& catalog_;
  Engines& engines_;
  testkit::ClusterShape clusterShape_;
  testkit::RequestShape requestShape_;
  EngineOptions options_;
  ManualClock clock_;
  ClusterState state_;
  testkit::ShadowBooks shadow_;
  PlacementEngine& engine_;
  std::map<std::string, model::NodeSpec> specs_;  // live nodes as last declared
  std::vector<model::PlacementRequest> deployments_;
  std::vector<model::PlacementRequest> fitted_;  // requests that were placed
  Problems problems_;
  std::string last_;
  int nextId_ = 0;
};

// Eviction: victims strictly lower priority, on the plan's node, and enough; no plan only when
// unloading every lower-priority replica of any node would not help either.
void Case::eviction() {
  // Mostly a shape that has fitted before, at a priority above everything placed: such a
  // request usually needs victims, and usually has some.
  model::PlacementRequest r = newRequest();
  if (!fitted_.empty() && rng_.chance(0.7)) {
    const std::string id = r.replicaId;
    r = rng_.pick(fitted_);
    r.replicaId = id;
    if (rng_.chance(0.5)) r.model.weightsMib *= rng_.between(2, 4);  // room for several
  }
  r.model.priority =
      rng_.chance(0.6) ? requestShape_.maxPriority + 1 : rng_.upTo(requestShape_.maxPriority);
  last_ = "plan eviction for " + r.replicaId + " priority " + std::to_string(r.model.priority);
  const EvictionPlan plan = planEviction(engine_, state_, r);
  if (!requestValid(r)) {
    if (plan.feasible) problem(last_ + ": feasible for an invalid request");
    return;
  }
  const Needs needs = deriveNeeds(r, options_);
  DecideOptions quiet;
  quiet.explainFailures = false;
  const bool direct = engine_.decide(state_, r, quiet).placement.has_value();
  if (direct && (!plan.feasible || !plan.victims.empty())) {
    problem(last_ + ": fits directly, yet victims");
  }
  if (plan.feasible) {
    auto node = state_.findNode(plan.node);
    if (!node || !plan.placement || plan.placement->node != *node) {
      return problem(last_ + ": feasible plan without a placement on its node");
    }
    ClusterState after(state_);
    std::set<std::string> distinct;
    for (const std::string& v : plan.victims) {
      auto id = state_.findReplica(v);
      if (!id || !distinct.insert(v).second) {
        return problem(last_ + ": unknown or repeated victim " + v);
      }
      const Placement& vp = state_.replica(*id).placement;
      if (vp.node != *node) problem(last_ + ": victim " + v + " is not on " + plan.node);
      if (vp.priority >= r.model.priority) {
        problem(last_ + ": victim " + v + " has priority " + std::to_string(vp.priority));
      }
      if (!after.apply(ReplicaUnloaded{v})) problem(last_ + ": victim cannot be unloaded");
    }
    quiet.onlyNode = *node;
    const Decision d = engine_.decide(after, r, quiet);
    if (!d.placement) {
      return problem(last_ + ": the request does not fit after unloading the victims");
    }
    checkPlacement(after, r, needs, *d.placement, problems_);
    if (auto why = testkit::admissionProblem(after, *plan.placement)) {
      problem(last_ + ": the plan's placement is refused after the evictions: " + *why);
    }
    coverage_.evictionsWithVictims += !plan.victims.empty();
    coverage_.evictionsMultiVictim += plan.victims.size() > 1;
    if (rng_.chance(0.5)) {  // carry the plan out
      for (const std::string& v : plan.victims) expectApplied(ReplicaUnloaded{v});
      expectApplied(replicaPlaced(state_, *d.placement, clock_.nowMs()));
    }
    return;
  }
  ++coverage_.evictionsImpossible;
  // Capacity advice, when given, is true: carried out on a copy, the request fits there.
  if (!plan.growNode.empty()) {
    ClusterState grown(state_);
    const auto n = grown.findNode(plan.growNode);
    if (!n) return problem(last_ + ": advice grows unknown node " + plan.growNode);
    model::NodeSpec spec = grown.node(*n).spec;
    for (GpuId g : grown.node(*n).gpuIds) spec.gpus.push_back(grown.gpu(g).spec);
    spec.cpuMilli += plan.addCpuMilli;
    spec.hostMemoryMib += plan.addHostMemoryMib;
    if (!grown.apply(NodeUpdated{spec})) return problem(last_ + ": advised growth is refused");
    quiet.onlyNode = *n;
    if (!engine_.decide(grown, r, quiet).placement) {
      problem(last_ + ": growing " + plan.growNode + " as advised does not make it fit");
    }
  } else if (plan.gpusToAdd > 0) {
    const model::GpuType* type = catalog_.find(plan.gpuTypeToAdd);
    if (type == nullptr) return problem(last_ + ": advised type unknown: " + plan.reason);
    if (type->memoryMib && *type->memoryMib < needs.memoryMib) {
      problem(last_ + ": advised type " + type->name + " cannot hold the request");
    }
    if (r.model.nvlinkRequired && plan.gpusToAdd > 1 && !type->nvlinkGBps) {
      problem(last_ + ": advised type " + type->name + " has no NVLink");
    }
    if (plan.reason.find(std::to_string(plan.gpusToAdd) + " x " + type->name) ==
        std::string::npos) {
      problem(last_ + ": the reason does not say what to add: " + plan.reason);
    }
  } else if (plan.capacity.find("no added capacity") == std::string::npos && needs.gpuCount > 0) {
    problem(last_ + ": no plan, no capacity advice and no reason why: " + plan.reason);
  }
  for (NodeId n : liveNodes()) {
    ClusterState after(state_);
    for (ReplicaId v : state_.node(n).replicas) {
      const Placement& vp = state_.replica(v).placement;
      if (vp.priority < r.model.priority) (void)after.apply(ReplicaUnloaded{vp.replicaId});
    }
    quiet.onlyNode = n;
    if (engine_.decide(after, r, quiet).placement) {
      problem(last_ + ": no plan, but unloading every lower-priority replica of " +
              state_.node(n).spec.name + " makes room");
    }
  }
}

// Batch: commit=false changes nothing and plans what commit=true applies; every request is
// answered once; what is left unplaceable does not fit the final state either.
void Case::batch() {
  std::vector<model::PlacementRequest> requests;
  const auto ids = liveReplicaIds();
  for (int i = static_cast<int>(rng_.between(1, 12)); i > 0; --i) {
    requests.push_back(newRequest());
    if (rng_.chance(0.04) && !ids.empty()) requests.back().replicaId = rng_.pick(ids);
    if (rng_.chance(0.04)) requests.back().replicaId = requests.front().replicaId;
  }
  const bool commit = rng_.chance(0.5);
  last_ = "batch of " + std::to_string(requests.size()) + (commit ? " (commit)" : " (dry run)");
  ClusterState other(state_);
  const std::uint64_t before = testkit::booksFingerprint(state_);
  const BatchPlan plan = planBatch(engine_, state_, requests, commit);
  const BatchPlan twin = planBatch(engine_, other, requests, !commit);
  if (!commit && testkit::booksFingerprint(state_) != before) {
    problem(last_ + ": a dry run changed the state");
  }
  if (commit && testkit::booksFingerprint(other) != before) {
    problem(last_ + ": a dry run changed its copy");
  }
  ClusterState& committed = commit ? state_ : other;
  if (commit) {
    for (const Placement& p : plan.assignments) {
      shadow_.onApplied(state_, replicaPlaced(state_, p, clock_.nowMs()));
    }
  }
  if (plan.assignments.size() != twin.assignments.size()) {
    problem(last_ + ": dry run and commit plan differently");
  } else {
    for (std::size_t i = 0; i < plan.assignments.size(); ++i) {
      if (plan.assignments[i].replicaId != twin.assignments[i].replicaId ||
          !samePlacement(plan.assignments[i], twin.assignments[i])) {
        problem(last_ + ": dry run and commit plan differently");
      }
    }
  }
  coverage_.batchAssigned += static_cast<int>(plan.assignments.size());
  coverage_.batchUnplaceable += static_cast<int>(plan.unplaceable.size());
  std::multiset<std::string> asked, answered;
  for (const auto& r : requests) asked.insert(r.replicaId);
  for (const auto& p : plan.assignments) {
    answered.insert(p.replicaId);
    auto id = committed.findReplica(p.replicaId);
    if (!id || !samePlacement(committed.replica(*id).placement, p)) {
      problem(last_ + ": assignment " + p.replicaId + " is not in the committed state");
    }
  }
  for (const auto& u : plan.unplaceable) answered.insert(u.replicaId);
  if (asked != answered) {
    problem(last_ + ": assignments and unplaceable do not cover the requests once each");
  }
  if (auto ok = committed.checkInvariants(); !ok && !knownMemoryReport(ok.error().message)) {
    problem(last_ + ": " + ok.error().message);
  }
  for (auto& p : testkit::checkBooks(committed, usageGrew())) problem(last_ + ": " + p);
  // Placements only add load, so what did not fit during the batch does not fit after it.
  for (const auto& u : plan.unplaceable) {
    if (asked.count(u.replicaId) != 1 ||
        std::find(ids.begin(), ids.end(), u.replicaId) != ids.end()) {
      continue;  // a duplicate id: refused for that, not for lack of room
    }
    for (const auto& r : requests) {
      if (r.replicaId != u.replicaId || !requestValid(r)) continue;
      DecideOptions quiet;
      quiet.explainFailures = false;
      if (engine_.decide(committed, r, quiet).placement) {
        problem(last_ + ": " + r.replicaId + " was left unplaceable (" + u.reason +
                ") but fits the final state");
      }
    }
  }
}

}  // namespace

std::optional<Coverage> runCases(const char* test, const testkit::ClusterShape& cluster,
                                 const testkit::RequestShape& requests, const Mix& mix,
                                 int defaultCases, int steps, std::optional<std::uint64_t> pinned) {
  const std::uint64_t master = pinned ? *pinned : announceSeed(test);
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  Engines engines;
  Coverage coverage;
  const int cases = pinned ? 1 : testkit::fuzzIterations(defaultCases);
  for (int c = 0; c < cases; ++c) {
    const std::uint64_t seed = testkit::caseSeed(master, c);
    Case kase(catalog, engines, seed, cluster, requests, coverage);
    for (int s = 0; s <= steps; ++s) {
      if (s > 0) kase.step(mix);
      if (!kase.problems().empty()) {
        std::string all;
        for (const auto& p : kase.problems()) all += "\n  " + p;
        ADD_FAILURE() << test << ": case " << c << " (TESSERA_SEED=" << seed
                      << " TESSERA_FUZZ_ITERATIONS=1), step " << s << " [" << kase.lastStep()
                      << "]:" << all;
        return std::nullopt;
      }
    }
  }
  std::cout << "[ COVERAGE ] " << test << ": " << cases << " cases: " << coverage.summary()
            << std::endl;
  if (cases < defaultCases) return std::nullopt;
  return coverage;
}

}  // namespace tessera::sched::invariants
