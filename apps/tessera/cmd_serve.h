#pragma once
// `tessera serve`: the control plane as a service (HTTP API, kube-scheduler extender,
// Prometheus metrics). docs/cli.md and docs/api.md describe it.

#include <optional>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "common/result.h"

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

class ServeCommand {
 public:
  explicit ServeCommand(CLI::App& app);
  bool parsed() const { return command_->parsed(); }
  int run(std::ostream& out, std::ostream& err);

 private:
  // Fills what no flag set from $TESSERA_* variables, then from the --config file.
  Result<void> resolve();

  CLI::App* command_;
  ServeOptions options_;
};

}  // namespace tessera::cli
