#include "k8s/extender.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <optional>
#include <set>

namespace tessera::k8s {
namespace {

using nlohmann::json;

bool equalsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// Filters whose refusal eviction can change: they compare a request with free capacity.
bool capacityPlugin(std::string_view plugin) {
  return plugin == "MemoryFit" || plugin == "ComputeCap" || plugin == "Bandwidth" ||
         plugin == "MigSlice" || plugin == "TimeSlicing" || plugin == "NodeResources";
}

struct NodeVerdict {
  std::string reason;
  bool resolvable = true;
};

// Why each infeasible node was turned away, from an explained decision.
std::map<std::string, NodeVerdict> verdicts(const sched::ClusterState& state,
                                            const sched::Decision& d, const sched::Needs& needs) {
  struct Gathered {
    std::string nodeReason;
    std::vector<std::string> gpuReasons;
    bool resolvable = true;
  };
  std::map<std::string, Gathered> by;
  for (const sched::Rejection& r : d.rejections) {
    Gathered& g = by[r.node];
    bool resolvable = capacityPlugin(r.plugin);
    if (r.plugin == "MemoryFit" && !r.gpu.empty()) {
      // A GPU smaller than the request stays too small whatever is evicted.
      if (auto gid = state.findGpu(r.node, r.gpu)) {
        resolvable = state.gpu(*gid).spec.memoryMib >= needs.memoryMib;
      }
    }
    g.resolvable = g.resolvable && resolvable;
    if (r.gpu.empty()) {
      if (g.nodeReason.empty()) g.nodeReason = r.plugin + ": " + r.reason;
    } else {
      g.gpuReasons.push_back("GPU " + r.gpu + ": " + r.plugin + ": " + r.reason);
    }
  }
  std::map<std::string, NodeVerdict> out;
  for (auto& [node, g] : by) {
    NodeVerdict v;
    v.resolvable = g.resolvable;
    if (!g.nodeReason.empty()) {
      v.reason = g.nodeReason;
    } else {
      constexpr std::size_t kShown = 3;
      v.reason = "no GPU fits: ";
      for (std::size_t i = 0; i < g.gpuReasons.size() && i < kShown; ++i) {
        v.reason += (i ? "; " : "") + g.gpuReasons[i];
      }
      if (g.gpuReasons.size() > kShown) {
        v.reason += "; and " + std::to_string(g.gpuReasons.size() - kShown) + " more GPUs";
      }
    }
    out.emplace(node, std::move(v));
  }
  return out;
}

Result<std::string> stringField(const json& obj, std::string_view key, std::string_view path) {
  const json* f = fieldIgnoringCase(obj, key);
  if (f == nullptr || f->is_null()) return std::string();
  if (!f->is_string()) {
    return fail(Error::invalid(std::string(path) + "." + std::string(key) + ": expected a string"));
  }
  return f->get<std::string>();
}

}  // namespace

const json* fieldIgnoringCase(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  if (const auto it = obj.find(key); it != obj.end()) return &*it;
  for (const auto& [k, v] : obj.items()) {
    if (equalsIgnoringCase(k, key)) return &v;
  }
  return nullptr;
}

Extender::Extender(sched::ClusterState& state, sched::PlacementEngine& engine, ModelLookup models,
                   Binder binder)
    : state_(state), engine_(engine), models_(std::move(models)), binder_(std::move(binder)) {}

Result<Extender::Candidates> Extender::candidates(const json& args) const {
  Candidates c;
  const json* names = fieldIgnoringCase(args, "NodeNames");
  const json* nodes = fieldIgnoringCase(args, "Nodes");
  if (names != nullptr && !names->is_null()) {
    if (!names->is_array()) return fail(Error::invalid("NodeNames: expected an array of strings"));
    for (std::size_t i = 0; i < names->size(); ++i) {
      if (!(*names)[i].is_string()) {
        return fail(Error::invalid("NodeNames[" + std::to_string(i) + "]: expected a string"));
      }
      c.names.push_back((*names)[i].get<std::string>());
    }
    c.nodeCacheCapable = true;
    return c;
  }
  if (nodes == nullptr || nodes->is_null()) {
    return fail(Error::invalid("Nodes or NodeNames: one of them is required"));
  }
  if (!nodes->is_object()) return fail(Error::invalid("Nodes: expected a v1.NodeList object"));
  const auto items = nodes->find("items");
  if (items == nodes->end() || items->is_null()) {
    static const json kEmpty = json::array();
    c.items = &kEmpty;
    return c;
  }
  if (!items->is_array()) return fail(Error::invalid("Nodes.items: expected an array"));
  for (std::size_t i = 0; i < items->size(); ++i) {
    const json& n = (*items)[i];
    const std::string path = "Nodes.items[" + std::to_string(i) + "]";
    const auto meta = n.is_object() ? n.find("metadata") : n.end();
    if (meta == n.end() || !meta->is_object() || !meta->contains("name") ||
        !(*meta)["name"].is_string()) {
      return fail(Error::invalid(path + ".metadata.name: missing"));
    }
    c.names.push_back((*meta)["name"].get<std::string>());
  }
  c.items = &*items;
  return c;
}

Result<PodRequest> Extender::pod(const json& args) {
  if (!args.is_object()) return fail(Error::invalid("body: expected a JSON object"));
  const json* p = fieldIgnoringCase(args, "Pod");
  if (p == nullptr || p->is_null()) return fail(Error::invalid("Pod: missing"));
  auto pod = readPod(*p, models_);
  if (!pod) return fail(pod.error());
  if (pod->managed) {
    remember(*pod);
    if (!pod->uid.empty()) resources_[pod->uid] = deviceResource(*p);
  }
  return pod;
}

std::string Extender::deviceResource(const json& pod) {
  std::string found;
  const auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return found;
  for (const char* list : {"containers", "initContainers"}) {
    const auto cs = spec->find(list);
    if (cs == spec->end() || !cs->is_array()) continue;
    for (const json& c : *cs) {
      const auto res = c.find("resources");
      if (!c.is_object() || res == c.end() || !res->is_object()) continue;
      for (const char* kind : {"requests", "limits"}) {
        const auto m = res->find(kind);
        if (m == res->end() || !m->is_object()) continue;
        if (m->contains(kResourceWholeGpu)) return std::string(kResourceWholeGpu);
        if (m->contains(kResourceGpus)) found = std::string(kResourceGpus);
      }
    }
  }
  return found;
}

std::string Extender::bookingShape(const std::string& resource, sched::ReplicaId replica) const {
  const sched::Placement& p = state_.replica(replica).placement;
  std::string key = resource + "|" + std::string(model::sharingModeName(p.mode));
  for (const sched::GpuAssignment& a : p.gpus) {
    // The card type too: twins on different types of the same memory would not be equal.
    key += "|" + std::to_string(state_.gpu(a.gpu).typeIndex) + "," + std::to_string(a.reservedMib) +
           "," + std::to_string(a.computeMilli) + "," + std::to_string(a.migProfile);
  }
  return key;
}

void Extender::allocationConfirmed(std::string_view replicaId) {
  std::erase_if(unconfirmed_, [&](const Unconfirmed& u) { return u.replicaId == replicaId; });
}

const Extender::Unconfirmed* Extender::unconfirmed(std::string_view replicaId) const {
  for (const Unconfirmed& u : unconfirmed_) {
    if (u.replicaId == replicaId) return &u;
  }
  return nullptr;
}

void Extender::remember(const PodRequest& pod) {
  if (pod.uid.empty()) return;
  if (pods_.insert_or_assign(pod.uid, pod).second) order_.push_back(pod.uid);
  while (pods_.size() > kRememberedPods && !order_.empty()) {
    pods_.erase(order_.front());
    resources_.erase(order_.front());
    order_.pop_front();
  }
}

// Everything a PlacementRequest holds (keep in step with model/workload.h): two requests with
// the same key get the same answer from the engine on the same state.
std::string Extender::requestKey(const model::PlacementRequest& r, bool withReplicaId) {
  const model::ModelProfile& m = r.model;
  std::string key;
  key.reserve(256);
  auto add = [&key](std::string_view v) {
    key += v;
    key += '\x1f';
  };
  auto num = [&add](auto v) { add(std::to_string(v)); };
  if (withReplicaId) add(r.replicaId);
  add(r.deployment);
  add(m.name);
  num(m.weightsMib);
  num(m.kvCacheMib);
  num(m.overheadMib);
  num(m.computeMilli);
  num(m.memoryBandwidthGBps);
  num(m.gpusPerReplica);
  num(static_cast<int>(m.nvlinkRequired));
  num(static_cast<int>(m.numaAligned));
  num(m.priority);
  num(static_cast<int>(m.sharing));
  add(m.migProfile);
  num(m.cpuMilli);
  num(m.hostMemoryMib);
  for (const std::string& t : r.gpuTypes) add(t);
  key += '\x1e';
  for (const auto& [k, v] : r.nodeSelector) {
    add(k);
    add(v);
  }
  key += '\x1e';
  for (const model::Toleration& t : r.tolerations) {
    add(t.key);
    add(t.op);
    add(t.value);
    add(t.effect);
  }
  return key;
}

const std::vector<sched::PlacementEngine::NodeScore>& Extender::feasibleScores(
    const PodRequest& pod) {
  // Keyed by shape, not by pod: the engine's scoreNodes reads the replica id only to refuse
  // an empty one (no plugin reads it), so every pod of one shape gets the same answer on the
  // same state. kube-scheduler sends many pods of a deployment in a row; each one after the
  // first is answered from here until the state changes.
  std::string key = requestKey(pod.request, /*withReplicaId=*/false);
  key += pod.request.replicaId.empty() ? '0' : '1';
  const std::uint64_t generation = state_.generation();
  for (const Scored& s : scored_) {
    if (s.generation == generation && s.key == key) return s.scores;
  }
  sched::DecideOptions quick;
  quick.explainFailures = false;
  quick.diagnoseFailures = false;
  if (scored_.size() >= kScoredCache) scored_.pop_front();
  scored_.push_back({generation, std::move(key), engine_.scoreNodes(state_, pod.request, quick)});
  return scored_.back().scores;
}

Result<json> Extender::filter(const json& args) {
  auto p = pod(args);
  if (!p) return fail(p.error());
  auto c = candidates(args);
  if (!c) return fail(c.error());

  const std::size_t n = c->names.size();
  std::vector<char> pass(n, 1);
  json failed = json::object();
  json unresolvable = json::object();
  std::string error;
  if (p->managed) {
    std::vector<char> feasible(state_.nodes().size(), 0);
    for (const auto& ns : feasibleScores(*p)) feasible[static_cast<std::size_t>(ns.node)] = 1;
    std::vector<std::optional<sched::NodeId>> ids(n);
    for (std::size_t i = 0; i < n; ++i) {
      ids[i] = state_.findNode(c->names[i]);
      pass[i] = ids[i] && feasible[static_cast<std::size_t>(*ids[i])];
    }
    // Reasons only for the candidates that fail, each explained alone: explaining the whole
    // cluster would also score every feasible option and describe every GPU that fails on a
    // node that passes. A node's reason is kept until the node changes (its generation) or
    // a pod of another shape asks; the first failing node is always explained afresh, which
    // also tells whether the request itself is refused (e.g. the replica is already placed).
    const sched::Needs needs = sched::deriveNeeds(p->request, state_.options());
    const std::string shape = requestKey(p->request, /*withReplicaId=*/false);
    if (reasons_.size() < state_.nodes().size()) reasons_.resize(state_.nodes().size());
    bool refused = false, explainedOne = false;
    for (std::size_t i = 0; i < n; ++i) {
      if (pass[i]) continue;
      const std::string& name = c->names[i];
      if (!ids[i] || state_.node(*ids[i]).removed) {
        unresolvable[name] = "node is not registered with Tessera (no node agent reports it)";
        continue;
      }
      const std::uint64_t generation = state_.node(*ids[i]).generation;
      NodeReason& cached = reasons_[static_cast<std::size_t>(*ids[i])];
      NodeReason fresh;
      const NodeReason* use = &cached;
      if (!explainedOne || refused || cached.nodeGeneration != generation ||
          cached.shape != shape) {
        sched::DecideOptions explain;
        explain.explain = true;
        explain.onlyNode = *ids[i];
        const sched::Decision d = engine_.decide(state_, p->request, explain);
        explainedOne = true;
        refused = refused || d.requestRefused;
        const auto why = verdicts(state_, d, needs);
        const auto it = why.find(name);
        fresh.nodeGeneration = generation;
        fresh.shape = shape;
        fresh.known = it != why.end();
        if (fresh.known) {
          fresh.reason = it->second.reason;
          fresh.resolvable = it->second.resolvable;
        }
        if (!d.requestRefused) cached = fresh;
        use = &fresh;
      }
      if (!use->known) {
        failed[name] = "no set of its GPUs satisfies the request together";
      } else if (use->resolvable) {
        failed[name] = use->reason;
      } else {
        unresolvable[name] = use->reason;
      }
    }
    if (refused) {
      // The request itself is refused: say so as the whole cluster sees it.
      sched::DecideOptions explain;
      explain.explain = true;
      error = "tessera refused the pod's request: " +
              engine_.decide(state_, p->request, explain).summary;
    }
  }

  json out;
  if (c->nodeCacheCapable) {
    json names = json::array();
    names.get_ref<json::array_t&>().reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (pass[i]) names.push_back(c->names[i]);
    }
    out["Nodes"] = nullptr;
    out["NodeNames"] = std::move(names);
  } else {
    json items = json::array();
    for (std::size_t i = 0; i < n; ++i) {
      if (pass[i]) items.push_back((*c->items)[i]);
    }
    out["Nodes"] = {{"metadata", json::object()}, {"items", std::move(items)}};
    out["NodeNames"] = nullptr;
  }
  out["FailedNodes"] = std::move(failed);
  out["FailedAndUnresolvableNodes"] = std::move(unresolvable);
  out["Error"] = error;
  return out;
}

Result<json> Extender::prioritize(const json& args) {
  auto p = pod(args);
  if (!p) return fail(p.error());
  auto c = candidates(args);
  if (!c) return fail(c.error());
  // Raw engine score per node id; kInfeasible for nodes with no placement.
  constexpr std::int64_t kInfeasible = std::numeric_limits<std::int64_t>::min();
  std::vector<std::int64_t> raw(state_.nodes().size(), kInfeasible);
  if (p->managed) {
    for (const auto& ns : feasibleScores(*p)) raw[static_cast<std::size_t>(ns.node)] = ns.score;
  }
  std::vector<std::int64_t> candidate(c->names.size(), kInfeasible);
  // Scale the candidates' feasible scores onto 1..10 (0 is kept for infeasible nodes).
  std::int64_t lo = 0, hi = 0;
  bool any = false;
  for (std::size_t i = 0; i < c->names.size(); ++i) {
    const auto id = state_.findNode(c->names[i]);
    if (!id) continue;
    candidate[i] = raw[static_cast<std::size_t>(*id)];
    if (candidate[i] == kInfeasible) continue;
    lo = any ? std::min(lo, candidate[i]) : candidate[i];
    hi = any ? std::max(hi, candidate[i]) : candidate[i];
    any = true;
  }
  json out = json::array();
  out.get_ref<json::array_t&>().reserve(c->names.size());
  for (std::size_t i = 0; i < c->names.size(); ++i) {
    std::int64_t score = 0;
    if (candidate[i] != kInfeasible) {
      score = hi == lo
                  ? 10
                  : 1 + static_cast<std::int64_t>((9.0 * static_cast<double>(candidate[i] - lo)) /
                                                      static_cast<double>(hi - lo) +
                                                  0.5);
    }
    out.push_back({{"Host", c->names[i]}, {"Score", score}});
  }
  return out;
}

Result<json> Extender::preempt(const json& args) {
  auto p = pod(args);
  if (!p) return fail(p.error());
  // node → victims as the scheduler gave them, as (uid, replica id or "").
  struct Victim {
    std::string uid;
    std::string replica;
  };
  struct NodeVictims {
    std::vector<Victim> pods;
    std::int64_t pdbViolations = 0;
  };
  std::map<std::string, NodeVictims> proposed;
  const json* full = fieldIgnoringCase(args, "NodeNameToVictims");
  const json* meta = fieldIgnoringCase(args, "NodeNameToMetaVictims");
  const bool haveFull = full != nullptr && !full->is_null();
  const json* table = haveFull ? full : meta;
  if (table == nullptr || table->is_null()) {
    return fail(Error::invalid("NodeNameToVictims or NodeNameToMetaVictims: one is required"));
  }
  const std::string tableName = haveFull ? "NodeNameToVictims" : "NodeNameToMetaVictims";
  if (!table->is_object()) return fail(Error::invalid(tableName + ": expected an object"));
  for (const auto& [node, v] : table->items()) {
    const std::string path = tableName + "[\"" + node + "\"]";
    NodeVictims nv;
    if (v.is_null()) {
      proposed.emplace(node, std::move(nv));
      continue;
    }
    if (!v.is_object()) return fail(Error::invalid(path + ": expected an object"));
    if (const json* n = fieldIgnoringCase(v, "NumPDBViolations"); n && !n->is_null()) {
      if (!n->is_number_integer()) {
        return fail(Error::invalid(path + ".NumPDBViolations: expected an integer"));
      }
      nv.pdbViolations = n->get<std::int64_t>();
    }
    const json* pods = fieldIgnoringCase(v, "Pods");
    if (pods != nullptr && !pods->is_null()) {
      if (!pods->is_array()) return fail(Error::invalid(path + ".Pods: expected an array"));
      for (std::size_t i = 0; i < pods->size(); ++i) {
        const json& vp = (*pods)[i];
        const std::string vpath = path + ".Pods[" + std::to_string(i) + "]";
        if (!vp.is_object()) return fail(Error::invalid(vpath + ": expected an object"));
        Victim victim;
        if (haveFull) {
          const auto m = vp.find("metadata");
          if (m == vp.end() || !m->is_object()) {
            return fail(Error::invalid(vpath + ".metadata: missing"));
          }
          auto uid = stringField(*m, "uid", vpath + ".metadata");
          auto name = stringField(*m, "name", vpath + ".metadata");
          auto ns = stringField(*m, "namespace", vpath + ".metadata");
          for (auto* r : {&uid, &name, &ns}) {
            if (!*r) return fail(r->error());
          }
          victim.uid = *uid;
          victim.replica = (ns->empty() ? std::string("default") : *ns) + "/" + *name;
        } else {
          auto uid = stringField(vp, "UID", vpath);
          if (!uid) return fail(uid.error());
          victim.uid = *uid;
          if (const auto it = boundUids_.find(*uid); it != boundUids_.end()) {
            victim.replica = it->second;
          }
        }
        nv.pods.push_back(std::move(victim));
      }
    }
    proposed.emplace(node, std::move(nv));
  }

  std::set<std::string> keep;
  if (!p->managed) {
    for (const auto& [node, nv] : proposed) keep.insert(node);
  } else {
    // Victims on one node free nothing on another, so one scratch state with every proposed
    // victim gone answers each node.
    sched::ClusterState scratch(state_);
    for (const auto& [node, nv] : proposed) {
      for (const Victim& v : nv.pods) {
        if (v.replica.empty() || !scratch.findReplica(v.replica)) continue;
        (void)scratch.apply(sched::ReplicaUnloaded{v.replica});  // present: checked just above
      }
    }
    for (const auto& [node, nv] : proposed) {
      const auto id = scratch.findNode(node);
      if (!id || scratch.node(*id).removed) continue;
      sched::DecideOptions only;
      only.onlyNode = *id;
      only.explainFailures = false;
      only.diagnoseFailures = false;
      if (engine_.decide(scratch, p->request, only).placement) keep.insert(node);
    }
  }
  json result = json::object();
  for (const auto& [node, nv] : proposed) {
    if (!keep.contains(node)) continue;
    json pods = json::array();
    for (const Victim& v : nv.pods) pods.push_back({{"UID", v.uid}});
    result[node] = {{"Pods", std::move(pods)}, {"NumPDBViolations", nv.pdbViolations}};
  }
  return json{{"NodeNameToMetaVictims", std::move(result)}};
}

namespace {

json claimChoiceJson(const sched::ClusterState& state, const sched::ReplicaRecord& rec,
                     const std::string& id) {
  const sched::Placement& p = rec.placement;
  const std::string node = state.node(p.node).spec.name;
  json gpus = json::array();
  for (const sched::GpuAssignment& a : p.gpus) {
    const sched::GpuRecord& g = state.gpu(a.gpu);
    json e = {{"id", g.spec.id},
              // A GPU registered without a UUID (a virtual one): the agent's virtual UUID.
              {"uuid", g.spec.uuid.empty() ? "virtual-" + node + "-" + g.spec.id : g.spec.uuid},
              {"cardMemoryMib", g.spec.memoryMib},
              {"reservedMib", a.reservedMib},
              {"computeMilli", a.computeMilli}};
    if (a.migProfile >= 0) {
      e["migProfile"] =
          state.catalog().at(g.typeIndex).migProfiles[static_cast<std::size_t>(a.migProfile)].name;
      e["migStart"] = a.migStart;
    }
    gpus.push_back(std::move(e));
  }
  return {{"replica", id},
          {"node", node},
          {"mode", p.mode == model::SharingMode::kExclusive ? "exclusive"
                   : p.mode == model::SharingMode::kMig     ? "mig"
                                                            : "shared"},
          {"gpus", std::move(gpus)}};
}

}  // namespace

Result<json> Extender::bookForClaim(const json& podObject, const OutsideLock& outside,
                                    bool podExists) {
  auto read = readPod(podObject, models_);
  if (!read) return fail(read.error());
  if (!read->managed) {
    return fail(Error::invalid("pod " + read->ns + "/" + read->name +
                               " asks for no GPU through Tessera: nothing to book"));
  }
  const std::string id = read->request.replicaId;
  if (const auto existing = state_.findReplica(id)) {
    return claimChoiceJson(state_, state_.replica(*existing), id);
  }
  const sched::Decision d = engine_.place(state_, read->request);
  if (!d.placement) {
    if (d.requestRefused) return fail(Error::invalid("pod " + id + ": " + d.summary));
    return fail(Error::exhausted("pod " + id + " fits nowhere: " + d.summary));
  }
  // Assumed: in the books now. Persist outside the caller's lock; forget it when that fails.
  BookingWrite write;
  if (bookings_.prepare) write = bookings_.prepare(id, "", podExists);
  Result<void> saved;
  if (write.write) {
    if (outside) {
      outside([&] { saved = write.write(); });
    } else {
      saved = write.write();
    }
  }
  if (write.settle) write.settle(saved.has_value());
  if (!saved) {
    (void)state_.apply(sched::ReplicaUnloaded{id});
    return fail(
        Error::internal("the booking of " + id +
                        " could not be stored, so no claim is written: " + saved.error().message));
  }
  const auto booked = state_.findReplica(id);
  if (!booked) {
    // Removed while the lock was released: take the stored booking back too.
    if (bookings_.forget) bookings_.forget(id, "removed while its booking was written");
    return fail(Error::precondition("pod " + id + " was removed while it was being booked"));
  }
  json out = claimChoiceJson(state_, state_.replica(*booked), id);
  if (!write.onPod.empty()) out["booking"] = write.onPod;
  return out;
}

void Extender::forgetClaimBooking(const std::string& replicaId, const std::string& why) {
  if (!state_.findReplica(replicaId)) return;
  (void)state_.apply(sched::ReplicaUnloaded{replicaId});
  if (bookings_.forget) bookings_.forget(replicaId, why);
}

Result<json> Extender::bind(const json& args, const OutsideLock& outside) {
  auto io = [&outside](const std::function<void()>& fn) { outside ? outside(fn) : fn(); };
  if (!args.is_object()) return fail(Error::invalid("body: expected a JSON object"));
  auto name = stringField(args, "PodName", "ExtenderBindingArgs");
  auto ns = stringField(args, "PodNamespace", "ExtenderBindingArgs");
  auto uid = stringField(args, "PodUID", "ExtenderBindingArgs");
  auto node = stringField(args, "Node", "ExtenderBindingArgs");
  for (auto* r : {&name, &ns, &uid, &node}) {
    if (!*r) return fail(r->error());
  }
  if (name->empty()) return fail(Error::invalid("PodName: missing"));
  if (node->empty()) return fail(Error::invalid("Node: missing"));
  const std::string podNs = ns->empty() ? "default" : *ns;
  auto answer = [](std::string error) { return json{{"Error", std::move(error)}}; };

  auto known = pods_.find(*uid);
  if (!uid->empty() && known == pods_.end() && podSource_) {
    // Filtered by another replica (a failover in between) or forgotten: book it from the pod
    // itself rather than bind it with no booking.
    Result<json> fetched = fail(Error::internal("not read"));
    io([&] { fetched = podSource_(podNs, *name); });
    if (!fetched) {
      return answer("pod " + podNs + "/" + *name +
                    " was not filtered here and could not be read (" + fetched.error().message +
                    "): retry");
    }
    const json* meta = fieldIgnoringCase(*fetched, "metadata");
    const json* have = meta != nullptr ? fieldIgnoringCase(*meta, "uid") : nullptr;
    if (have == nullptr || !have->is_string() || have->get<std::string>() != *uid) {
      return answer("pod " + podNs + "/" + *name + " is not the pod with UID " + *uid);
    }
    auto read = pod(json{{"Pod", *fetched}});
    if (!read) return answer("pod " + podNs + "/" + *name + ": " + read.error().message);
    known = pods_.find(*uid);
  }
  if (uid->empty() || known == pods_.end()) {
    // Not a pod Tessera filtered: nothing to book, only the binding to post.
    if (!binder_) {
      return answer("pod " + podNs + "/" + *name +
                    " is not one Tessera filtered (or it was bound already), and without a "
                    "Kubernetes API (--kube-api-server) Tessera posts no Binding for it");
    }
    Result<void> bound;
    io([&] { bound = binder_(podNs, *name, *uid, *node); });
    return answer(bound ? "" : bound.error().message);
  }
  const PodRequest request = known->second;
  const auto nodeId = state_.findNode(*node);
  if (!nodeId || state_.node(*nodeId).removed) {
    return answer("node " + *node + " is not registered with Tessera");
  }
  // A retry of a bind already booked here books nothing new.
  const auto existing = state_.findReplica(request.request.replicaId);
  bool bookedNow = false;
  if (existing) {
    if (state_.replica(*existing).placement.node != *nodeId) {
      return answer("pod " + request.request.replicaId + " is already booked on node " +
                    state_.node(state_.replica(*existing).placement.node).spec.name);
    }
  } else {
    sched::DecideOptions only;
    only.onlyNode = *nodeId;
    const sched::Decision d = engine_.place(state_, request.request, only);
    if (!d.placement) return answer("pod does not fit on node " + *node + ": " + d.summary);
    bookedNow = true;
  }
  // The hand-off guard (see the header): refuse while an unconfirmed booking on this node
  // has the same GPU count and resource but another shape.
  const Millis now = state_.clock().nowMs();
  std::erase_if(unconfirmed_, [&](const Unconfirmed& u) {
    return now - u.boundAtMs >= confirmTtlMs_ || !state_.findReplica(u.replicaId);
  });
  const auto resourceIt = resources_.find(*uid);
  const std::string resource = resourceIt != resources_.end() ? resourceIt->second : "";
  const sched::ReplicaId replica = *state_.findReplica(request.request.replicaId);
  const std::string shape = bookingShape(resource, replica);
  const int gpuCount = static_cast<int>(state_.replica(replica).placement.gpus.size());
  for (const Unconfirmed& u : unconfirmed_) {
    if (resource.empty() || u.node != *nodeId || u.replicaId == request.request.replicaId ||
        u.resource != resource || u.gpus != gpuCount || u.shape == shape) {
      continue;
    }
    // Undoes the booking made above for this call: the replica is there, the unload cannot fail.
    if (bookedNow) (void)state_.apply(sched::ReplicaUnloaded{request.request.replicaId});
    return answer("node " + *node + " is handing " + u.replicaId + " its " +
                  std::to_string(u.gpus) + " " + resource +
                  " (not yet confirmed by its device plugin); a pod of the same size but a "
                  "different GPU share cannot be told apart from it until then: retry in a few "
                  "seconds");
  }
  // Assumed: booked in memory and guarding its node. Persist, then post the Binding (the
  // commit point), both outside the caller's lock; forget the booking when either fails.
  const std::string id = request.request.replicaId;
  const bool guardedNow = !resource.empty() && !unconfirmed(id);
  if (guardedNow) unconfirmed_.push_back({id, *nodeId, resource, gpuCount, shape, now});
  BookingWrite write;
  if (bookings_.prepare) write = bookings_.prepare(id, resource, /*podExists=*/true);
  Result<void> saved, bound;
  io([&] {
    if (write.write) saved = write.write();
    if (saved && binder_) bound = binder_(podNs, *name, *uid, *node);
  });
  // The lock is held again; other calls may have run in between (the replica, even its node,
  // may be gone: every undo below tolerates that).
  auto forgetHere = [&] {
    if (guardedNow) {
      std::erase_if(unconfirmed_, [&](const Unconfirmed& u) { return u.replicaId == id; });
    }
    if (bookedNow) (void)state_.apply(sched::ReplicaUnloaded{id});
  };
  if (write.settle) write.settle(saved.has_value());
  if (!saved) {
    forgetHere();
    return answer("the booking could not be stored, so the pod is not bound: " +
                  saved.error().message);
  }
  if (!bound) {
    forgetHere();
    if (bookedNow && bookings_.forget) bookings_.forget(id, "its Binding failed");
    return answer("binding failed: " + bound.error().message);
  }
  // Removed while the lock was released (the pod deleted, or its replica removed through the
  // API): the removal may have run before the write above stored the booking, which would
  // then outlive the pod. Take it back; the GPUs are free in memory already.
  if (!state_.findReplica(id)) {
    forgetHere();
    if (bookings_.forget) bookings_.forget(id, "it was removed while its Binding was in flight");
    return answer("pod " + id + " was removed while it was being bound");
  }
  boundUids_[*uid] = id;
  pods_.erase(*uid);
  resources_.erase(*uid);
  order_.remove(*uid);
  return answer("");
}

}  // namespace tessera::k8s
