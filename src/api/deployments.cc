// Deployments: replica counts kept where each deployment's autoscaler puts them. The
// autoscaler (scale/) decides from the engine signals that scrapers and node agents report;
// this file turns its decisions into placements through the engine and into drains.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "api/codec.h"
#include "api/control_plane.h"
#include "api/json_api.h"
#include "api/json_fields.h"
#include "sched/state_json.h"

namespace tessera::api {

using nlohmann::json;

namespace {

// "<deployment>-<n>" → n, or -1.
int replicaIndex(std::string_view deployment, std::string_view id) {
  if (id.size() <= deployment.size() + 1 || !id.starts_with(deployment) ||
      id[deployment.size()] != '-') {
    return -1;
  }
  const std::string_view digits = id.substr(deployment.size() + 1);
  int n = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  return ec == std::errc() && end == digits.data() + digits.size() ? n : -1;
}

}  // namespace

Result<std::unique_ptr<ControlPlane::Deployment>> ControlPlane::makeDeployment(
    DeploymentSpec spec) const {
  const auto model = models_.find(spec.model);
  if (model == models_.end()) {
    return fail(fieldError("model", "unknown model \"" + spec.model +
                                        "\" (register it with POST /api/v1/models first)"));
  }
  auto d = std::make_unique<Deployment>();
  d->name = spec.name;
  d->model = spec.model;
  d->version = spec.version.value_or("");
  d->placedByKubernetes = spec.placedByKubernetes;
  d->minReplicas = spec.effectiveMinReplicas();
  d->maxReplicas = spec.effectiveMaxReplicas();
  d->priority = spec.priority.value_or(model->second.priority);
  d->sloTtftMs = spec.sloTtftMs;
  d->config = spec.autoscalerConfig();
  auto scaler = scale::Autoscaler::create(d->config);
  if (!scaler) return fail(Error::invalid("autoscaling: " + scaler.error().message));
  d->autoscaler = std::move(*scaler);
  d->spec = std::move(spec);
  return d;
}

Result<std::unique_ptr<ControlPlane::Deployment>> ControlPlane::parseDeployment(
    const json& body) const {
  auto request = json_api::decodePutDeployment(body);
  if (!request) return fail(request.error());
  return makeDeployment(std::move(request->spec));
}

int ControlPlane::adopt(Deployment& d) const {
  int serving = 0;
  for (const auto& r : state_.replicas()) {
    if (r.removed || r.placement.deployment != d.name) continue;
    d.nextIndex = std::max(d.nextIndex, replicaIndex(d.name, r.placement.replicaId) + 1);
    const auto rt = runtime_.find(r.placement.replicaId);
    if (rt == runtime_.end() || !rt->second.drain) ++serving;
  }
  return serving;
}

Result<json> ControlPlane::putDeployment(PutDeployment request) {
  auto made = makeDeployment(std::move(request.spec));
  if (!made) return fail(made.error());
  std::unique_ptr<Deployment> d = std::move(*made);
  const scale::AutoscalerConfig& c = d->config;
  const auto existing = deployments_.find(d->name);
  const bool update = existing != deployments_.end();
  store::WriteSet batch;
  batch.put("deployment", d->name, deploymentDocument(d->spec).dump());
  // Keep what the running deployment knows: its replica numbering and current target.
  const int serving = adopt(*d);
  d->desired =
      std::clamp(update ? existing->second->desired : serving, d->minReplicas, d->maxReplicas);
  const std::string name = d->name;
  const std::string message = d->model + ", " + std::to_string(d->minReplicas) + ".." +
                              std::to_string(d->maxReplicas) + " replicas, " + c.recommender;
  // Assume, persist, then confirm or forget (the deployment as it was, or none).
  std::unique_ptr<Deployment> previous = update ? std::move(existing->second) : nullptr;
  Deployment& ref = *d;
  deployments_.insert_or_assign(name, std::move(d));
  if (auto saved = commit(std::move(batch), update ? "DeploymentUpdated" : "DeploymentCreated",
                          name, message);
      !saved) {
    if (previous) {
      deployments_.insert_or_assign(name, std::move(previous));
    } else {
      deployments_.erase(deployments_.find(name));
    }
    return fail(saved.error());
  }
  if (serving < ref.desired && !ref.placedByKubernetes) {
    // A store that refuses is the deployment's pending state (pendingFilter "Store"), which
    // its status shows; the next sync tries again. The deployment itself is stored.
    (void)addReplicas(ref, ref.desired - serving, clock_.nowMs());
  }
  return getDeployment(ref.name);
}

Result<Removed> ControlPlane::deleteDeployment(std::string_view name) {
  const auto it = deployments_.find(name);
  if (it == deployments_.end()) {
    return fail(Error::notFound("deployment " + std::string(name) + " does not exist"));
  }
  store::WriteSet batch;
  batch.remove("deployment", std::string(name));
  // Assume: the deployment goes and its replicas start draining (pods' bookings go when
  // Kubernetes deletes the pods).
  const Millis now = clock_.nowMs();
  std::vector<std::string> started;
  for (const auto& r : state_.replicas()) {
    if (it->second->placedByKubernetes) break;
    if (r.removed || r.placement.deployment != name) continue;
    ReplicaRuntime& rt = runtime_[r.placement.replicaId];
    if (!rt.drain) {
      rt.drain = std::make_unique<scale::ReplicaLifecycle>(r.placement.replicaId, now);
      started.push_back(r.placement.replicaId);
    }
  }
  std::unique_ptr<Deployment> gone = std::move(it->second);
  deployments_.erase(it);
  if (auto saved =
          commit(std::move(batch), "DeploymentDeleted", std::string(name), "draining its replicas");
      !saved) {
    // Forget: the deployment back, its replicas serving again.
    for (const std::string& id : started) {
      if (auto rt = runtime_.find(id); rt != runtime_.end()) rt->second.drain.reset();
    }
    deployments_.emplace(std::string(name), std::move(gone));
    return fail(saved.error());
  }
  return Removed{.kind = "deployment",
                 .name = std::string(name),
                 .deleted = true,
                 .draining = static_cast<int>(started.size())};
}

Result<void> ControlPlane::addReplicas(Deployment& d, int count, Millis now,
                                       std::optional<std::int32_t> shareMilli) {
  (void)now;
  const auto modelIt = models_.find(d.model);
  if (modelIt == models_.end()) {
    d.pending = count;
    d.pendingReason = "model " + d.model + " is no longer registered";
    d.pendingFilter = "UnknownModel";
    return {};
  }
  int placedNow = 0;
  for (int i = 0; i < count; ++i) {
    model::PlacementRequest r;
    r.model = modelIt->second;
    r.model.priority = d.priority;
    r.deployment = d.name;
    r.replicaId = d.name + "-" + std::to_string(d.nextIndex);
    // The autoscaler saw requests queue while GPU compute idles: the replicas are bound by
    // concurrency, not compute, so a new one books the compute a replica actually uses
    // (`shareMilli`) instead of its profile's, and shares a card with other replicas when the
    // model allows sharing. The engine still decides where.
    if (shareMilli && model::allows(r.model.sharing, model::SharingMode::kShared) &&
        r.model.computeMilli > *shareMilli) {
      r.model.computeMilli = *shareMilli;
      r.model.sharing = static_cast<model::SharingModes>(model::SharingMode::kShared);
    }
    const sched::Decision decision = engine_.place(state_, r);
    if (!decision.placement) {
      d.pending = count - placedNow;
      d.pendingReason = decision.summary;
      d.pendingFilter = "NoCapacity";
      int most = -1;
      for (const auto& rc : decision.rejectionCounts) {
        if (rc.nodes + rc.gpus > most) {
          most = rc.nodes + rc.gpus;
          d.pendingFilter = rc.plugin;
        }
      }
      placements_.add({{"result", "unplaceable"}});
      note("ReplicaPending", r.replicaId, decision.summary);
      return {};
    }
    store::WriteSet batch;
    batch.put("replica", r.replicaId, replicaDoc(*decision.placement, false).dump(),
              store::Precondition::mustNotExist());
    if (auto saved = commit(
            std::move(batch), "ReplicaPlaced", r.replicaId,
            "for deployment " + d.name + " on " + state_.node(decision.placement->node).spec.name);
        !saved) {
      undo(sched::ReplicaUnloaded{r.replicaId}, "scale-up-rollback");
      d.pending = count - placedNow;
      d.pendingReason = saved.error().message;
      d.pendingFilter = "Store";
      return fail(saved.error());
    }
    placements_.add({{"result", "placed"}});
    ++d.nextIndex;
    ++placedNow;
  }
  d.pending = 0;
  d.pendingReason.clear();
  d.pendingFilter.clear();
  return {};
}

scale::DeploymentSignals ControlPlane::signalsOf(const Deployment& d, Millis now) const {
  scale::DeploymentSignals s;
  s.nowMs = now;
  const bool fresh = d.signalsAtMs >= 0 && now - d.signalsAtMs <= config_.signalTtlMs;
  if (fresh) {
    s.arrivalRatePerSec = d.arrivalRatePerSec;
    s.meanServiceMs = d.meanServiceMs;
    s.ttftP99Ms = d.ttftP99Ms;
    s.meanPrefillMs = d.meanPrefillMs;
    s.prefillP99Ms = d.prefillP99Ms;
    s.bufferedRequests = d.bufferedRequests;
  }
  for (const auto& r : state_.replicas()) {
    if (r.removed || r.placement.deployment != d.name) continue;
    scale::ReplicaSignals rs;
    rs.id = r.placement.replicaId;
    rs.createdMs = r.placedAtMs;
    rs.priority = r.placement.priority;
    double fraction = 0;
    std::int64_t mib = 0;
    for (const auto& g : r.placement.gpus) {
      fraction +=
          r.placement.mode == model::SharingMode::kExclusive ? 1.0 : g.computeMilli / 1000.0;
      mib += g.estimateMib;
    }
    rs.gpuFraction = fraction;
    const auto rt = runtime_.find(rs.id);
    if (rt != runtime_.end() && rt->second.drain) {
      rs.phase = scale::ReplicaPhase::kDraining;
    } else if (r.phase == sched::ReplicaPhase::kLoaded) {
      rs.phase = scale::ReplicaPhase::kReady;
    } else {
      rs.phase = scale::ReplicaPhase::kLoading;
      rs.expectedReadyMs = rt != runtime_.end() && rt->second.expectedReadyMs
                               ? *rt->second.expectedReadyMs
                               : r.placedAtMs + config_.engineStartMs +
                                     static_cast<Millis>(1000.0 * static_cast<double>(mib) /
                                                         std::max(1.0, config_.loadBandwidthMiBps));
    }
    if (rt != runtime_.end()) {
      rs.maxConcurrency = rt->second.signals.maxConcurrency;
      if (rt->second.signalsAtMs >= 0 && now - rt->second.signalsAtMs <= config_.signalTtlMs) {
        rs.waiting = rt->second.signals.waiting;
        rs.running = rt->second.signals.running;
        rs.kvCacheUsage = rt->second.signals.kvCacheUsage;
        rs.gpuUtilization = rt->second.signals.gpuUtilization;
        rs.computeActive = rt->second.signals.computeActive;
        rs.prefillsPerSec = rt->second.signals.prefillsPerSec;
      }
    }
    s.replicas.push_back(std::move(rs));
  }
  // Replicas asked for but not placed yet count as loading (capacity on its way), so the
  // autoscaler does not ask for them again every period.
  for (int i = 0; i < d.pending; ++i) {
    scale::ReplicaSignals rs;
    rs.id = "(unplaced " + std::to_string(i) + ")";  // never a replica id: not a DNS name
    rs.phase = scale::ReplicaPhase::kLoading;
    rs.unplaced = true;
    rs.createdMs = now;
    rs.priority = d.priority;
    s.replicas.push_back(std::move(rs));
  }
  return s;
}

std::optional<scale::ShareRule> ControlPlane::shareRuleOf(const Deployment& d) const {
  // GPU shares are tessera's answer to a deployment whose prompts need less than a GPU; they
  // need the SLO the rule keeps, and a model whose profile allows sharing a card.
  if (d.config.recommender != "tessera" || !d.sloTtftMs) return std::nullopt;
  const auto m = models_.find(d.model);
  if (m == models_.end() || !model::allows(m->second.sharing, model::SharingMode::kShared)) {
    return std::nullopt;
  }
  scale::ShareRule rule;
  rule.sloTtftMs = d.sloTtftMs;
  for (const auto& [key, value] : d.config.args) {
    if (key == "sloTarget") rule.sloTarget = value;
  }
  return rule;
}

void ControlPlane::reconcile(Deployment& d, Millis now) {
  if (now - d.lastEvalMs < static_cast<Millis>(d.config.syncPeriodSeconds) * 1000) return;
  d.lastEvalMs = now;
  const scale::DeploymentSignals signals = signalsOf(d, now);
  const scale::Decision decision = d.autoscaler->evaluate(signals);
  d.lastReason = decision.reason;
  const int before = d.desired;
  d.desired = decision.desiredReplicas;
  d.warm = decision.warmReplicas;
  // The same plan the serving simulator executes (scale/reconcile.h).
  scale::ReconcileOptions options;
  options.share = shareRuleOf(d);
  options.minReplicas = d.config.minReplicas;
  const scale::ReconcilePlan plan = scale::planReconcile(decision, signals, options);
  if (d.placedByKubernetes) {
    // The controller runs the pods; the ones not bound yet are capacity on its way.
    d.pending = plan.place;
    d.pendingReason =
        d.pending > 0 ? std::to_string(d.pending) + " pods not bound through the extender yet" : "";
    d.pendingFilter = d.pending > 0 ? "Kubernetes" : "";
  } else if (plan.place > 0) {
    std::optional<std::int32_t> share;
    if (plan.share && plan.share->milli < 1000) {
      share = plan.share->milli;
      d.lastReason += "; " + plan.share->reason;
    }
    (void)addReplicas(d, plan.place, now, share);  // a failure is the pending state, as above
  } else {
    d.pending = 0;
    d.pendingReason.clear();
    d.pendingFilter.clear();
    for (const std::string& id : plan.retire) {
      ReplicaRuntime& rt = runtime_[id];
      if (rt.drain) continue;
      rt.drain = std::make_unique<scale::ReplicaLifecycle>(id, now);
      note("ReplicaDraining", id, "scale-down of " + d.name);
    }
  }
  if (d.desired != before) {
    note(d.desired > before ? "ScaledUp" : "ScaledDown", d.name,
         std::to_string(before) + " → " + std::to_string(d.desired) + ": " + decision.reason);
  }
}

void ControlPlane::advanceDrains(Millis now) {
  std::vector<std::string> gone;
  for (auto& [id, rt] : runtime_) {
    if (!rt.drain) continue;
    int inFlight = 0;
    if (rt.signalsAtMs >= 0 && now - rt.signalsAtMs <= config_.signalTtlMs) {
      inFlight = static_cast<int>(rt.signals.running.value_or(0) + rt.signals.waiting.value_or(0));
    }
    if (rt.drain->advance(now, inFlight) == scale::DrainPhase::kGone) gone.push_back(id);
  }
  for (const std::string& id : gone) {
    if (const auto rid = state_.findReplica(id)) {
      // Assume, persist, then confirm or forget (booked again, and retried next tick).
      const sched::ReplicaRecord before = state_.replica(*rid);
      undo(sched::ReplicaUnloaded{id}, "drain-remove");
      store::WriteSet batch;
      batch.remove("replica", id);
      if (!commit(std::move(batch), "ReplicaRemoved", id, "drained")) {
        restore(before, "drain-remove-forget");
        continue;
      }
    }
    runtime_.erase(id);
  }
}

Result<SignalsAccepted> ControlPlane::replicaSignals(std::string_view id,
                                                     const ReportReplicaSignals& request) {
  if (auto missing = unknownReplica(id)) return fail(std::move(*missing));
  ReplicaRuntime& rt = runtime_[std::string(id)];
  rt.signals.waiting = request.waiting;
  rt.signals.running = request.running;
  rt.signals.kvCacheUsage = request.kvCacheUsage;
  rt.signals.gpuUtilization = request.gpuUtilization;
  rt.signals.computeActive = request.computeActive;
  rt.signals.prefillsPerSec = request.prefillsPerSec;
  if (request.maxConcurrency) rt.signals.maxConcurrency = *request.maxConcurrency;
  if (request.expectedReadyMs) rt.expectedReadyMs = static_cast<Millis>(*request.expectedReadyMs);
  rt.signalsAtMs = clock_.nowMs();
  return SignalsAccepted{"replica", std::string(id)};
}

Result<SignalsAccepted> ControlPlane::deploymentSignals(std::string_view name,
                                                        const ReportDeploymentSignals& request) {
  const auto it = deployments_.find(name);
  if (it == deployments_.end()) return fail(*unknownDeployment(name));
  Deployment& d = *it->second;
  d.arrivalRatePerSec = request.arrivalRatePerSec;
  d.meanServiceMs = request.meanServiceMs;
  d.ttftP99Ms = request.ttftP99Ms;
  d.meanPrefillMs = request.meanPrefillMs;
  d.prefillP99Ms = request.prefillP99Ms;
  d.bufferedRequests = request.bufferedRequests;
  d.signalsAtMs = clock_.nowMs();
  return SignalsAccepted{"deployment", std::string(name)};
}

json ControlPlane::deploymentJson(const Deployment& d) const {
  int ready = 0, loading = 0, draining = 0;
  json replicas = json::array();
  for (const auto& r : state_.replicas()) {
    if (r.removed || r.placement.deployment != d.name) continue;
    const auto rt = runtime_.find(r.placement.replicaId);
    std::string phase;
    if (rt != runtime_.end() && rt->second.drain) {
      ++draining;
      phase = std::string("draining:") + scale::drainPhaseName(rt->second.drain->phase());
    } else if (r.phase == sched::ReplicaPhase::kLoaded) {
      ++ready;
      phase = "ready";
    } else {
      ++loading;
      phase = "loading";
    }
    replicas.push_back({{"replica", r.placement.replicaId},
                        {"node", state_.node(r.placement.node).spec.name},
                        {"phase", phase}});
  }
  return {{"name", d.name},
          {"model", d.model},
          {"version", d.version},
          {"minReplicas", d.minReplicas},
          {"maxReplicas", d.maxReplicas},
          {"priority", d.priority},
          {"sloTtftMs", d.sloTtftMs ? json(*d.sloTtftMs) : json(nullptr)},
          {"recommender", d.config.recommender},
          {"placedBy", d.placedByKubernetes ? "kubernetes" : "tessera"},
          {"status",
           {{"desired", d.desired},
            {"warm", d.warm},
            {"ready", ready},
            {"loading", loading},
            {"draining", draining},
            {"pending", d.pending},
            {"pendingReason", d.pendingReason},
            {"lastDecision", d.lastReason}}},
          {"replicas", std::move(replicas)}};
}

json ControlPlane::listDeployments() const {
  json out = json::array();
  for (const auto& [name, d] : deployments_) out.push_back(deploymentJson(*d));
  return json{{"deployments", std::move(out)}};
}

Result<json> ControlPlane::getDeployment(std::string_view name) const {
  const auto it = deployments_.find(name);
  if (it == deployments_.end()) {
    return fail(Error::notFound("deployment " + std::string(name) + " does not exist"));
  }
  return deploymentJson(*it->second);
}

Result<void> ControlPlane::restoreDeployments(const std::vector<store::Document>& docs) {
  for (const store::Document& doc : docs) {
    if (doc.kind != "deployment") continue;
    // The API's own parser checks the stored spec; nothing is placed or written here: the
    // first tick reconciles (and persists) whatever is missing.
    auto parsed = parseDeployment(json::parse(doc.json, nullptr, false));
    if (!parsed) {
      return fail(Error::invalid("store " + store_->describe() + ": deployment " + doc.name + ": " +
                                 parsed.error().message));
    }
    std::unique_ptr<Deployment> d = std::move(*parsed);
    d->desired = std::clamp(adopt(*d), d->minReplicas, d->maxReplicas);
    deployments_.insert_or_assign(d->name, std::move(d));
  }
  return {};
}

}  // namespace tessera::api
