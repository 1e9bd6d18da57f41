// Deployments: replica counts kept where each deployment's autoscaler puts them. The
// autoscaler (scale/) decides from the engine signals that scrapers and node agents report;
// this file turns its decisions into placements through the engine and into drains.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "api/codec.h"
#include "api/control_plane.h"
#include "api/json_fields.h"
#include "common/names.h"
#include "sched/state_json.h"

namespace tessera::api {

using nlohmann::json;

namespace {

Result<int> readInt(const json& obj, std::string_view key, int min, int max, int fallback) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_number_integer() || it->get<std::int64_t>() < min || it->get<std::int64_t>() > max) {
    return fail(fieldError(
        key, "expected a whole number from " + std::to_string(min) + " to " + std::to_string(max)));
  }
  return it->get<int>();
}

Result<std::optional<double>> readNumber(const json& obj, std::string_view key, double min,
                                         double max) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number() || it->get<double>() < min || it->get<double>() > max) {
    return fail(fieldError(
        key, "expected a number from " + std::to_string(min) + " to " + std::to_string(max)));
  }
  return std::optional<double>(it->get<double>());
}

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

Result<std::unique_ptr<ControlPlane::Deployment>> ControlPlane::parseDeployment(
    const json& body) const {
  TESSERA_RETURN_IF_ERROR(onlyKeys(body, "",
                                   {"name", "model", "version", "minReplicas", "maxReplicas",
                                    "priority", "sloTtftMs", "autoscaling", "placedBy"}));
  auto d = std::make_unique<Deployment>();
  const auto name = body.find("name");
  if (name == body.end() || !name->is_string()) return fail(fieldError("name", "required text"));
  // A subdomain of at most 63 characters: a label value on the pods it runs, and the stem of its
  // replicas' ids.
  if (auto why = checkName(name->get<std::string>(), NameKind::kSubdomain, 63)) {
    return fail(fieldError("name", *why));
  }
  d->name = name->get<std::string>();
  const auto model = body.find("model");
  if (model == body.end() || !model->is_string()) return fail(fieldError("model", "required text"));
  d->model = model->get<std::string>();
  if (!models_.contains(d->model)) {
    return fail(fieldError("model", "unknown model \"" + d->model +
                                        "\" (register it with POST /api/v1/models first)"));
  }
  if (const auto v = body.find("version"); v != body.end()) {
    if (!v->is_string()) return fail(fieldError("version", "expected text"));
    d->version = v->get<std::string>();
  }
  if (const auto p = body.find("placedBy"); p != body.end() && !p->is_null()) {
    if (!p->is_string() || (*p != "tessera" && *p != "kubernetes")) {
      return fail(fieldError("placedBy", "expected \"tessera\" or \"kubernetes\""));
    }
    d->placedByKubernetes = *p == "kubernetes";
  }
  auto minR = readInt(body, "minReplicas", 0, 1000, 1);
  if (!minR) return fail(minR.error());
  auto maxR = readInt(body, "maxReplicas", 1, 1000, std::max(*minR, 10));
  if (!maxR) return fail(maxR.error());
  if (*maxR < *minR) return fail(fieldError("maxReplicas", "must be at least minReplicas"));
  auto prio = readInt(body, "priority", -1000000, 1000000, models_.at(d->model).priority);
  if (!prio) return fail(prio.error());
  auto slo = readNumber(body, "sloTtftMs", 1, 3.6e6);
  if (!slo) return fail(slo.error());
  d->minReplicas = *minR;
  d->maxReplicas = *maxR;
  d->priority = *prio;
  d->sloTtftMs = *slo;

  scale::AutoscalerConfig& c = d->config;
  c.minReplicas = d->minReplicas;
  c.maxReplicas = d->maxReplicas;
  if (const auto a = body.find("autoscaling"); a != body.end() && !a->is_null()) {
    TESSERA_RETURN_IF_ERROR(
        onlyKeys(*a, "autoscaling",
                 {"recommender", "args", "warmReplicas", "syncPeriodSeconds",
                  "scaleUpStabilizationSeconds", "scaleDownStabilizationSeconds"}));
    if (const auto r = a->find("recommender"); r != a->end()) {
      if (!r->is_string()) return fail(fieldError("autoscaling.recommender", "expected text"));
      c.recommender = r->get<std::string>();
    }
    if (const auto args = a->find("args"); args != a->end()) {
      if (!args->is_object()) return fail(fieldError("autoscaling.args", "expected an object"));
      for (const auto& [k, v] : args->items()) {
        if (!v.is_number()) return fail(fieldError("autoscaling.args." + k, "expected a number"));
        c.args.emplace_back(k, v.get<double>());
      }
    }
    auto warm = readInt(*a, "warmReplicas", 0, 1000, 0);
    auto sync = readInt(*a, "syncPeriodSeconds", 1, 3600, 15);
    auto up = readInt(*a, "scaleUpStabilizationSeconds", 0, 3600, -1);
    auto down = readInt(*a, "scaleDownStabilizationSeconds", 0, 3600, -1);
    for (auto* r : {&warm, &sync, &up, &down}) {
      if (!*r) return fail(Error::invalid("autoscaling." + r->error().message));
    }
    c.warmReplicas = *warm;
    c.syncPeriodSeconds = *sync;
    if (*up >= 0) c.behavior.scaleUp.stabilizationWindowSeconds = *up;
    if (*down >= 0) c.behavior.scaleDown.stabilizationWindowSeconds = *down;
  }
  // The deployment's SLO is what tessera's recommender sizes the prefill stage against, as the
  // simulator tells it; an explicit argument wins.
  const auto hasArg = [&](std::string_view key) {
    return std::any_of(c.args.begin(), c.args.end(), [&](const auto& a) { return a.first == key; });
  };
  if (c.recommender == "tessera" && d->sloTtftMs && !hasArg("sloTtftMs")) {
    c.args.emplace_back("sloTtftMs", *d->sloTtftMs);
  }
  auto scaler = scale::Autoscaler::create(c);
  if (!scaler) return fail(Error::invalid("autoscaling: " + scaler.error().message));
  d->autoscaler = std::move(*scaler);
  d->spec = body;
  return d;
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

Result<json> ControlPlane::putDeployment(const json& body) {
  auto parsed = parseDeployment(body);
  if (!parsed) return fail(parsed.error());
  std::unique_ptr<Deployment> d = std::move(*parsed);
  const scale::AutoscalerConfig& c = d->config;
  const auto existing = deployments_.find(d->name);
  const bool update = existing != deployments_.end();
  store::WriteSet batch;
  batch.put("deployment", d->name, body.dump());
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

Result<json> ControlPlane::deleteDeployment(std::string_view name) {
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
  return json{{"deployment", std::string(name)},
              {"deleted", true},
              {"draining", static_cast<int>(started.size())}};
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

Result<json> ControlPlane::replicaSignals(std::string_view id, const json& body) {
  if (!state_.findReplica(id)) {
    return fail(Error::notFound("replica " + std::string(id) + " is not placed"));
  }
  TESSERA_RETURN_IF_ERROR(
      onlyKeys(body, "",
               {"waiting", "running", "kvCacheUsage", "gpuUtilization", "computeActive",
                "prefillsPerSec", "maxConcurrency", "expectedReadyMs"}));
  auto waiting = readNumber(body, "waiting", 0, 1e9);
  auto running = readNumber(body, "running", 0, 1e9);
  auto kv = readNumber(body, "kvCacheUsage", 0, 1);
  auto gpu = readNumber(body, "gpuUtilization", 0, 1);
  auto compute = readNumber(body, "computeActive", 0, 1);
  auto prefills = readNumber(body, "prefillsPerSec", 0, 1e9);
  auto maxC = readInt(body, "maxConcurrency", 0, 1'000'000, -1);
  auto ready = readNumber(body, "expectedReadyMs", 0, 9e15);
  for (auto* r : {&waiting, &running, &kv, &gpu, &compute, &prefills, &ready}) {
    if (!*r) return fail(r->error());
  }
  if (!maxC) return fail(maxC.error());
  ReplicaRuntime& rt = runtime_[std::string(id)];
  rt.signals.waiting = *waiting;
  rt.signals.running = *running;
  rt.signals.kvCacheUsage = *kv;
  rt.signals.gpuUtilization = *gpu;
  rt.signals.computeActive = *compute;
  rt.signals.prefillsPerSec = *prefills;
  if (*maxC >= 0) rt.signals.maxConcurrency = *maxC;
  if (*ready) rt.expectedReadyMs = static_cast<Millis>(**ready);
  rt.signalsAtMs = clock_.nowMs();
  return json{{"replica", std::string(id)}, {"accepted", true}};
}

Result<json> ControlPlane::deploymentSignals(std::string_view name, const json& body) {
  const auto it = deployments_.find(name);
  if (it == deployments_.end()) {
    return fail(Error::notFound("deployment " + std::string(name) + " does not exist"));
  }
  TESSERA_RETURN_IF_ERROR(onlyKeys(body, "body",
                                   {"arrivalRatePerSec", "meanServiceMs", "ttftP99Ms",
                                    "meanPrefillMs", "prefillP99Ms", "bufferedRequests"}));
  auto rate = readNumber(body, "arrivalRatePerSec", 0, 1e9);
  auto service = readNumber(body, "meanServiceMs", 0, 1e9);
  auto ttft = readNumber(body, "ttftP99Ms", 0, 1e9);
  auto prefill = readNumber(body, "meanPrefillMs", 0, 1e9);
  auto prefillP99 = readNumber(body, "prefillP99Ms", 0, 1e9);
  auto buffered = readNumber(body, "bufferedRequests", 0, 1e9);
  for (auto* r : {&rate, &service, &ttft, &prefill, &prefillP99, &buffered}) {
    if (!*r) return fail(r->error());
  }
  Deployment& d = *it->second;
  d.arrivalRatePerSec = *rate;
  d.meanServiceMs = *service;
  d.ttftP99Ms = *ttft;
  d.meanPrefillMs = *prefill;
  d.prefillP99Ms = *prefillP99;
  d.bufferedRequests = *buffered;
  d.signalsAtMs = clock_.nowMs();
  return json{{"deployment", std::string(name)}, {"accepted", true}};
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
