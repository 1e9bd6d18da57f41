#!/usr/bin/env bash
# Copies the CA of the Secret tessera-system/tessera-tls (ca.crt) into the caBundle of the
# claim webhook (webhook.yaml), so the API server trusts `tessera serve`'s certificate. Run it
# after `kubectl apply -k deploy/overlays/dra`, and again when the CA changes; with
# cert-manager issuing tessera-tls, its cainjector does this instead.
#
# Usage: inject-ca.sh [NAMESPACE]   (default: tessera-system)
set -euo pipefail

ns="${1:-tessera-system}"
ca="$(kubectl -n "${ns}" get secret tessera-tls -o 'jsonpath={.data.ca\.crt}')"
if [[ -z "${ca}" ]]; then
  echo "inject-ca.sh: Secret ${ns}/tessera-tls has no ca.crt (see docs/kubernetes.md, Secrets)" >&2
  exit 1
fi
kubectl patch mutatingwebhookconfiguration tessera-claims --type json \
  -p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"${ca}\"}]"
