#pragma once
// Which control-plane replica leads, written on the replicas' own pods, so that a Service
// selecting `tessera.io/role: leader` sends kube-scheduler's and the agents' calls to the
// leader alone (docs/kubernetes.md, "Leader election").
//
// The leader labels its pod `leader` (after demoting any other pod of the namespace still
// labelled so: a leader that was killed, or hung, before it could step down), a standby or a
// replica stepping down labels its own `standby`. Writes are JSON merge patches of
// metadata.labels: they touch no other field and need no resourceVersion.
//
// Threading: uses the client it is given; one call at a time per client (as KubeClient).

#include <string>
#include <string_view>

#include "common/result.h"

namespace tessera::k8s {

class KubeClient;

inline constexpr std::string_view kRoleLabel = "tessera.io/role";
inline constexpr std::string_view kRoleLeader = "leader";
inline constexpr std::string_view kRoleStandby = "standby";

struct PodRef {
  std::string ns, name;
};

// The pod this process runs in, from the downward API (POD_NAMESPACE, POD_NAME); an error
// naming the variable that is missing.
Result<PodRef> selfPodFromEnv();

// PATCH metadata.labels[tessera.io/role] = role on the pod; an error names the pod and the API
// server's answer.
Result<void> setPodRole(KubeClient& client, const PodRef& pod, std::string_view role);

// Every other pod of self's namespace labelled `leader` becomes `standby`; returns how many.
Result<int> demoteOtherLeaders(KubeClient& client, const PodRef& self);

}  // namespace tessera::k8s
