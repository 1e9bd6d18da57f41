#pragma once
// `tessera serve`'s settings and the checks it makes of them before it opens anything, shared
// with `tessera validate` so that a ServerConfig file validate accepts is one serve starts
// with (docs/cli.md).

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "config/serve_config.h"

namespace tessera::k8s {
class KubeClient;
}

namespace tessera::cli {

struct ServeOptions {
  std::string listen = "127.0.0.1:8080";
  std::optional<std::string> tokenFile;  // else $TESSERA_API_TOKEN
  bool insecureNoAuth = false;
  std::string storePath = "tessera.db";  // ":memory:" keeps nothing across restarts
  // Where the state lives: "sqlite" (storePath) or "kubernetes" (the API server: pod
  // annotations and ConfigMaps in stateNamespace; k8s/kube_state_store.h).
  std::string stateBackend = "sqlite";
  std::string stateNamespace;  // "": $POD_NAMESPACE, else the lease's namespace
  // With stateBackend "kubernetes": a SQLite store to seed an empty API server from (upgrade).
  std::optional<std::string> importStore;
  std::optional<std::string> clusterPath;
  std::optional<std::string> profilePath;
  std::string tlsCert, tlsKey;
  std::size_t maxBodyBytes = 8u << 20;
  int threads = 8;
  std::string logFormat = "text";
  std::optional<std::string> configPath;
  // Kubernetes API for bindings: URL, "in-cluster", "none", or "" (in-cluster inside a pod).
  std::string kubeApiServer;
  std::string kubeTokenFile, kubeCaFile;
  std::string gpuMode = "device-plugin";  // device-plugin | dra (docs/dra.md)
  // With a Kubernetes API: run the ModelDeployment controller (src/k8s/controller.h).
  bool controller = true;
  // Lease leader election (k8s/leader_election.h), kube-scheduler's flags and defaults.
  bool leaderElect = false;
  std::string leaseDuration = "15s", renewDeadline = "10s", retryPeriod = "2s";
  std::string leaseNamespace = "tessera-system", leaseName = "tessera-control-plane";
  // The built-in demo (src/demo): virtual GPUs, models and synthetic traffic.
  bool demo = false;
  double demoSpeed = 1;  // the demo's clock runs this many times faster than real time
};

// The file's settings onto `o` (what no flag or environment variable overrides).
void applyServeFile(const config::ServeFile& file, ServeOptions& o);

// The settings that take one of a few words: the state backend, the log format, the GPU mode.
Result<void> checkServeChoices(const ServeOptions& o);

bool loopback(const std::string& host);
// "HOST:PORT" (HOST may be a bracketed IPv6 address) as (host, port).
Result<std::pair<std::string, int>> splitListen(const std::string& listen);
// The bearer token for mutating calls: the token file's, else $TESSERA_API_TOKEN, else none;
// at least 16 characters.
Result<std::optional<std::string>> readToken(const ServeOptions& o);
// Serving mutating calls beyond loopback needs a token or an explicit --insecure-no-auth.
Result<void> checkServeAccess(const ServeOptions& o, const std::string& host, bool haveToken);
// The Kubernetes API client the extender's bind posts through, or none. Reads its token and
// CA files; contacts nothing.
Result<std::unique_ptr<k8s::KubeClient>> kubeClient(const ServeOptions& o);

// `tessera validate` of a ServerConfig file: the file as `serve --config` reads it with no flag
// or variable on top, every check serve makes before it opens anything, and the files it names
// (token, TLS pair, cluster, profile, Kubernetes token and CA) read as serve reads them. A
// named file absent here (it is mounted in the pod, say) is not an error: it is listed in
// `notHere` so that the summary says it was not checked; a file that exists and is wrong is.
struct ServeFileCheck {
  std::vector<std::string> notHere;
};
Result<ServeFileCheck> checkServeConfigFile(const std::string& path);

}  // namespace tessera::cli
