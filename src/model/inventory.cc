#include "model/inventory.h"

namespace tessera::model {

// Kubernetes semantics (k8s.io/api/core/v1 Toleration.ToleratesTaint), so that a pod spec
// behaves the same whether kube-scheduler or Tessera evaluates it.
bool Toleration::tolerates(const Taint& taint) const {
  if (!effect.empty() && effect != taint.effect) return false;
  // An empty key matches every key; with operator Exists that tolerates every taint.
  if (!key.empty() && key != taint.key) return false;
  // Kubernetes defaults an empty operator to Equal.
  if (op.empty() || op == "Equal") return value == taint.value;
  if (op == "Exists") return true;
  // An operator Kubernetes does not define tolerates nothing rather than everything.
  return false;
}

}  // namespace tessera::model
