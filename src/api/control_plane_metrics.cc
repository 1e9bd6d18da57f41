// ControlPlane: the event log, the periodic upkeep (tick) and the Prometheus exposition.

#include <algorithm>
#include <chrono>

#include "api/control_plane.h"
#include "sched/state_json.h"

namespace tessera::api {

using nlohmann::json;

// ---- events, metrics, upkeep ---------------------------------------------------------------

json ControlPlane::events(std::int64_t after, std::size_t limit) const {
  json out = json::array();
  for (const EventRecord& e : events_) {
    if (e.seq <= after) continue;
    if (out.size() >= limit) break;
    out.push_back({{"seq", e.seq},
                   {"timeMs", e.timeMs},
                   {"type", e.type},
                   {"subject", e.subject},
                   {"message", e.message}});
  }
  return json{{"events", std::move(out)}, {"lastSeq", lastSeq_}};
}

void ControlPlane::tick() {
  const Millis now = clock_.nowMs();
  const auto next = state_.nextReservationExpiryMs();
  if (next && *next <= now) {
    // A reservation ends early only when telemetry confirms it, so those lapsing here were
    // never confirmed. Count them by whether their GPUs reported anything at all ("none":
    // no telemetry; "unattributed": the GPUs report, but not this replica's memory).
    std::vector<sched::ReplicaId> active;
    for (std::size_t i = 0; i < state_.replicas().size(); ++i) {
      const sched::ReplicaRecord& r = state_.replicas()[i];
      if (!r.removed && r.reservationActive) active.push_back(static_cast<sched::ReplicaId>(i));
    }
    undo(sched::ReservationsExpired{now}, "reservations");  // never refused
    for (const sched::ReplicaId id : active) {
      const sched::ReplicaRecord& r = state_.replica(id);
      if (r.reservationActive) continue;
      bool silent = true;
      for (const auto& g : r.placement.gpus) silent = silent && !state_.gpu(g.gpu).hasTelemetry;
      reservationsExpired_.add({{"telemetry", silent ? "none" : "unattributed"}});
    }
  }
  for (auto& [name, d] : deployments_) reconcile(*d, now);
  advanceDrains(now);
}

std::string ControlPlane::metricsText() const {
  constexpr double kMib = 1024.0 * 1024.0;
  MetricsWriter w;
  const Labels none;
  auto gpuLabels = [&](const sched::GpuRecord& g) {
    return Labels{{"node", state_.node(g.node).spec.name},
                  {"gpu", g.spec.id},
                  {"type", sched::gpuTypeName(state_, g)}};
  };
  std::vector<const sched::GpuRecord*> live;
  for (const sched::GpuRecord& g : state_.gpus()) {
    if (g.node >= 0 && !state_.node(g.node).removed) live.push_back(&g);
  }
  w.family("tessera_gpu_memory_capacity_bytes", "gauge", "GPU memory per card.");
  for (const auto* g : live)
    w.sample("tessera_gpu_memory_capacity_bytes", gpuLabels(*g), g->spec.memoryMib * kMib);
  w.family("tessera_gpu_memory_allocated_bytes", "gauge",
           "GPU memory booked for replicas (reservations, then observed use).");
  for (const auto* g : live)
    w.sample("tessera_gpu_memory_allocated_bytes", gpuLabels(*g), g->chargedMib * kMib);
  w.family("tessera_gpu_memory_used_bytes", "gauge",
           "GPU memory in use as last reported by the node agent.");
  for (const auto* g : live) {
    if (g->hasTelemetry)
      w.sample("tessera_gpu_memory_used_bytes", gpuLabels(*g), g->telemetryUsedMib * kMib);
  }
  w.family("tessera_gpu_compute_allocated_ratio", "gauge",
           "Share of the card's compute booked for replicas.");
  for (const auto* g : live) {
    w.sample("tessera_gpu_compute_allocated_ratio", gpuLabels(*g),
             g->spec.computeMilli > 0
                 ? g->bookedComputeMilli / static_cast<double>(g->spec.computeMilli)
                 : 0);
  }
  w.family("tessera_gpu_utilization_ratio", "gauge",
           "SM activity as last reported by the node agent.");
  for (const auto* g : live) {
    if (g->hasTelemetry)
      w.sample("tessera_gpu_utilization_ratio", gpuLabels(*g), g->utilizationMilli / 1000.0);
  }
  w.family("tessera_gpu_fragment_bytes", "gauge",
           "Free memory on a GPU that already holds replicas (0 on an empty GPU): the part of "
           "the card a whole-card replica can no longer use.");
  for (const auto* g : live) {
    w.sample("tessera_gpu_fragment_bytes", gpuLabels(*g),
             g->replicas.empty() ? 0.0 : std::max<std::int64_t>(0, g->freeMemoryMib()) * kMib);
  }
  // Fleet: allocation vs utilisation, the "paid but idle" figure.
  double allocated = 0, busy = 0, freeFragments = 0, freeWhole = 0;
  int withReplicas = 0;
  for (const auto* g : live) {
    const double share = g->exclusive ? 1.0 : g->bookedComputeMilli / 1000.0;
    allocated += std::min(1.0, share);
    if (!g->replicas.empty()) {
      ++withReplicas;
      busy += g->hasTelemetry ? g->utilizationMilli / 1000.0 : 0;
    }
    if (g->replicas.empty()) {
      freeWhole += 1;
    } else {
      freeFragments += std::max<std::int64_t>(0, g->freeMemoryMib()) * kMib;
    }
  }
  w.family("tessera_fleet_gpus", "gauge", "Live GPUs in the fleet.");
  w.sample("tessera_fleet_gpus", none, static_cast<double>(live.size()));
  w.family("tessera_fleet_gpus_allocated", "gauge", "GPUs' worth of compute booked for replicas.");
  w.sample("tessera_fleet_gpus_allocated", none, allocated);
  w.family("tessera_fleet_gpus_idle_allocated", "gauge",
           "GPUs holding replicas times their idle share: paid for but not computing.");
  w.sample("tessera_fleet_gpus_idle_allocated", none, withReplicas - busy);
  w.family("tessera_fleet_gpus_free", "gauge", "GPUs holding no replica.");
  w.sample("tessera_fleet_gpus_free", none, freeWhole);
  w.family("tessera_fleet_fragmented_memory_bytes", "gauge",
           "Free memory left on GPUs that already hold replicas (fragments).");
  w.sample("tessera_fleet_fragmented_memory_bytes", none, freeFragments);
  w.family("tessera_nodes", "gauge", "Registered nodes by state.");
  int ready = 0, cordoned = 0, unhealthy = 0;
  for (const auto& n : state_.nodes()) {
    if (n.removed) continue;
    if (!n.spec.healthy) {
      ++unhealthy;
    } else if (n.spec.cordoned) {
      ++cordoned;
    } else {
      ++ready;
    }
  }
  w.sample("tessera_nodes", {{"state", "ready"}}, ready);
  w.sample("tessera_nodes", {{"state", "cordoned"}}, cordoned);
  w.sample("tessera_nodes", {{"state", "unhealthy"}}, unhealthy);
  w.family("tessera_replicas", "gauge", "Placed replicas by phase.");
  int reserved = 0, loaded = 0;
  for (const auto& r : state_.replicas()) {
    if (r.removed) continue;
    (r.phase == sched::ReplicaPhase::kLoaded ? loaded : reserved) += 1;
  }
  w.sample("tessera_replicas", {{"phase", "reserved"}}, reserved);
  w.sample("tessera_replicas", {{"phase", "loaded"}}, loaded);
  w.family("tessera_reservations", "gauge",
           "Active reservations: memory held for replicas telemetry does not show yet.");
  w.sample("tessera_reservations", none, state_.activeReservationCount());
  w.family("tessera_models", "gauge", "Registered model profiles.");
  w.sample("tessera_models", none, static_cast<double>(models_.size()));
  w.family("tessera_deployment_replicas", "gauge",
           "Replicas per deployment: desired (the autoscaler's answer), ready, loading, "
           "draining, pending (asked for, not placeable yet) and warm (standby).");
  for (const auto& [name, d] : deployments_) {
    const json status = deploymentJson(*d)["status"];
    for (const char* state : {"desired", "ready", "loading", "draining", "pending", "warm"}) {
      w.sample("tessera_deployment_replicas", {{"deployment", name}, {"state", state}},
               status[state].get<double>());
    }
  }
  w.family("tessera_pending_replicas", "gauge",
           "Replicas waiting for room, by deployment and the filter that refused most.");
  for (const auto& [name, d] : deployments_) {
    if (d->pending > 0) {
      w.sample("tessera_pending_replicas", {{"deployment", name}, {"reason", d->pendingFilter}},
               d->pending);
    }
  }
  w.family("tessera_deployment_queue_depth", "gauge",
           "Requests waiting per deployment: queued in its replicas' engines plus buffered in "
           "front of them, from signals fresher than the signal TTL.");
  const Millis now = clock_.nowMs();
  for (const auto& [name, d] : deployments_) {
    const scale::DeploymentSignals s = signalsOf(*d, now);
    double depth = s.bufferedRequests.value_or(0);
    for (const auto& r : s.replicas) depth += r.waiting.value_or(0);
    w.sample("tessera_deployment_queue_depth", {{"deployment", name}, {"model", d->model}}, depth);
  }
  w.family("tessera_node_heartbeat_age_seconds", "gauge",
           "Seconds since the node's agent registered or last sent a heartbeat (since the "
           "server started for nodes restored from the store).");
  for (const auto& [node, at] : lastHeartbeatMs_)
    w.sample("tessera_node_heartbeat_age_seconds", {{"node", node}}, (now - at) / 1000.0);
  reservationsExpired_.write(w);
  internalErrors_.write(w);
  eventSinkErrors_.write(w);
  loadDuration_.write(w);
  placements_.write(w);
  decisionLatency_.write(w);
  httpRequests.write(w);
  extenderLatency.write(w);
  claimAdmissions.write(w);
  return w.text();
}

}  // namespace tessera::api
