#include "cmd_serve.h"

#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "api/http_server.h"
#include "cli.h"
#include "config/loaders.h"
#include "model/gpu_catalog.h"
#include "store/store.h"

namespace tessera::cli {
namespace {

constexpr std::string_view kCommand = "serve";

bool loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "::1" || host == "localhost";
}

Result<std::pair<std::string, int>> splitListen(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size()) {
    return fail(Error::invalid("--listen: expected HOST:PORT, got \"" + listen + "\""));
  }
  int port = 0;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (const std::exception&) {
    port = -1;
  }
  if (port < 0 || port > 65535) {
    return fail(Error::invalid("--listen: port must be 0 to 65535, got \"" +
                               listen.substr(colon + 1) + "\""));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return std::pair{host, port};
}

Result<std::optional<std::string>> readToken(const ServeOptions& o) {
  if (o.tokenFile) {
    std::ifstream in(*o.tokenFile);
    if (!in) return fail(Error::invalid("--token-file: cannot read " + *o.tokenFile));
    std::stringstream ss;
    ss << in.rdbuf();
    std::string token = ss.str();
    while (!token.empty() &&
           (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
      token.pop_back();
    }
    if (token.size() < 16) {
      return fail(Error::invalid("--token-file: " + *o.tokenFile +
                                 " holds a token shorter than 16 characters"));
    }
    return std::optional<std::string>(token);
  }
  if (const char* env = std::getenv("TESSERA_API_TOKEN"); env != nullptr && *env != '\0') {
    if (std::string(env).size() < 16) {
      return fail(Error::invalid("TESSERA_API_TOKEN is shorter than 16 characters"));
    }
    return std::optional<std::string>(env);
  }
  return std::optional<std::string>();
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
}

int ServeCommand::run(std::ostream& out, std::ostream& err) {
  const ServeOptions& o = options_;
  auto listen = splitListen(o.listen);
  if (!listen) return reportError(err, kCommand, listen.error());
  auto token = readToken(o);
  if (!token) return reportError(err, kCommand, token.error());
  if (!*token && !loopback(listen->first) && !o.insecureNoAuth) {
    return reportError(err, kCommand,
                       Error::invalid("refusing to serve mutating calls on " + listen->first +
                                      " without a token: give --token-file (or "
                                      "TESSERA_API_TOKEN), or --insecure-no-auth"));
  }
  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  std::optional<config::ClusterFile> cluster;
  if (o.clusterPath) {
    auto file = config::loadClusterFile(*o.clusterPath, catalog);
    if (!file) return reportError(err, kCommand, file.error());
    cluster = std::move(*file);
  }
  api::ControlPlaneConfig planeConfig;
  if (o.profilePath) {
    auto profile = config::loadProfileFile(*o.profilePath);
    if (!profile) return reportError(err, kCommand, profile.error());
    planeConfig.profile = std::move(*profile);
  }
  SteadyClock clock;
  auto store = store::Store::open(o.storePath);
  if (!store) return reportError(err, kCommand, store.error());
  auto plane = api::ControlPlane::create(catalog, clock, std::move(planeConfig), store->get());
  if (!plane) return reportError(err, kCommand, plane.error());
  if (cluster) {
    if (!(*plane)->listNodes()["nodes"].empty()) {
      out << "tessera serve: the store " << o.storePath
          << " already holds nodes; --cluster is only used to seed an empty store" << std::endl;
    } else if (auto seeded = (*plane)->loadCluster(*cluster, *o.clusterPath); !seeded) {
      return reportError(err, kCommand, seeded.error());
    }
  }

  // SIGINT and SIGTERM are taken synchronously below; block them before any thread starts
  // so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  api::ServerConfig serverConfig;
  serverConfig.host = listen->first;
  serverConfig.port = listen->second;
  serverConfig.token = *token;
  serverConfig.maxBodyBytes = o.maxBodyBytes;
  serverConfig.threads = o.threads;
  serverConfig.tlsCertFile = o.tlsCert;
  serverConfig.tlsKeyFile = o.tlsKey;
  api::HttpServer server(**plane, serverConfig);
  auto port = server.start();
  if (!port) return reportError(err, kCommand, port.error());
  out << "tessera serve: listening on " << (o.tlsCert.empty() ? "http" : "https") << "://"
      << listen->first << ":" << *port << " (" << (*token ? "bearer token required" : "no token")
      << " for mutating calls; extender at /scheduler; state in " << o.storePath << ")"
      << std::endl;

  // The upkeep loop: lapse reservations every second until a signal arrives.
  const timespec second{1, 0};
  for (;;) {
    const int sig = sigtimedwait(&signals, nullptr, &second);
    if (sig == SIGINT || sig == SIGTERM) break;
    if (sig < 0 && errno != EAGAIN && errno != EINTR) break;
    server.withPlane([](api::ControlPlane& p) { p.tick(); });
  }
  out << "tessera serve: shutting down (finishing in-flight requests)" << std::endl;
  server.stop();
  return kExitOk;
}

}  // namespace tessera::cli
