#include "serve_settings.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/loaders.h"
#include "k8s/kube_client.h"
#include "model/gpu_catalog.h"

namespace tessera::cli {

void applyServeFile(const config::ServeFile& file, ServeOptions& o) {
  auto set = [](auto& to, const auto& from) {
    if (from) to = *from;
  };
  set(o.listen, file.listen);
  set(o.storePath, file.store);
  if (file.tokenFile) o.tokenFile = file.tokenFile;
  if (file.cluster) o.clusterPath = file.cluster;
  if (file.profile) o.profilePath = file.profile;
  set(o.tlsCert, file.tlsCert);
  set(o.tlsKey, file.tlsKey);
  set(o.logFormat, file.logFormat);
  set(o.kubeApiServer, file.kubeApiServer);
  set(o.kubeTokenFile, file.kubeTokenFile);
  set(o.kubeCaFile, file.kubeCaFile);
  set(o.gpuMode, file.gpuMode);
  set(o.insecureNoAuth, file.insecureNoAuth);
  if (file.maxBodyBytes) o.maxBodyBytes = static_cast<std::size_t>(*file.maxBodyBytes);
  if (file.threads) o.threads = static_cast<int>(*file.threads);
}

Result<void> checkServeChoices(const ServeOptions& o) {
  if (o.stateBackend != "sqlite" && o.stateBackend != "kubernetes") {
    return fail(Error::invalid("state backend: expected sqlite or kubernetes, got \"" +
                               o.stateBackend + "\""));
  }
  if (o.logFormat != "text" && o.logFormat != "json") {
    return fail(Error::invalid("log format: expected text or json, got \"" + o.logFormat + "\""));
  }
  if (o.gpuMode != "device-plugin" && o.gpuMode != "dra") {
    return fail(Error::invalid("GPU mode: expected device-plugin or dra, got \"" + o.gpuMode +
                               "\" (--gpu-mode, $TESSERA_GPU_MODE, kubernetes.gpuMode)"));
  }
  return {};
}

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

// The Kubernetes API client the extender's bind posts through, or none.
Result<std::unique_ptr<k8s::KubeClient>> kubeClient(const ServeOptions& o) {
  std::string server = o.kubeApiServer;
  if (server == "none") return std::unique_ptr<k8s::KubeClient>();
  const bool inPod = std::getenv("KUBERNETES_SERVICE_HOST") != nullptr;
  if (server.empty() && !inPod) return std::unique_ptr<k8s::KubeClient>();
  k8s::KubeConfig config;
  if (server.empty() || server == "in-cluster") {
    auto found = k8s::inClusterConfig();
    if (!found) return fail(Error::invalid("--kube-api-server: " + found.error().message));
    config = std::move(*found);
  } else {
    config.server = server;
  }
  if (!o.kubeTokenFile.empty()) config.tokenFile = o.kubeTokenFile;
  if (!o.kubeCaFile.empty()) config.caFile = o.kubeCaFile;
  auto client = k8s::KubeClient::create(std::move(config));
  if (!client) return fail(Error::invalid("--kube-api-server: " + client.error().message));
  return std::move(*client);
}

Result<void> checkServeAccess(const ServeOptions& o, const std::string& host, bool haveToken) {
  if (!haveToken && !loopback(host) && !o.insecureNoAuth) {
    return fail(Error::invalid("refusing to serve mutating calls on " + host +
                               " without a token: give --token-file (or "
                               "TESSERA_API_TOKEN), or --insecure-no-auth"));
  }
  return {};
}

Result<ServeFileCheck> checkServeConfigFile(const std::string& path) {
  auto file = config::loadServeFile(path);
  if (!file) return fail(file.error());
  ServeOptions o;
  applyServeFile(*file, o);
  auto named = [&](std::string what) {
    return [what, &path](const Error& e) { return Error{e.code, path + ": " + what + e.message}; };
  };
  if (auto ok = checkServeChoices(o); !ok) return fail(named("")(ok.error()));
  auto listen = splitListen(o.listen);
  if (!listen) return fail(named("")(listen.error()));
  ServeFileCheck check;
  // Files the pod mounts are often absent where validate runs: say so, do not fail.
  auto here = [&](const std::string& file) {
    if (std::filesystem::exists(file)) return true;
    check.notHere.push_back(file);
    return false;
  };
  // A token file named but absent here still counts as a token for the access check.
  if (o.tokenFile && here(*o.tokenFile)) {
    if (auto read = readToken(o); !read) return fail(named("tokenFile: ")(read.error()));
  }
  if (auto ok = checkServeAccess(o, listen->first, o.tokenFile.has_value()); !ok) {
    return fail(named("")(ok.error()));
  }
  for (const std::string* tls : {&o.tlsCert, &o.tlsKey}) {
    if (tls->empty() || !here(*tls)) continue;
    if (!std::ifstream(*tls)) {
      return fail(Error::invalid(path + ": tls: cannot read " + *tls));
    }
  }
  if (o.clusterPath && here(*o.clusterPath)) {
    model::GpuCatalog catalog = model::GpuCatalog::builtin();  // the file may add GPU types
    auto cluster = config::loadClusterFile(*o.clusterPath, catalog);
    if (!cluster) return fail(named("cluster: ")(cluster.error()));
  }
  if (o.profilePath && here(*o.profilePath)) {
    auto profile = config::loadProfileFile(*o.profilePath);
    if (!profile) return fail(named("profile: ")(profile.error()));
  }
  // The Kubernetes client: in-cluster settings exist only in a pod; an explicit server is
  // checked as serve checks it (an https server needs its CA bundle), with the files it names.
  if (!o.kubeApiServer.empty() && o.kubeApiServer != "in-cluster" && o.kubeApiServer != "none") {
    const bool filesHere = (o.kubeTokenFile.empty() || here(o.kubeTokenFile)) &&
                           (o.kubeCaFile.empty() || here(o.kubeCaFile));
    if (filesHere) {
      if (auto client = kubeClient(o); !client) {
        return fail(named("kubernetes: ")(client.error()));
      }
    }
  }
  return check;
}

}  // namespace tessera::cli
