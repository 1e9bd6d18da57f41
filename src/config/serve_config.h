#pragma once
// The `tessera serve` configuration file (docs/configuration.md, "Server file"). Every key is
// optional; flags override environment variables, which override the file, which overrides
// the built-in defaults.
//
//   apiVersion: tessera.io/v1alpha1
//   kind: ServerConfig
//   listen: 0.0.0.0:8443
//   store: /var/lib/tessera/state.db
//   tokenFile: /etc/tessera/token
//   insecureNoAuth: false
//   cluster: /etc/tessera/cluster.yaml
//   profile: /etc/tessera/profile.yaml
//   tls: {cert: /etc/tessera/tls/tls.crt, key: /etc/tessera/tls/tls.key}
//   maxBodyBytes: 8388608
//   threads: 8
//   logFormat: json
//   kubernetes: {apiServer: in-cluster, tokenFile: ..., caFile: ..., gpuMode: device-plugin}

#include <cstdint>
#include <optional>
#include <string>

#include "common/result.h"

namespace tessera::config {

struct ServeFile {
  std::optional<std::string> listen, store, tokenFile, cluster, profile, tlsCert, tlsKey, logFormat;
  // The Kubernetes API server the extender's bind posts bindings to: a URL, "in-cluster",
  // "none", or absent (= in-cluster inside a pod, else none).
  std::optional<std::string> kubeApiServer, kubeTokenFile, kubeCaFile;
  // How ModelDeployment replicas get their GPUs: "device-plugin" (extended resources, the
  // extender, the device plugin) or "dra" (ResourceClaims pinning the engine's choice).
  std::optional<std::string> gpuMode;
  std::optional<bool> insecureNoAuth;
  std::optional<std::int64_t> maxBodyBytes, threads;
};

Result<ServeFile> loadServeFile(const std::string& path);
Result<ServeFile> parseServeYaml(const std::string& text, const std::string& sourceName);

}  // namespace tessera::config
