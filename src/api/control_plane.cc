#include "api/control_plane.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "api/codec.h"
#include "api/json_api.h"
#include "api/json_fields.h"
#include "config/loaders.h"
#include "config/model_yaml.h"
#include "config/seed.h"
#include "config/yaml_json.h"
#include "sched/state_json.h"

namespace tessera::api {
namespace {

using nlohmann::json;

// A stored model document, read as the API reads a body.
Result<model::ModelProfile> decodeModel(const json& doc) {
  auto model = json_api::decodePutModel(doc);
  if (!model) return fail(model.error());
  return std::move(model->profile);
}

// The registered model a request names by name put into every request, or the error the files'
// decoder gives for a model it does not know (config::resolveModel), naming the body's field.
Result<void> resolveRegisteredModel(
    PlaceReplicas& request, const std::map<std::string, model::ModelProfile, std::less<>>& models) {
  if (!request.registeredModel) return {};
  const auto it = models.find(*request.registeredModel);
  if (it == models.end()) {
    std::vector<model::ModelProfile> known;
    for (const auto& [name, p] : models) known.push_back(p);
    const YAML::Node tree = config::jsonToYaml(json{{"model", *request.registeredModel}});
    auto resolved =
        config::resolveModel(config::Field::tree("body", tree).child("model"), {&known});
    return fail(resolved ? Error::internal("model " + *request.registeredModel + " resolved twice")
                         : resolved.error());
  }
  for (model::PlacementRequest& r : request.requests) r.model = it->second;
  return {};
}

const char* phaseName(sched::ReplicaPhase p) {
  return p == sched::ReplicaPhase::kLoaded ? "loaded" : "reserved";
}

}  // namespace

Result<std::unique_ptr<ControlPlane>> ControlPlane::create(const model::GpuCatalog& catalog,
                                                           const Clock& clock,
                                                           ControlPlaneConfig config,
                                                           store::StateStore* store,
                                                           store::EventSink* events) {
  sched::PluginRegistry registry;
  sched::registerBuiltinPlugins(registry);
  auto plugins = sched::buildPlugins(config.profile, registry);
  if (!plugins) return fail(plugins.error());
  std::unique_ptr<ControlPlane> plane(
      new ControlPlane(catalog, clock, std::move(config), std::move(*plugins), store, events));
  if (store != nullptr || events != nullptr) TESSERA_RETURN_IF_ERROR(plane->restore());
  return plane;
}

ControlPlane::ControlPlane(const model::GpuCatalog& catalog, const Clock& clock,
                           ControlPlaneConfig config, sched::PluginSet plugins,
                           store::StateStore* store, store::EventSink* events)
    : catalog_(catalog),
      clock_(clock),
      config_(std::move(config)),
      store_(store),
      state_(catalog_, clock_, config_.profile.options),
      engine_(std::move(plugins), config_.profile.options),
      eventLog_(events) {
  extender_ = std::make_unique<k8s::Extender>(
      state_, engine_, [this](std::string_view name) { return findModel(name); });
  extender_->setConfirmTtlMs(config_.allocationGuardTtlMs);
  extender_->setBookingStore(
      {.prepare = [this](const std::string& id, const std::string& resource,
                         bool podExists) { return prepareBooking(id, resource, podExists); },
       .forget = [this](const std::string& id,
                        const std::string& why) { forgetBooking(id, why); }});
  // The series exist from the start, for increase().
  reservationsExpired_.add({{"telemetry", "none"}}, 0);
  reservationsExpired_.add({{"telemetry", "unattributed"}}, 0);
  internalErrors_.add({{"where", "books"}}, 0);
  eventSinkErrors_.add({}, 0);
  unixOffsetMs_ = eventTimeMs() - clock_.nowMs();
}

void ControlPlane::undo(const sched::Event& event, std::string_view where) {
  if (auto done = state_.apply(event); !done) {
    internalErrors_.add({{"where", std::string(where)}});
    alert("InternalError", std::string(where),
          std::string(sched::eventName(event)) + " refused: " + done.error().message);
  }
}

void ControlPlane::restore(const sched::ReplicaRecord& snapshot, std::string_view where) {
  // Put back as it was booked, reservation and telemetry included: a fresh reservation could
  // charge more than it held, and no longer fit where it has been all along.
  undo(sched::ReplicaRestored{state_.named(snapshot.placement), snapshot.placedAtMs,
                              snapshot.reservationActive,
                              snapshot.phase == sched::ReplicaPhase::kLoaded,
                              snapshot.attributedMib, clock_.nowMs()},
       where);
  if (state_.findReplica(snapshot.placement.replicaId)) {
    undo(sched::ReplicaActivity{snapshot.placement.replicaId, snapshot.lastActiveMs}, where);
  }
}

std::int64_t ControlPlane::rankOf(std::string_view node) const {
  const auto id = state_.findNode(node);
  return id ? state_.node(*id).rank : 0;
}

Result<void> ControlPlane::restore() {
  // The recent events first, so that the restore's own events follow them.
  if (eventLog_ != nullptr) {
    auto history = eventLog_->recent(config_.eventHistory);
    if (!history) {
      // Best effort: the history starts empty, and the sink still numbers after what it kept.
      sinkFailed(history.error());
    } else {
      for (const store::Event& e : history->events) {
        const json body = json::parse(e.json, nullptr, false);
        if (!body.is_object()) continue;
        remember(e.seq, e.timeMs, body.value("type", ""), body.value("subject", ""),
                 body.value("message", ""));
      }
      nextSeq_ = std::max(nextSeq_, history->lastSeq + 1);
      lastSeq_ = std::max(lastSeq_, history->lastSeq);
    }
  }
  if (store_ == nullptr) return {};
  auto snapshot = store_->loadAll();
  if (!snapshot) return fail(snapshot.error());
  const std::string where = "store " + store_->describe();
  // Nodes in their rank order (ranks are stored), then models, then replicas.
  std::vector<std::pair<std::int64_t, model::NodeSpec>> nodes;
  for (const store::Document& d : snapshot->documents) {
    if (d.kind != "node") continue;
    const json body = json::parse(d.json, nullptr, false);
    auto spec = parseNode(body);
    if (!spec)
      return fail(Error::invalid(where + ": node " + d.name + ": " + spec.error().message));
    nodes.emplace_back(spec->rank.value_or(0), std::move(*spec));
  }
  std::stable_sort(nodes.begin(), nodes.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [rank, spec] : nodes) {
    if (auto added = state_.apply(sched::NodeAdded{spec}); !added) {
      return fail(Error::invalid(where + ": node " + spec.name + ": " + added.error().message));
    }
    lastHeartbeatMs_[spec.name] = clock_.nowMs();  // the agents' clocks restart with us
    nodeSpecs_.emplace(spec.name, std::move(spec));
  }
  for (const store::Document& d : snapshot->documents) {
    if (d.kind != "model") continue;
    auto profile = decodeModel(json::parse(d.json, nullptr, false));
    if (!profile) {
      return fail(Error::invalid(where + ": model " + d.name + ": " + profile.error().message));
    }
    models_.insert_or_assign(profile->name, std::move(*profile));
  }
  for (const store::Document& d : snapshot->documents) {
    if (d.kind != "replica") continue;
    const json raw = json::parse(d.json, nullptr, false);
    auto stored = readReplicaDocument(state_, raw);
    if (!stored) {
      // A pod's booking lives on the pod and its node in another object (in the API server,
      // not one transaction): a node removed while the booking stayed must not keep every
      // leader from starting. The booking is skipped and said so; anything else is refused.
      const std::string node =
          raw.is_object() ? raw.value("/placement/node"_json_pointer, std::string()) : "";
      if (raw.is_object() && raw.contains("pod") && !node.empty() && !state_.findNode(node)) {
        internalErrors_.add({{"where", "restore"}});
        note("BookingSkipped", d.name,
             "its node " + node +
                 " is not registered: the pod's GPUs are not booked until "
                 "it is bound again");
        continue;
      }
      return fail(Error::invalid(where + ": replica " + d.name + ": " + stored.error().message));
    }
    // Booked as it was: placed when it was, so that a reservation that had lapsed is charged
    // as lapsed (a document from before placement times were stored starts a fresh one).
    // Not refused for memory (sched::ReplicaRestored says why); anything else that would
    // over-commit a GPU means the store is not what was booked, and stops the restore.
    const Millis placedAtMs =
        stored->placedAtUnixMs ? std::min(*stored->placedAtUnixMs - unixOffsetMs_, clock_.nowMs())
                               : clock_.nowMs();
    if (auto placed = state_.apply(sched::ReplicaRestored{
            state_.named(stored->placement), placedAtMs, /*reservationActive=*/true, stored->loaded,
            /*attributedMib=*/{}, /*atMs=*/clock_.nowMs()});
        !placed) {
      return fail(Error::invalid(where + ": replica " + d.name + ": " + placed.error().message));
    }
    const json doc = json::parse(d.json, nullptr, false);
    if (doc.contains("pod")) pods_.insert(stored->placement.replicaId);
    if (const auto a = doc.find("allocation"); a != doc.end() && a->is_object()) {
      PodAllocation alloc;
      alloc.resource = a->value("resource", std::string(k8s::kResourceGpus));
      alloc.confirmed = a->value("confirmed", false);
      if (const auto dev = a->find("devices"); dev != a->end() && dev->is_array()) {
        for (const json& x : *dev) {
          if (x.is_string()) alloc.devices.push_back(x.get<std::string>());
        }
      }
      podAllocations_.insert_or_assign(stored->placement.replicaId, std::move(alloc));
    }
  }
  TESSERA_RETURN_IF_ERROR(restoreDeployments(snapshot->documents));
  for (const sched::GpuRecord& g : state_.gpus()) {
    if (g.freeMemoryMib() >= 0 || state_.node(g.node).removed) continue;
    // When telemetry had charged less than the estimates (it is not stored), or the store
    // holds more than was booked: said, never hidden, and nothing is placed there until the
    // agent reports again.
    const std::string gpu = state_.node(g.node).spec.name + "/" + g.spec.id;
    note("GpuOverCommitted", gpu,
         "restored replicas are charged " + std::to_string(g.chargedMib) + " MiB of " +
             std::to_string(g.spec.memoryMib) +
             " MiB (their usage telemetry is not stored); nothing more is placed there "
             "until the node's agent reports");
  }
  return {};
}

Result<void> ControlPlane::loadCluster(const config::ClusterFile& file, const std::string& source) {
  for (const model::NodeSpec& n : file.nodes) {
    if (nodeSpecs_.contains(n.name)) {
      return fail(Error::exists(source + ": node " + n.name + " is already registered"));
    }
  }
  TESSERA_RETURN_IF_ERROR(config::seedClusterState(state_, file, source));
  store::WriteSet batch;
  for (const model::NodeSpec& n : file.nodes) {
    batch.put("node", n.name, nodeDocument(n, rankOf(n.name)).dump());
    nodeSpecs_.emplace(n.name, n);
  }
  for (const model::ModelProfile& m : file.models) {
    batch.put("model", m.name, modelDocument(m).dump());
    models_.insert_or_assign(m.name, m);
  }
  for (const config::ExistingReplica& r : file.replicas) {
    const sched::ReplicaRecord& rec = state_.replica(*state_.findReplica(r.replicaId));
    batch.put("replica", r.replicaId,
              replicaDoc(rec.placement, rec.phase == sched::ReplicaPhase::kLoaded).dump());
  }
  return commit(std::move(batch), "ClusterLoaded", source,
                std::to_string(file.nodes.size()) + " nodes, " +
                    std::to_string(file.models.size()) + " models, " +
                    std::to_string(file.replicas.size()) + " replicas");
}

// ---- nodes ---------------------------------------------------------------------------------

Result<model::NodeSpec> ControlPlane::parseNode(const json& body) const {
  auto node = json_api::decodeRegisterNode(body, catalog_);
  if (!node) return fail(node.error());
  return std::move(node->spec);
}

std::optional<Error> ControlPlane::unknownNode(std::string_view node) const {
  if (nodeSpecs_.contains(node)) return std::nullopt;
  return Error::notFound("node " + std::string(node) + " is not registered");
}

std::optional<Error> ControlPlane::unknownReplica(std::string_view id) const {
  if (state_.findReplica(id)) return std::nullopt;
  return Error::notFound("replica " + std::string(id) + " is not placed");
}

std::optional<Error> ControlPlane::unknownDeployment(std::string_view name) const {
  if (deployments_.contains(name)) return std::nullopt;
  return Error::notFound("deployment " + std::string(name) + " does not exist");
}

Result<json> ControlPlane::registerNode(RegisterNode request) {
  model::NodeSpec& spec = request.spec;
  if (nodeSpecs_.contains(spec.name)) {
    return fail(Error::exists("node " + spec.name + " is already registered"));
  }
  TESSERA_RETURN_IF_ERROR(state_.apply(sched::NodeAdded{spec}));
  const std::string name = spec.name;
  store::WriteSet batch;
  batch.put("node", name, nodeDocument(spec, rankOf(name)).dump(),
            store::Precondition::mustNotExist());
  if (auto saved =
          commit(std::move(batch), "NodeRegistered", name,
                 std::to_string(spec.gpus.size()) + " GPU" + (spec.gpus.size() == 1 ? "" : "s"));
      !saved) {
    undo(sched::NodeRemoved{name, true}, "register-rollback");
    return fail(saved.error());
  }
  nodeSpecs_.emplace(name, std::move(spec));
  lastHeartbeatMs_[name] = clock_.nowMs();
  return nodeJson(*state_.findNode(name));
}

Result<HeartbeatAccepted> ControlPlane::heartbeat(std::string_view node, Heartbeat request) {
  const auto it = nodeSpecs_.find(node);
  if (it == nodeSpecs_.end())
    return fail(Error::notFound("node " + std::string(node) + " is not registered"));
  // Validate everything before applying anything: the codec checked the body's shape, the
  // GPUs it names and their figures are checked against the node's cards here.
  std::vector<sched::GpuTelemetry> telemetry;
  for (std::size_t i = 0; i < request.gpus.size(); ++i) {
    GpuReport& g = request.gpus[i];
    const std::string path = "gpus[" + std::to_string(i) + "]";
    sched::GpuTelemetry t;
    t.node = std::string(node);
    t.atMs = clock_.nowMs();
    t.gpuId = std::move(g.id);
    const auto gid = state_.findGpu(node, t.gpuId);
    if (!gid) {
      return fail(fieldError(path + ".id",
                             "node " + std::string(node) + " has no GPU \"" + t.gpuId + "\""));
    }
    // No slack: NVML's used never exceeds its total, which is the memory the agent registers
    // the card with (a catalogue figure is the nominal size, at or above NVML's total). More
    // than the card is a broken report, and would show as negative free memory.
    const std::int64_t cardMib = state_.gpu(*gid).spec.memoryMib;
    if (g.usedMib < 0 || g.usedMib > cardMib) {
      return fail(fieldError(path + ".usedMib", "must be between 0 and " + std::to_string(cardMib) +
                                                    ", got " + std::to_string(g.usedMib)));
    }
    t.usedMib = g.usedMib;
    if (g.utilizationMilli) t.utilizationMilli = *g.utilizationMilli;
    if (g.healthy) t.healthy = *g.healthy;
    for (const auto& [rid, mib] : g.replicaUsedMib) {
      if (!mib || *mib < 0 || *mib > cardMib) {
        return fail(
            fieldError(path + ".replicaUsedMib." + rid,
                       "expected a MiB count from 0 to the card's " + std::to_string(cardMib)));
      }
      t.replicaUsedMib[rid] = *mib;
    }
    telemetry.push_back(std::move(t));
  }
  // Only what the heartbeat reports changes: a patch, not the registered spec put back.
  sched::NodePatched patch;
  patch.name = std::string(node);
  patch.cachedModels = std::move(request.cachedModels);
  patch.healthy = request.healthy;
  // Everything was checked above, so the events below cannot be refused half-way (the
  // books validate them again; a refusal there would be a bug, reported as such).
  if (patch.cachedModels || patch.healthy) {
    TESSERA_RETURN_IF_ERROR(state_.apply(patch));
    if (patch.cachedModels) it->second.cachedModels = std::move(*patch.cachedModels);
    if (patch.healthy) it->second.healthy = *patch.healthy;
  }
  for (const auto& t : telemetry) {
    if (auto applied = state_.apply(t); !applied) {
      return fail(
          Error::internal("telemetry refused after validation: " + applied.error().message));
    }
    // Keep the registered spec's GPU health in step with the books (it is the node's stored
    // document, rewritten at a cordon).
    for (model::GpuSpec& g : it->second.gpus) {
      if (g.id == t.gpuId) g.healthy = t.healthy;
    }
  }
  lastHeartbeatMs_[std::string(node)] = clock_.nowMs();
  if (request.devicePool) {
    (*request.devicePool)["reportedAtMs"] = clock_.nowMs();
    devicePools_[std::string(node)] = std::move(*request.devicePool);
  }
  return HeartbeatAccepted{std::string(node), telemetry.size()};
}

Result<json> ControlPlane::setCordoned(std::string_view node, bool cordoned) {
  const auto it = nodeSpecs_.find(node);
  if (it == nodeSpecs_.end())
    return fail(Error::notFound("node " + std::string(node) + " is not registered"));
  model::NodeSpec spec = it->second;
  spec.cordoned = cordoned;
  // Assume (a patch of the cordon alone), persist, then confirm or forget.
  const bool was = it->second.cordoned;
  sched::NodePatched patch;
  patch.name = spec.name;
  patch.cordoned = cordoned;
  TESSERA_RETURN_IF_ERROR(state_.apply(patch));
  it->second = spec;
  store::WriteSet batch;
  batch.put("node", spec.name, nodeDocument(spec, rankOf(spec.name)).dump());
  if (auto saved =
          commit(std::move(batch), cordoned ? "NodeCordoned" : "NodeUncordoned", spec.name, "");
      !saved) {
    patch.cordoned = was;
    undo(patch, "cordon-forget");
    nodeSpecs_.find(node)->second.cordoned = was;
    return fail(saved.error());
  }
  return nodeJson(*state_.findNode(node));
}

Result<NodeDraining> ControlPlane::drainNode(std::string_view node) {
  const auto it = nodeSpecs_.find(node);
  if (it == nodeSpecs_.end()) {
    return fail(Error::notFound("node " + std::string(node) + " is not registered"));
  }
  // Assumed together, persisted as one batch (the cordon and both events), forgotten together.
  const std::optional<model::NodeSpec> uncordoned =
      it->second.cordoned ? std::nullopt : std::optional<model::NodeSpec>(it->second);
  store::WriteSet batch;
  std::vector<EventText> events;
  if (uncordoned) {
    model::NodeSpec spec = it->second;
    spec.cordoned = true;
    sched::NodePatched cordon;
    cordon.name = spec.name;
    cordon.cordoned = true;
    TESSERA_RETURN_IF_ERROR(state_.apply(cordon));
    batch.put("node", spec.name, nodeDocument(spec, rankOf(spec.name)).dump());
    events.push_back({"NodeCordoned", spec.name, ""});
    it->second = std::move(spec);
  }
  const Millis now = clock_.nowMs();
  std::vector<std::string> draining;
  std::vector<std::string> started;
  for (sched::ReplicaId r : state_.node(*state_.findNode(node)).replicas) {
    const std::string& id = state_.replica(r).placement.replicaId;
    ReplicaRuntime& rt = runtime_[id];
    if (!rt.drain) {
      rt.drain = std::make_unique<scale::ReplicaLifecycle>(id, now);
      started.push_back(id);
    }
    draining.push_back(id);
  }
  events.push_back(
      {"NodeDraining", std::string(node), std::to_string(draining.size()) + " replicas draining"});
  if (auto saved = commit(std::move(batch), std::move(events)); !saved) {
    for (const std::string& id : started) {
      if (auto rt = runtime_.find(id); rt != runtime_.end()) rt->second.drain.reset();
    }
    if (uncordoned) {
      sched::NodePatched uncordon;
      uncordon.name = uncordoned->name;
      uncordon.cordoned = false;
      undo(uncordon, "drain-forget");
      nodeSpecs_.find(node)->second = *uncordoned;
    }
    return fail(saved.error());
  }
  // Deployments replace what drains at their next sync period (a draining replica is not
  // capacity), on other nodes since this one is cordoned.
  return NodeDraining{std::string(node), std::move(draining)};
}

Result<Removed> ControlPlane::removeNode(std::string_view node, bool force) {
  const auto it = nodeSpecs_.find(node);
  if (it == nodeSpecs_.end())
    return fail(Error::notFound("node " + std::string(node) + " is not registered"));
  const sched::NodeId nodeId = *state_.findNode(node);
  const sched::NodeRecord& rec = state_.node(nodeId);
  if (!rec.replicas.empty() && !force) {
    return fail(Error::precondition("node " + std::string(node) + " still holds " +
                                    std::to_string(rec.replicas.size()) +
                                    " replicas; remove them first, or force"));
  }
  // What forgetting needs: the node as registered (with its rank) and its replicas as booked.
  const std::string name(node);
  model::NodeSpec spec = it->second;
  spec.rank = rec.rank;
  std::vector<sched::ReplicaRecord> replicas;
  store::WriteSet batch;
  batch.remove("node", name);
  for (sched::ReplicaId r : rec.replicas) {
    replicas.push_back(state_.replica(r));
    batch.remove("replica", state_.replica(r).placement.replicaId);
  }
  std::optional<Millis> heartbeat;
  if (const auto h = lastHeartbeatMs_.find(node); h != lastHeartbeatMs_.end()) {
    heartbeat = h->second;
    lastHeartbeatMs_.erase(h);
  }
  std::optional<json> pool;
  if (const auto p = devicePools_.find(node); p != devicePools_.end()) {
    pool = std::move(p->second);
    devicePools_.erase(p);
  }
  // Assume.
  if (auto removed = state_.apply(sched::NodeRemoved{name, force}); !removed) {
    if (heartbeat) lastHeartbeatMs_[name] = *heartbeat;
    if (pool) devicePools_[name] = std::move(*pool);
    return fail(Error::internal("books refused a checked removal: " + removed.error().message));
  }
  nodeSpecs_.erase(it);
  if (auto saved =
          commit(std::move(batch), "NodeRemoved", name, force ? "forced, with its replicas" : "");
      !saved) {
    // Forget: the node back as it was registered (its GPU telemetry returns with the agent's
    // next heartbeat), and its replicas as they were booked, on its GPUs by their position.
    undo(sched::NodeAdded{spec}, "remove-node-forget");
    if (const auto again = state_.findNode(name)) {
      const sched::NodeRecord& back = state_.node(*again);
      for (sched::ReplicaRecord r : replicas) {
        r.placement.node = *again;
        for (sched::GpuAssignment& g : r.placement.gpus) {
          g.gpu = back.gpuIds[static_cast<std::size_t>(state_.gpu(g.gpu).indexInNode)];
        }
        restore(r, "remove-node-forget");
      }
    }
    nodeSpecs_.emplace(name, std::move(spec));
    if (heartbeat) lastHeartbeatMs_[name] = *heartbeat;
    if (pool) devicePools_[name] = std::move(*pool);
    return fail(saved.error());
  }
  return Removed{.kind = "node", .name = name};
}

json ControlPlane::nodeJson(sched::NodeId id) const {
  const sched::NodeRecord& n = state_.node(id);
  json gpus = json::array();
  for (sched::GpuId g : n.gpuIds) gpus.push_back(sched::gpuJson(state_, state_.gpu(g)));
  json replicas = json::array();
  for (sched::ReplicaId r : n.replicas) replicas.push_back(state_.replica(r).placement.replicaId);
  return {{"name", n.spec.name},
          {"healthy", n.spec.healthy},
          {"cordoned", n.spec.cordoned},
          {"labels", n.spec.labels},
          {"cpuMilli", n.spec.cpuMilli},
          {"bookedCpuMilli", n.bookedCpuMilli},
          {"hostMemoryMib", n.spec.hostMemoryMib},
          {"bookedHostMemoryMib", n.bookedHostMemoryMib},
          {"cachedModels", n.spec.cachedModels},
          {"gpus", std::move(gpus)},
          {"replicas", std::move(replicas)},
          {"devicePool", devicePools_.contains(n.spec.name) ? devicePools_.find(n.spec.name)->second
                                                             : json(nullptr)}};
}

json ControlPlane::listNodes() const {
  json out = json::array();
  for (std::size_t i = 0; i < state_.nodes().size(); ++i) {
    if (!state_.nodes()[i].removed) out.push_back(nodeJson(static_cast<sched::NodeId>(i)));
  }
  return json{{"nodes", std::move(out)}};
}

Result<json> ControlPlane::getNode(std::string_view node) const {
  const auto id = state_.findNode(node);
  if (!id || state_.node(*id).removed) {
    return fail(Error::notFound("node " + std::string(node) + " is not registered"));
  }
  return nodeJson(*id);
}

// ---- models --------------------------------------------------------------------------------

Result<json> ControlPlane::putModel(PutModel request) {
  model::ModelProfile profile = std::move(request.profile);
  const std::string name = profile.name;
  const std::string message = std::to_string(profile.memoryPerGpuMib()) + " MiB per GPU";
  store::WriteSet batch;
  batch.put("model", name, modelDocument(profile).dump());
  // Assume, persist, then confirm or forget.
  std::optional<model::ModelProfile> previous = findModel(name);
  models_.insert_or_assign(name, std::move(profile));
  if (auto saved =
          commit(std::move(batch), previous ? "ModelUpdated" : "ModelRegistered", name, message);
      !saved) {
    if (previous) {
      models_.insert_or_assign(name, std::move(*previous));
    } else {
      models_.erase(models_.find(name));
    }
    return fail(saved.error());
  }
  return getModel(name);
}

Result<Removed> ControlPlane::deleteModel(std::string_view name) {
  if (!models_.contains(name)) {
    return fail(Error::notFound("model " + std::string(name) + " is not registered"));
  }
  std::vector<std::string> users;
  for (const auto& [deployment, d] : deployments_) {
    if (d->model == name) users.push_back("deployment " + deployment);
  }
  for (const auto& r : state_.replicas()) {
    if (!r.removed && r.placement.modelName == name) users.push_back("replica " + r.placement.replicaId);
  }
  if (!users.empty()) {
    std::string list;
    for (std::size_t i = 0; i < users.size() && i < 5; ++i) list += (i ? ", " : "") + users[i];
    if (users.size() > 5) list += ", ... (" + std::to_string(users.size() - 5) + " more)";
    return fail(Error::precondition("model " + std::string(name) + " is in use by " + list +
                                    "; delete or change those first"));
  }
  store::WriteSet batch;
  batch.remove("model", std::string(name));
  const auto at = models_.find(name);
  model::ModelProfile profile = std::move(at->second);
  models_.erase(at);  // assumed
  if (auto saved = commit(std::move(batch), "ModelDeleted", std::string(name), ""); !saved) {
    models_.emplace(std::string(name), std::move(profile));  // forgotten
    return fail(saved.error());
  }
  return Removed{.kind = "model", .name = std::string(name), .deleted = true};
}

std::optional<model::ModelProfile> ControlPlane::findModel(std::string_view name) const {
  const auto it = models_.find(name);
  if (it == models_.end()) return std::nullopt;
  return it->second;
}

Result<json> ControlPlane::getModel(std::string_view name) const {
  const auto it = models_.find(name);
  if (it == models_.end())
    return fail(Error::notFound("model " + std::string(name) + " is not registered"));
  // Everything the profile holds (what the store keeps, in the keys it was posted with), and
  // the per-GPU memory it comes to.
  json out = modelDocument(it->second);
  out["memoryPerGpuMib"] = it->second.memoryPerGpuMib();
  return out;
}

json ControlPlane::listModels() const {
  json out = json::array();
  for (const auto& [name, p] : models_) out.push_back(*getModel(name));
  return json{{"models", std::move(out)}};
}

// ---- replicas ------------------------------------------------------------------------------

std::expected<json, DetailedError> ControlPlane::placeReplicas(PlaceReplicas request) {
  auto bad = [](Error e) { return std::unexpected(DetailedError{std::move(e), nullptr}); };
  if (auto resolved = resolveRegisteredModel(request, models_); !resolved) {
    return bad(resolved.error());
  }
  const std::vector<model::PlacementRequest>& requests = request.requests;
  for (const auto& r : requests) {
    if (state_.findReplica(r.replicaId)) {
      return bad(Error::exists("replica " + r.replicaId + " is already placed"));
    }
  }
  // All or nothing: place one by one, and unload the ones already placed when one fails.
  std::vector<std::string> placed;
  for (const auto& r : requests) {
    const auto start = std::chrono::steady_clock::now();
    sched::Decision d = engine_.place(state_, r);
    decisionLatency_.observe(
        {}, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!d.placement) {
      for (const std::string& id : placed) undo(sched::ReplicaUnloaded{id}, "place-rollback");
      placements_.add({{"result", "unplaceable"}});
      note("ReplicaUnplaceable", r.replicaId, d.summary);
      json detail = {{"replica", r.replicaId},
                     {"summary", d.summary},
                     {"rejections", sched::rejectionsJson(d.rejections)}};
      const ErrorCode code =
          d.requestRefused ? ErrorCode::kInvalidArgument : ErrorCode::kResourceExhausted;
      return std::unexpected(
          DetailedError{Error{code, "replica " + r.replicaId + " does not fit: " + d.summary},
                        std::move(detail)});
    }
    placed.push_back(r.replicaId);
  }
  store::WriteSet batch;
  std::string where;
  for (const std::string& id : placed) {
    const sched::ReplicaRecord& rec = state_.replica(*state_.findReplica(id));
    batch.put("replica", id, replicaDoc(rec.placement, false).dump(),
              store::Precondition::mustNotExist());
    where += (where.empty() ? "" : ", ") + id + " on " + state_.node(rec.placement.node).spec.name;
  }
  if (auto saved =
          commit(std::move(batch), "ReplicaPlaced", placed.size() == 1 ? placed[0] : "", where);
      !saved) {
    for (const std::string& id : placed) undo(sched::ReplicaUnloaded{id}, "place-rollback");
    return bad(saved.error());
  }
  json out = json::array();
  for (const std::string& id : placed) {
    placements_.add({{"result", "placed"}});
    out.push_back(replicaJson(*state_.findReplica(id)));
  }
  return json{{"replicas", std::move(out)}};
}

Result<json> ControlPlane::replicaLoaded(std::string_view id) {
  if (!state_.findReplica(id))
    return fail(Error::notFound("replica " + std::string(id) + " is not placed"));
  // Assume, persist, then confirm or forget (the replica back as it was booked).
  const sched::ReplicaRecord before = state_.replica(*state_.findReplica(id));
  TESSERA_RETURN_IF_ERROR(state_.apply(sched::ReplicaLoaded{std::string(id)}));
  const sched::ReplicaRecord& rec = state_.replica(*state_.findReplica(id));
  store::WriteSet batch;
  batch.put("replica", std::string(id), replicaDoc(rec.placement, true).dump());
  if (auto saved = commit(std::move(batch), "ReplicaLoaded", std::string(id), ""); !saved) {
    undo(sched::ReplicaUnloaded{std::string(id)}, "loaded-forget");
    restore(before, "loaded-forget");
    return fail(saved.error());
  }
  if (before.phase == sched::ReplicaPhase::kReserved && clock_.nowMs() >= before.placedAtMs) {
    loadDuration_.observe({{"model", before.placement.modelName}},
                          (clock_.nowMs() - before.placedAtMs) / 1000.0);
  }
  return replicaJson(*state_.findReplica(id));
}

Result<Removed> ControlPlane::removeReplica(std::string_view id) {
  if (!state_.findReplica(id))
    return fail(Error::notFound("replica " + std::string(id) + " is not placed"));
  // Assume, persist, then confirm or forget (the replica back as it was booked, with its pod
  // allocation).
  const std::string name(id);
  const sched::ReplicaRecord before = state_.replica(*state_.findReplica(id));
  std::optional<PodAllocation> allocation;
  if (const auto a = podAllocations_.find(id); a != podAllocations_.end()) {
    allocation = std::move(a->second);
    podAllocations_.erase(a);
  }
  bool pod = false;
  if (const auto p = pods_.find(id); p != pods_.end()) {
    pods_.erase(p);
    pod = true;
  }
  if (auto unloaded = state_.apply(sched::ReplicaUnloaded{name}); !unloaded) {
    if (allocation) podAllocations_[name] = std::move(*allocation);
    if (pod) pods_.insert(name);
    return fail(unloaded.error());
  }
  store::WriteSet batch;
  batch.remove("replica", name);
  if (auto saved = commit(std::move(batch), "ReplicaRemoved", name, ""); !saved) {
    restore(before, "remove-replica-forget");
    if (allocation) podAllocations_[name] = std::move(*allocation);
    if (pod) pods_.insert(name);
    return fail(saved.error());
  }
  return Removed{.kind = "replica", .name = name};
}

json ControlPlane::replicaJson(sched::ReplicaId id) const {
  const sched::ReplicaRecord& r = state_.replica(id);
  json out = sched::placementJson(state_, r.placement);
  out["phase"] = phaseName(r.phase);
  out["reservationActive"] = r.reservationActive;
  out["placedAtMs"] = r.placedAtMs;
  return out;
}

json ControlPlane::listReplicas() const {
  json out = json::array();
  for (std::size_t i = 0; i < state_.replicas().size(); ++i) {
    if (!state_.replicas()[i].removed) out.push_back(replicaJson(static_cast<sched::ReplicaId>(i)));
  }
  return json{{"replicas", std::move(out)}};
}

Result<json> ControlPlane::getReplica(std::string_view id) const {
  const auto r = state_.findReplica(id);
  if (!r) return fail(Error::notFound("replica " + std::string(id) + " is not placed"));
  return replicaJson(*r);
}

Result<json> ControlPlane::explain(PlaceReplicas request) {
  TESSERA_RETURN_IF_ERROR(resolveRegisteredModel(request, models_));
  const model::PlacementRequest& r = request.requests.front();
  sched::DecideOptions opts;
  opts.explain = true;
  const sched::Decision d = engine_.decide(state_, r, opts);
  json counts = json::array();
  for (const auto& c : d.rejectionCounts) {
    counts.push_back({{"plugin", c.plugin}, {"nodes", c.nodes}, {"gpus", c.gpus}});
  }
  // What would make it fit, as `tessera place` says it: an eviction plan, else capacity that
  // was tried on a copy of the cluster (never on the books themselves).
  json eviction = nullptr;
  if (!d.placement && !d.requestRefused) {
    eviction = sched::evictionJson(state_, sched::planEviction(engine_, state_, r));
  }
  return json{
      {"replica", r.replicaId},
      {"fits", d.placement.has_value()},
      {"eviction", std::move(eviction)},
      {"placement", d.placement ? sched::placementJson(state_, *d.placement) : json(nullptr)},
      {"totalScore", d.placement ? json(d.totalScore) : json(nullptr)},
      {"scoreBreakdown", sched::breakdownJson(d.breakdown)},
      {"feasibleOptions", d.feasibleOptions},
      {"summary", d.summary},
      {"rejectionCounts", std::move(counts)},
      {"rejections", sched::rejectionsJson(d.rejections)}};
}

}  // namespace tessera::api
