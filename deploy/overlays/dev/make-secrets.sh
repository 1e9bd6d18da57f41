#!/usr/bin/env bash
# Makes the two Secrets the Tessera manifests expect, for a development cluster:
#   tessera-tls        a throw-away CA (ca.crt) and a certificate for
#                      tessera.tessera-system.svc signed by it (tls.crt, tls.key)
#   tessera-api-token  a random 32-byte bearer token (token)
# and creates the tessera-system namespace if needed. Production: let cert-manager issue
# tessera-tls (deploy/overlays/production) and keep the token in your secret store.
#
# Usage: make-secrets.sh [DIR]   (DIR keeps the files; default: a temporary directory)
set -euo pipefail

ns=tessera-system
dir="${1:-$(mktemp -d)}"
mkdir -p "${dir}"
cd "${dir}"

openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=tessera-dev-ca" \
  -keyout ca.key -out ca.crt 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=tessera.${ns}.svc" \
  -keyout tls.key -out tls.csr 2>/dev/null
printf 'subjectAltName=DNS:tessera.%s.svc,DNS:tessera.%s.svc.cluster.local,DNS:tessera.%s,DNS:localhost,IP:127.0.0.1\n' \
  "${ns}" "${ns}" "${ns}" > san.ext
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 \
  -extfile san.ext -out tls.crt 2>/dev/null
openssl rand -hex 32 | tr -d '\n' > token

kubectl get namespace "${ns}" >/dev/null 2>&1 || kubectl create namespace "${ns}"
kubectl -n "${ns}" create secret generic tessera-tls \
  --from-file=tls.crt --from-file=tls.key --from-file=ca.crt \
  --dry-run=client -o yaml | kubectl apply -f -
kubectl -n "${ns}" create secret generic tessera-api-token --from-file=token \
  --dry-run=client -o yaml | kubectl apply -f -
echo "make-secrets: tessera-tls and tessera-api-token in ${ns}; files in ${dir}"
