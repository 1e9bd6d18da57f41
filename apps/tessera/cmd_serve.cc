#include "cmd_serve.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "api/http_server.h"
#include "api/kube_fleet.h"
#include "api/log.h"
#include "cli.h"
#include "config/loaders.h"
#include "config/serve_config.h"
#include "demo/demo.h"
#include "k8s/controller.h"
#include "k8s/kube_client.h"
#include "k8s/kube_state_store.h"
#include "k8s/leader_election.h"
#include "k8s/pod_role.h"
#include "model/gpu_catalog.h"
#include "serve_settings.h"
#include "store/event_sink.h"
#include "store/store.h"

namespace tessera::cli {
namespace {

constexpr std::string_view kServeCommand = "serve";
// The longest a v1.Binding POST may take: below kube-scheduler's extender httpTimeout (5 s in
// the manifests), with room for the extender's own work, so a bind that lands is never one
// kube-scheduler has already given up on.
constexpr int kBindTimeoutMs = 3000;

// A Go-style duration as kube-scheduler's flags take it: "15s", "1500ms", "1m" (a bare
// number is seconds).
Result<Millis> parseDuration(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1000;
  if (unit == "ms") scale = 1;
  if (unit == "m") scale = 60000;
  if (used == 0 || scale == 0 || !(value > 0)) {
    return fail(Error::invalid(flag + ": expected a duration such as 15s, 1500ms or 1m, got \"" +
                               text + "\""));
  }
  return static_cast<Millis>(value * scale + 0.5);
}

Result<k8s::LeaderElectionConfig> electionConfig(const ServeOptions& o) {
  k8s::LeaderElectionConfig c;
  c.ns = o.leaseNamespace;
  c.name = o.leaseName;
  auto lease = parseDuration("--leader-elect-lease-duration", o.leaseDuration);
  if (!lease) return fail(lease.error());
  auto renew = parseDuration("--leader-elect-renew-deadline", o.renewDeadline);
  if (!renew) return fail(renew.error());
  auto retry = parseDuration("--leader-elect-retry-period", o.retryPeriod);
  if (!retry) return fail(retry.error());
  c.leaseDurationMs = *lease;
  c.renewDeadlineMs = *renew;
  c.retryPeriodMs = *retry;
  if (auto ok = k8s::validate(c); !ok) return fail(ok.error());
  return c;
}

}  // namespace

ServeCommand::ServeCommand(CLI::App& app) {
  command_ = app.add_subcommand(
      "serve", "Run the control plane: HTTP API, kube-scheduler extender and metrics");
  ServeOptions& o = options_;
  command_->add_option("--listen", o.listen, "HOST:PORT to listen on")->capture_default_str();
  command_
      ->add_option("--token-file", o.tokenFile,
                   "File holding the bearer token mutating calls need "
                   "(default: $TESSERA_API_TOKEN)")
      ->check(CLI::ExistingFile);
  command_->add_flag("--insecure-no-auth", o.insecureNoAuth,
                     "Allow mutating calls without a token on a non-loopback address");
  command_
      ->add_option("--store", o.storePath,
                   "SQLite database holding the state (created if missing; :memory: for none)")
      ->capture_default_str();
  command_
      ->add_option("--state-backend", o.stateBackend,
                   "Where the state lives: sqlite (the --store file) or kubernetes (the API "
                   "server: bookings on the pods, the rest as ConfigMaps; nothing on disk)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sqlite", "kubernetes"}));
  command_->add_option("--state-namespace", o.stateNamespace,
                       "With --state-backend kubernetes: the namespace of the ConfigMaps "
                       "(default: $POD_NAMESPACE, else --leader-elect-resource-namespace)");
  command_
      ->add_option("--import-store", o.importStore,
                   "With --state-backend kubernetes: copy this SQLite store into an API server "
                   "that holds no Tessera state yet (the upgrade from the single-replica "
                   "install), then exit without serving")
      ->check(CLI::ExistingFile);
  command_
      ->add_option("--cluster", o.clusterPath,
                   "Cluster file to seed an empty store with (nodes, models, running replicas)")
      ->check(CLI::ExistingFile);
  command_->add_option("--profile", o.profilePath, "Placement profile (default: built-in)")
      ->check(CLI::ExistingFile);
  command_->add_option("--tls-cert", o.tlsCert, "TLS certificate (PEM); with --tls-key");
  command_->add_option("--tls-key", o.tlsKey, "TLS private key (PEM); with --tls-cert");
  command_->add_option("--max-body-bytes", o.maxBodyBytes, "Largest request body accepted")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 30));
  command_->add_option("--threads", o.threads, "HTTP worker threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  command_->add_option("--log-format", o.logFormat, "Logs on stderr: text or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  command_->add_option("--kube-api-server", o.kubeApiServer,
                       "Kubernetes API server the extender's bind posts v1.Bindings to: a URL "
                       "(https://host:6443, or http://127.0.0.1:8001 for kubectl proxy), "
                       "in-cluster, or none; default: in-cluster when running in a pod, else none");
  command_->add_option("--kube-token-file", o.kubeTokenFile,
                       "Bearer token for --kube-api-server (re-read when it changes)");
  command_->add_option("--kube-ca-file", o.kubeCaFile,
                       "CA bundle that signs the API server's certificate (https)");
  command_
      ->add_option("--gpu-mode", o.gpuMode,
                   "How ModelDeployment replicas get GPUs: device-plugin (tessera.io/* "
                   "resources, the extender's bind) or dra (a ResourceClaim pinning the "
                   "engine's choice; docs/dra.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"device-plugin", "dra"}));
  command_
      ->add_option("--config", o.configPath,
                   "Server file (docs/configuration.md); flags and $TESSERA_* variables win")
      ->check(CLI::ExistingFile);
  command_
      ->add_option("--controller", o.controller,
                   "With a Kubernetes API: run the ModelDeployment controller (true or "
                   "false)")
      ->capture_default_str();
  command_->add_flag("--leader-elect", o.leaderElect,
                     "Run as one of several replicas: only the holder of a coordination.k8s.io "
                     "Lease serves mutating calls and the extender (others answer 503)");
  command_->add_option("--leader-elect-lease-duration", o.leaseDuration,
                       "How long a standby waits after the lease last changed")
      ->capture_default_str();
  command_->add_option("--leader-elect-renew-deadline", o.renewDeadline,
                       "The leader steps down (exit 1) when it could not renew for this long")
      ->capture_default_str();
  command_->add_option("--leader-elect-retry-period", o.retryPeriod,
                       "Between two acquire or renew attempts")
      ->capture_default_str();
  command_->add_option("--leader-elect-resource-namespace", o.leaseNamespace,
                       "Namespace of the Lease")
      ->capture_default_str();
  command_->add_option("--leader-elect-resource-name", o.leaseName, "Name of the Lease")
      ->capture_default_str();
  command_->add_flag("--demo", o.demo,
                     "Run the built-in demo: a fleet of virtual GPUs, a few models and "
                     "synthetic traffic, in memory unless --store is given (no GPU, no cluster)");
  command_
      ->add_option("--demo-speed", o.demoSpeed,
                   "With --demo: how many times faster than real time the demo runs")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 100.0));
  command_->footer(
      "Every option can also come from the environment ($TESSERA_LISTEN, $TESSERA_STORE, "
      "$TESSERA_TOKEN_FILE, $TESSERA_CLUSTER, $TESSERA_PROFILE, $TESSERA_TLS_CERT, "
      "$TESSERA_TLS_KEY, $TESSERA_MAX_BODY_BYTES, $TESSERA_THREADS, $TESSERA_LOG_FORMAT, "
      "$TESSERA_KUBE_API_SERVER, $TESSERA_KUBE_TOKEN_FILE, $TESSERA_KUBE_CA_FILE, "
      "$TESSERA_CONTROLLER, $TESSERA_STATE_BACKEND, $TESSERA_STATE_NAMESPACE, "
      "$TESSERA_INSECURE_NO_AUTH=true) or the --config file; flags win, then the environment.\n\n"
      "Exit codes: 0 success, 1 internal error, 2 bad input. See docs/cli.md.");
}

Result<void> ServeCommand::resolve() {
  ServeOptions& o = options_;
  config::ServeFile file;
  if (o.configPath) {
    auto loaded = config::loadServeFile(*o.configPath);
    if (!loaded) return fail(loaded.error());
    file = std::move(*loaded);
  }
  // One option: the flag if given, else the variable, else the file.
  auto text = [&](const char* flag, const char* env, const std::optional<std::string>& fromFile,
                  auto assign) {
    if (command_->count(flag) > 0) return;
    if (const char* v = std::getenv(env); v != nullptr && *v != '\0') {
      assign(std::string(v));
    } else if (fromFile) {
      assign(*fromFile);
    }
  };
  text("--listen", "TESSERA_LISTEN", file.listen, [&](std::string v) { o.listen = v; });
  text("--store", "TESSERA_STORE", file.store, [&](std::string v) { o.storePath = v; });
  text("--state-backend", "TESSERA_STATE_BACKEND", std::nullopt,
       [&](std::string v) { o.stateBackend = v; });
  text("--state-namespace", "TESSERA_STATE_NAMESPACE", std::nullopt,
       [&](std::string v) { o.stateNamespace = v; });
  text("--token-file", "TESSERA_TOKEN_FILE", file.tokenFile,
       [&](std::string v) { o.tokenFile = v; });
  text("--cluster", "TESSERA_CLUSTER", file.cluster, [&](std::string v) { o.clusterPath = v; });
  text("--profile", "TESSERA_PROFILE", file.profile, [&](std::string v) { o.profilePath = v; });
  text("--tls-cert", "TESSERA_TLS_CERT", file.tlsCert, [&](std::string v) { o.tlsCert = v; });
  text("--tls-key", "TESSERA_TLS_KEY", file.tlsKey, [&](std::string v) { o.tlsKey = v; });
  text("--log-format", "TESSERA_LOG_FORMAT", file.logFormat,
       [&](std::string v) { o.logFormat = v; });
  text("--kube-api-server", "TESSERA_KUBE_API_SERVER", file.kubeApiServer,
       [&](std::string v) { o.kubeApiServer = v; });
  text("--kube-token-file", "TESSERA_KUBE_TOKEN_FILE", file.kubeTokenFile,
       [&](std::string v) { o.kubeTokenFile = v; });
  text("--kube-ca-file", "TESSERA_KUBE_CA_FILE", file.kubeCaFile,
       [&](std::string v) { o.kubeCaFile = v; });
  text("--gpu-mode", "TESSERA_GPU_MODE", file.gpuMode, [&](std::string v) { o.gpuMode = v; });
  std::optional<std::string> bodyText, threadsText, insecureText;
  if (file.maxBodyBytes) bodyText = std::to_string(*file.maxBodyBytes);
  if (file.threads) threadsText = std::to_string(*file.threads);
  if (file.insecureNoAuth) insecureText = *file.insecureNoAuth ? "true" : "false";
  Error bad = Error::invalid("");
  auto number = [&](const char* what, std::int64_t lo, std::int64_t hi, auto set) {
    return [&, what, lo, hi, set](std::string v) {
      try {
        std::size_t used = 0;
        const long long n = std::stoll(v, &used);
        if (used != v.size() || n < lo || n > hi) throw std::out_of_range(v);
        set(n);
      } catch (const std::exception&) {
        bad = Error::invalid(std::string(what) + ": expected a whole number from " +
                             std::to_string(lo) + " to " + std::to_string(hi) + ", got \"" + v +
                             "\"");
      }
    };
  };
  text("--max-body-bytes", "TESSERA_MAX_BODY_BYTES", bodyText,
       number("max body bytes", 1024, std::int64_t{1} << 30,
              [&](long long n) { o.maxBodyBytes = static_cast<std::size_t>(n); }));
  text("--threads", "TESSERA_THREADS", threadsText,
       number("threads", 1, 256, [&](long long n) { o.threads = static_cast<int>(n); }));
  text("--insecure-no-auth", "TESSERA_INSECURE_NO_AUTH", insecureText, [&](std::string v) {
    if (v != "true" && v != "false") {
      bad = Error::invalid("TESSERA_INSECURE_NO_AUTH: expected true or false, got \"" + v + "\"");
    }
    o.insecureNoAuth = v == "true";
  });
  text("--controller", "TESSERA_CONTROLLER", std::nullopt, [&](std::string v) {
    if (v != "true" && v != "false") {
      bad = Error::invalid("TESSERA_CONTROLLER: expected true or false, got \"" + v + "\"");
    }
    o.controller = v != "false";
  });
  if (!bad.message.empty()) return fail(bad);
  return checkServeChoices(o);
}

int ServeCommand::run(std::ostream& out, std::ostream& err) {
  if (auto resolved = resolve(); !resolved)
    return reportError(err, kServeCommand, resolved.error());
  const ServeOptions& o = options_;
  auto listen = splitListen(o.listen);
  if (!listen) return reportError(err, kServeCommand, listen.error());
  auto token = readToken(o);
  if (!token) return reportError(err, kServeCommand, token.error());
  if (auto access = checkServeAccess(o, listen->first, token->has_value()); !access) {
    return reportError(err, kServeCommand, access.error());
  }
  if (o.demo && o.clusterPath) {
    return reportError(err, kServeCommand,
                       Error::invalid("--demo seeds its own fleet: leave out --cluster"));
  }
  if (!o.demo && command_->count("--demo-speed") > 0) {
    return reportError(err, kServeCommand, Error::invalid("--demo-speed needs --demo"));
  }
  if (o.demo && command_->count("--store") == 0) options_.storePath = ":memory:";
  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  std::optional<config::ClusterFile> cluster;
  if (o.clusterPath) {
    auto file = config::loadClusterFile(*o.clusterPath, catalog);
    if (!file) return reportError(err, kServeCommand, file.error());
    cluster = std::move(*file);
  }
  api::ControlPlaneConfig planeConfig;
  if (o.profilePath) {
    auto profile = config::loadProfileFile(*o.profilePath);
    if (!profile) return reportError(err, kServeCommand, profile.error());
    planeConfig.profile = std::move(*profile);
  }
  // GPU mode dra: the ResourceSlices publish the MIG instances a card has, so the engine places
  // only on those (a claim cannot pin an instance that does not exist yet; docs/dra.md).
  if (o.gpuMode == "dra") planeConfig.profile.options.migCreation = false;
  SteadyClock steady;
  demo::FastClock fast(o.demoSpeed);
  const Clock& clock = o.demo ? static_cast<const Clock&>(fast) : steady;
  auto kube = kubeClient(o);
  if (!kube) return reportError(err, kServeCommand, kube.error());
  // The state: a SQLite file, or the Kubernetes API server (through its own client, so the
  // controller's and the elector's calls do not queue behind it).
  std::unique_ptr<store::StateStore> stateStore;
  // The event history's sink (docs/architecture.md, "Durable state"): the SQLite file's events
  // table, or memory only with the API server.
  std::unique_ptr<store::EventSink> eventSink;
  std::unique_ptr<k8s::KubeClient> stateClient;
  if (o.stateBackend == "kubernetes") {
    if (!*kube) {
      return reportError(err, kServeCommand,
                         Error::invalid("--state-backend kubernetes needs the Kubernetes API: "
                                        "give --kube-api-server, or run in a pod"));
    }
    if (o.demo || o.clusterPath) {
      return reportError(err, kServeCommand,
                         Error::invalid(std::string(o.demo ? "--demo" : "--cluster") +
                                        " seeds a local store: use --state-backend sqlite"));
    }
    std::string ns = o.stateNamespace;
    if (ns.empty()) {
      const char* podNs = std::getenv("POD_NAMESPACE");
      ns = podNs != nullptr && *podNs != '\0' ? podNs : o.leaseNamespace;
    }
    auto client = k8s::KubeClient::create((*kube)->config());
    if (!client) return reportError(err, kServeCommand, client.error());
    stateClient = std::move(*client);
    auto kubeState = std::make_unique<k8s::KubeStateStore>(*stateClient, ns);
    if (o.importStore) {
      auto current = kubeState->loadAll();
      if (!current) return reportError(err, kServeCommand, current.error());
      if (!current->documents.empty()) {
        return reportError(
            err, kServeCommand,
            Error::precondition("--import-store: the API server already holds " +
                                std::to_string(current->documents.size()) +
                                " Tessera documents in namespace " + ns +
                                "; importing over them could book GPUs twice, so nothing was "
                                "imported"));
      }
      {
        auto from = store::Store::open(*o.importStore);
        if (!from) return reportError(err, kServeCommand, from.error());
        auto snapshot = (*from)->loadAll();
        if (!snapshot) return reportError(err, kServeCommand, snapshot.error());
        auto report = kubeState->importSnapshot(*snapshot);
        if (!report) {
          return reportError(err, kServeCommand,
                             Error{report.error().code, "--import-store " + *o.importStore + ": " +
                                                            report.error().message});
        }
        out << "tessera serve: imported " << report->imported << " documents from "
            << *o.importStore << " into " << kubeState->describe() << " (" << report->skipped
            << " bookings of pods that are gone or unbound skipped)" << std::endl;
        return kExitOk;
      }
    }
    stateStore = std::move(kubeState);
    eventSink = std::make_unique<store::MemoryEventSink>(store::MemoryEventSink::unixMicrosNow());
  } else {
    if (o.importStore) {
      return reportError(err, kServeCommand,
                         Error::invalid("--import-store needs --state-backend kubernetes"));
    }
    auto opened = store::Store::open(o.storePath);
    if (!opened) return reportError(err, kServeCommand, opened.error());
    eventSink = std::make_unique<store::SqliteEventSink>(**opened);
    stateStore = std::move(*opened);
  }
  const std::string stateWhere = stateStore->describe();
  // A plane restored from the store: at start, and again whenever this replica becomes the
  // leader (a standby's view is as old as its start).
  auto makePlane = [&] {
    return api::ControlPlane::create(catalog, clock, planeConfig, stateStore.get(),
                                     eventSink.get());
  };
  auto plane = makePlane();
  if (!plane) return reportError(err, kServeCommand, plane.error());
  // Leader election: its own client, with client-go's per-request timeout, so a slow bind
  // never holds up a renewal.
  std::unique_ptr<k8s::KubeClient> electionClient;
  std::unique_ptr<k8s::LeaderElector> elector;
  std::unique_ptr<k8s::KubeClient> roleClient;
  std::optional<k8s::PodRef> selfPod;
  if (o.leaderElect) {
    if (!*kube) {
      return reportError(err, kServeCommand,
                         Error::invalid("--leader-elect needs the Kubernetes API: give "
                                        "--kube-api-server, or run in a pod"));
    }
    auto ec = electionConfig(o);
    if (!ec) return reportError(err, kServeCommand, ec.error());
    k8s::KubeConfig kc = (*kube)->config();
    kc.timeoutMs = k8s::leaderElectionTimeoutMs(*ec);
    auto client = k8s::KubeClient::create(kc);
    if (!client) return reportError(err, kServeCommand, client.error());
    electionClient = std::move(*client);
    auto made = k8s::LeaderElector::create(*electionClient, *ec, steady);
    if (!made) return reportError(err, kServeCommand, made.error());
    elector = std::move(*made);
    // The pod's tessera.io/role label, for a Service that selects the leader: its own client,
    // so a slow patch holds up neither a renewal nor a bind.
    if (auto pod = k8s::selfPodFromEnv(); pod) {
      auto client = k8s::KubeClient::create((*kube)->config());
      if (!client) return reportError(err, kServeCommand, client.error());
      roleClient = std::move(*client);
      selfPod = *pod;
    } else {
      err << "tessera serve: warning: " << pod.error().message
          << "; the pod's tessera.io/role label is not kept, so a Service cannot select the "
             "leader"
          << std::endl;
    }
  }
  std::unique_ptr<k8s::KubeClient> bindClient;
  k8s::Binder binder;
  k8s::PodSource podSource;
  if (*kube) {
    // Bindings on their own client: they do not queue behind the controller's calls, and each
    // gets at most kBindTimeoutMs, so the extender's bind answers within kube-scheduler's
    // httpTimeout (5 s in deploy/base/kube-scheduler) even when the API server is slow.
    k8s::KubeConfig bc = (*kube)->config();
    bc.timeoutMs = std::min(bc.timeoutMs, kBindTimeoutMs);
    // Who posted each Binding, in the API server's audit log: the lease identity.
    bc.userAgent = std::string("tessera-serve/") + TESSERA_VERSION +
                   (elector ? " (" + elector->identity() + ")" : std::string());
    auto client = k8s::KubeClient::create(bc);
    if (!client) return reportError(err, kServeCommand, client.error());
    bindClient = std::move(*client);
    k8s::Binder poster = k8s::bindingPoster(*bindClient);
    if (elector) {
      // The last check before the commit point: no Binding from a replica whose lease is not
      // fresh.
      poster = [poster, e = elector.get()](const std::string& ns, const std::string& name,
                                           const std::string& uid,
                                           const std::string& node) -> Result<void> {
        if (!e->isLeader()) {
          return fail(Error::precondition("not the leader (lease " + e->config().ns + "/" +
                                          e->config().name + "): binding refused"));
        }
        return poster(ns, name, uid, node);
      };
    }
    binder = std::move(poster);
    (*plane)->setBinder(binder);
    podSource = k8s::podReader(*bindClient);
    (*plane)->extender().setPodSource(podSource);
  }
  if (cluster) {
    if (!(*plane)->listNodes()["nodes"].empty()) {
      out << "tessera serve: the store " << stateWhere
          << " already holds nodes; --cluster is only used to seed an empty store" << std::endl;
    } else if (auto seeded = (*plane)->loadCluster(*cluster, *o.clusterPath); !seeded) {
      return reportError(err, kServeCommand, seeded.error());
    }
  }
  std::optional<demo::Simulation> demoSim;
  if (o.demo) {
    if ((*plane)->listNodes()["nodes"].empty()) {
      if (auto seeded = demo::seedFleet(**plane); !seeded) {
        return reportError(err, kServeCommand, seeded.error());
      }
    }
    demoSim.emplace();
  }

  // SIGINT and SIGTERM are taken synchronously below; block them before any thread starts
  // so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  // SIGUSR1: the elector's thread wakes the upkeep loop when this replica starts leading.
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  const pthread_t upkeepThread = pthread_self();

  api::Logger logger(o.logFormat == "json" ? api::LogFormat::kJson : api::LogFormat::kText, err);
  auto logEvents = [&logger](const nlohmann::json& e) {
    logger.info("event", {{"seq", e["seq"]},
                          {"type", e["type"]},
                          {"subject", e["subject"]},
                          {"detail", e["message"]}});
  };
  (*plane)->setEventSink(logEvents);
  // Every plane this process served, alive until it exits (a request may still hold one).
  std::vector<std::unique_ptr<api::ControlPlane>> planes;
  planes.push_back(std::move(*plane));
  // With leader election, mutating calls and the extender wait until the new leader's plane
  // was rebuilt from the store.
  std::atomic<bool> planeReady{!elector};
  api::ServerConfig serverConfig;
  serverConfig.logger = &logger;
  serverConfig.host = listen->first;
  serverConfig.port = listen->second;
  serverConfig.token = *token;
  serverConfig.maxBodyBytes = o.maxBodyBytes;
  serverConfig.threads = o.threads;
  serverConfig.tlsCertFile = o.tlsCert;
  serverConfig.tlsKeyFile = o.tlsKey;
  serverConfig.demo = o.demo;
  if (elector) {
    serverConfig.leader = [e = elector.get(), &planeReady] {
      return e->isLeader() && planeReady.load();
    };
    serverConfig.leaderName = [e = elector.get()] { return e->observedHolder(); };
  }
  // The claim webhook pins claims from templates the way the controller pins its replicas'
  // (GPU mode dra; it reads the claim's pod and posts events through the Kubernetes API). The
  // controller frees those bookings when the claims go: without it the webhook books nothing.
  std::unique_ptr<k8s::ClaimAdmission> admission;
  if (*kube && o.gpuMode == "dra" && o.controller) {
    admission = std::make_unique<k8s::ClaimAdmission>(**kube);
    serverConfig.admission = admission.get();
  } else if (*kube && o.gpuMode == "dra") {
    serverConfig.admissionOff =
        "tessera serve runs without its controller (--controller=false), which frees the "
        "bookings of pinned claims: it pins no claims";
  } else {
    serverConfig.admissionOff =
        *kube ? "tessera serve runs GPU mode " + o.gpuMode +
                    ": it pins no claims (use --gpu-mode dra)"
              : std::string("tessera serve has no Kubernetes API: it pins no claims");
  }
  api::HttpServer server(*planes.front(), serverConfig);
  auto port = server.start();
  if (!port) return reportError(err, kServeCommand, port.error());
  out << "tessera serve: listening on " << (o.tlsCert.empty() ? "http" : "https") << "://"
      << listen->first << ":" << *port << " (" << (*token ? "bearer token required" : "no token")
      << " for mutating calls; extender at /scheduler; state in " << stateWhere << ")" << std::endl;
  out << "tessera serve: "
      << (*kube ? "the extender's bind posts bindings to " + (*kube)->config().server
                : std::string("no Kubernetes API: the extender's bind books but binds nothing "
                              "(leave bindVerb out of the scheduler configuration)"))
      << std::endl;
  if (o.gpuMode == "dra") {
    out << "tessera serve: "
        << (admission ? "claim webhook at " + std::string(k8s::kAdmissionPath) +
                            " (pins claims made from templates of gpu.tessera.io)"
                      : serverConfig.admissionOff)
        << std::endl;
  }
  // The ModelDeployment controller acts on the plane through the server's dispatcher.
  std::unique_ptr<api::PlaneFleet> fleet;
  std::unique_ptr<k8s::Controller> controller;
  auto startController = [&] {
    if (!*kube || !o.controller || controller) return;
    fleet = std::make_unique<api::PlaneFleet>(
        [&server](const std::function<void(api::ControlPlane&)>& fn) { server.withPlane(fn); });
    k8s::ControllerOptions co;
    co.gpuMode = o.gpuMode == "dra" ? k8s::GpuMode::kDra : k8s::GpuMode::kDevicePlugin;
    // A Kubernetes API that does not answer is said once, and again when it answers.
    co.onApiHealth = [&logger](bool answering, const std::string& what) {
      if (answering) {
        logger.info("kubernetes api answering", {{"collection", what}});
      } else {
        logger.warn("kubernetes api not answering; retrying with backoff", {{"collection", what}});
      }
    };
    controller = std::make_unique<k8s::Controller>(**kube, *fleet, co);
    controller->start();
    out << "tessera serve: watching ModelDeployments, pods and nodes at "
        << (*kube)->config().server << " (GPU mode " << o.gpuMode << ")" << std::endl;
  };
  // With leader election the controller starts once this replica leads; losing the lease
  // ends the process (exit 1), as kube-scheduler does, so a replica never resumes half-way.
  std::atomic<bool> lostLease{false};
  std::thread electionThread;
  if (elector) {
    out << "tessera serve: leader election on lease " << o.leaseNamespace << "/" << o.leaseName
        << " as " << elector->identity() << std::endl;
    electionThread = std::thread([&] {
      elector->run({.onStartedLeading =
                        [&] {
                          logger.info("leading", {{"identity", elector->identity()}});
                          pthread_kill(upkeepThread, SIGUSR1);  // rebuild at once
                        },
                    .onStoppedLeading = [&] { lostLease = true; },
                    .onNewLeader =
                        [&](const std::string& holder) {
                          logger.info("leader", {{"holder", holder}});
                        }});
    });
  } else {
    startController();
  }
  const std::string url =
      std::string(o.tlsCert.empty() ? "http" : "https") + "://" +
      (listen->first.find(':') != std::string::npos ? "[" + listen->first + "]" : listen->first) +
      ":" + std::to_string(*port) + "/";
  out << "tessera serve: dashboard at " << url << std::endl;
  if (o.demo) {
    out << "tessera serve: DEMO: " << demo::nodeNames().size() << " nodes with " << demo::gpuCount()
        << " virtual GPUs, 4 models, synthetic traffic at " << o.demoSpeed
        << "x real time; nothing here is real hardware. Open " << url << std::endl;
  }
  logger.info("serving",
              {{"address", listen->first + ":" + std::to_string(*port)},
               {"tls", !o.tlsCert.empty()},
               {"auth", token->has_value()},
               {"store", stateWhere},
               {"kubernetesApi", *kube ? (*kube)->config().server : "none"},
               {"nodes", planes.front()->listNodes()["nodes"].size()},
               {"deployments", planes.front()->listDeployments()["deployments"].size()}});

  // The upkeep loop: once a second, lapse reservations, run the autoscalers and move drains
  // along, until a signal arrives.
  const timespec second{1, 0};
  // The role last written on this replica's pod (retried every second until it lands).
  std::string podRole;
  std::string podRoleError;  // logged once until it changes, not every second
  auto labelPod = [&](std::string_view role) {
    if (!selfPod || podRole == role) return;
    auto failed = [&](const Error& e) {
      if (e.message == podRoleError) return;
      podRoleError = e.message;
      logger.info("pod role", {{"error", e.message}});
    };
    if (role == k8s::kRoleLeader) {
      // A leader killed or hung before it stepped down still carries the label.
      if (auto demoted = k8s::demoteOtherLeaders(*roleClient, *selfPod); !demoted) {
        return failed(demoted.error());
      }
    }
    if (auto ok = k8s::setPodRole(*roleClient, *selfPod, role); !ok) return failed(ok.error());
    podRole = role;
    podRoleError.clear();
    logger.info("pod role", {{"pod", selfPod->ns + "/" + selfPod->name}, {"role", podRole}});
  };
  // A new leader's state, read again from the store (retried every second until it loads).
  std::string rebuildError;
  auto rebuild = [&] {
    if (planeReady) return;
    auto fresh = makePlane();
    if (!fresh) {
      if (fresh.error().message != rebuildError) {
        rebuildError = fresh.error().message;
        logger.error("rebuilding the state", {{"from", stateWhere}, {"error", rebuildError}});
      }
      return;
    }
    if (binder) (*fresh)->setBinder(binder);
    if (podSource) (*fresh)->extender().setPodSource(podSource);
    (*fresh)->setEventSink(logEvents);
    const auto nodes = (*fresh)->listNodes()["nodes"].size();
    const auto replicas = (*fresh)->listReplicas()["replicas"].size();
    server.replacePlane(**fresh);
    planes.push_back(std::move(*fresh));
    planeReady = true;
    logger.info("state rebuilt", {{"from", stateWhere}, {"nodes", nodes}, {"replicas", replicas}});
  };
  for (;;) {
    if (elector) {
      labelPod(elector->isLeader() && planeReady ? k8s::kRoleLeader : k8s::kRoleStandby);
    }
    const int sig = sigtimedwait(&signals, nullptr, &second);
    if (sig == SIGINT || sig == SIGTERM) break;
    if (sig < 0 && errno != EAGAIN && errno != EINTR) break;
    if (elector) {
      if (lostLease) break;
      if (!elector->isLeader()) continue;  // a standby, or a leader about to step down: hands off
      rebuild();
      if (!planeReady) continue;
      labelPod(k8s::kRoleLeader);  // at once, not a second later: the Service follows it
      startController();  // once: it returns at once when the controller runs
    }
    server.withPlane([&](api::ControlPlane& p) {
      if (demoSim) (void)demoSim->step(p, clock.nowMs());
      p.tick();
    });
  }
  const bool lost = lostLease.load();
  out << "tessera serve: shutting down (finishing in-flight requests)" << std::endl;
  logger.info("shutting down", {{"reason", lost ? "lost the leader lease" : "signal"}});
  if (controller) controller->stop();
  server.stop();
  // Work has stopped: on a signal the elector hands the lease back (a standby takes over at
  // its next retry, not after the lease duration).
  if (elector) {
    elector->stop();
    electionThread.join();
    labelPod(k8s::kRoleStandby);  // best effort: the next leader demotes it anyway
  }
  logger.info("stopped", {{"store", stateWhere}});
  if (lost) {
    err << "tessera serve: lost the leader lease " << o.leaseNamespace << "/" << o.leaseName
        << " (no renewal within " << o.renewDeadline << "); exiting" << std::endl;
    return kExitInternal;
  }
  return kExitOk;
}

}  // namespace tessera::cli
