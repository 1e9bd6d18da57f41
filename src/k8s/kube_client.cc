#include "k8s/kube_client.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/text.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;

Result<std::string> readWhole(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(Error::invalid(std::string(what) + ": cannot read " + path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' ||
                        s.back() == '\t')) {
    s.pop_back();
  }
  return s;
}

// "scheme://host[:port]" with nothing after it; the client talks to the root.
struct Endpoint {
  bool tls = true;
  std::string host;
  int port = 443;
};

Result<Endpoint> parseServer(const std::string& server) {
  Endpoint e;
  std::string rest;
  if (server.rfind("https://", 0) == 0) {
    rest = server.substr(8);
  } else if (server.rfind("http://", 0) == 0) {
    e.tls = false;
    e.port = 80;
    rest = server.substr(7);
  } else {
    return fail(Error::invalid("Kubernetes API server \"" + server +
                               "\": expected https://host[:port] or http://host[:port]"));
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos) {
    return fail(Error::invalid("Kubernetes API server \"" + server +
                               "\": give the server's root, without a path"));
  }
  std::string host = rest;
  if (!rest.empty() && rest.front() == '[') {  // [v6]:port
    const auto close = rest.find(']');
    if (close == std::string::npos) {
      return fail(Error::invalid("Kubernetes API server \"" + server + "\": unclosed '['"));
    }
    host = rest.substr(1, close - 1);
    rest = rest.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') {
      return fail(Error::invalid("Kubernetes API server \"" + server + "\": junk after ']'"));
    }
    rest = rest.empty() ? "" : rest.substr(1);
  } else if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    rest = rest.substr(colon + 1);
  } else {
    rest.clear();
  }
  if (host.empty()) {
    return fail(Error::invalid("Kubernetes API server \"" + server + "\": no host"));
  }
  e.host = host;
  if (!rest.empty()) {
    char* end = nullptr;
    const long port = std::strtol(rest.c_str(), &end, 10);
    if (*end != '\0' || port < 1 || port > 65535) {
      return fail(Error::invalid("Kubernetes API server \"" + server + "\": bad port \"" +
                                 rest + "\""));
    }
    e.port = static_cast<int>(port);
  }
  return e;
}

// Names are DNS labels, so encoding only matters for a malformed one, which the API server
// then refuses by name.
std::string pathSegment(const std::string& s) { return percentEncode(s); }

std::string statusText(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "HTTP " + std::to_string(status);
  }
}

}  // namespace

std::string describeFailure(const KubeResponse& response) {
  std::string message;
  // A v1.Status carries the reason in "message"; anything else is shown as sent (shortened).
  const json status = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (status.is_object() && status.contains("message") && status["message"].is_string()) {
    message = status["message"].get<std::string>();
  } else {
    message = response.body.substr(0, 200);
  }
  std::string out = std::to_string(response.status) + " " + statusText(response.status);
  if (!message.empty()) out += ": " + message;
  return out;
}

Result<KubeConfig> inClusterConfig(std::string_view serviceAccountDir,
                                   const char* (*env)(const char*)) {
  auto get = [env](const char* name) -> std::string {
    const char* v = env != nullptr ? env(name) : std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
  };
  const std::string host = get("KUBERNETES_SERVICE_HOST");
  const std::string port = get("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return fail(Error::invalid(
        "not running inside a Kubernetes pod: KUBERNETES_SERVICE_HOST and "
        "KUBERNETES_SERVICE_PORT are not set (give --kube-api-server instead)"));
  }
  const std::string dir(serviceAccountDir);
  KubeConfig c;
  // An IPv6 service address needs brackets in a URL.
  c.server = "https://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
             port;
  c.tokenFile = dir + "/token";
  c.caFile = dir + "/ca.crt";
  for (const std::string* f : {&c.tokenFile, &c.caFile}) {
    if (::access(f->c_str(), R_OK) != 0) {
      return fail(Error::invalid("in-cluster Kubernetes config: cannot read " + *f +
                                 " (is a service account token mounted?)"));
    }
  }
  return c;
}

struct KubeClient::Impl {
  std::mutex mu;
  std::unique_ptr<httplib::Client> http;
  // The token as last read, and the file's modification time then.
  std::string token;
  timespec tokenMtime{};
  bool tokenRead = false;
};

KubeClient::KubeClient(KubeConfig config)
    : config_(std::move(config)), impl_(std::make_unique<Impl>()) {}

KubeClient::~KubeClient() = default;

Result<std::unique_ptr<KubeClient>> KubeClient::create(KubeConfig config) {
  auto endpoint = parseServer(config.server);
  if (!endpoint) return fail(endpoint.error());
  if (!config.caFile.empty()) {
    if (auto ca = readWhole(config.caFile, "--kube-ca-file"); !ca) return fail(ca.error());
  }
  if (endpoint->tls && config.caFile.empty()) {
    return fail(Error::invalid("Kubernetes API server " + config.server +
                               " is https: give the CA bundle that signs its certificate "
                               "(--kube-ca-file)"));
  }
  if (config.timeoutMs <= 0) {
    return fail(Error::invalid("Kubernetes API timeout: must be positive"));
  }
  std::unique_ptr<KubeClient> client(new KubeClient(std::move(config)));
  if (!client->config_.tokenFile.empty()) {
    if (auto t = client->token(); !t) return fail(t.error());
  }
  const KubeConfig& c = client->config_;
  // httplib picks TLS from the scheme; the host and port were checked above.
  client->impl_->http = std::make_unique<httplib::Client>(c.server);
  if (endpoint->tls) {
    client->impl_->http->set_ca_cert_path(c.caFile.c_str());
    client->impl_->http->enable_server_certificate_verification(true);
  }
  auto& http = *client->impl_->http;
  const auto seconds = c.timeoutMs / 1000;
  const auto micros = (c.timeoutMs % 1000) * 1000;
  http.set_connection_timeout(seconds, micros);
  http.set_read_timeout(seconds, micros);
  // A request is written as headers then body: without TCP_NODELAY, Nagle's algorithm holds
  // the body until the server's delayed ACK (about 40 ms per call on Linux).
  http.set_tcp_nodelay(true);
  http.set_write_timeout(seconds, micros);
  http.set_keep_alive(true);
  return client;
}

Result<std::string> KubeClient::token() {
  if (config_.tokenFile.empty()) return std::string();
  struct stat st {};
  if (::stat(config_.tokenFile.c_str(), &st) != 0) {
    return fail(Error::invalid("--kube-token-file: cannot read " + config_.tokenFile));
  }
  if (!impl_->tokenRead || st.st_mtim.tv_sec != impl_->tokenMtime.tv_sec ||
      st.st_mtim.tv_nsec != impl_->tokenMtime.tv_nsec) {
    auto text = readWhole(config_.tokenFile, "--kube-token-file");
    if (!text) return fail(text.error());
    std::string t = trimmed(*text);
    if (t.empty()) {
      return fail(Error::invalid("--kube-token-file: " + config_.tokenFile + " is empty"));
    }
    impl_->token = std::move(t);
    impl_->tokenMtime = st.st_mtim;
    impl_->tokenRead = true;
  }
  return impl_->token;
}

Result<KubeResponse> KubeClient::request(std::string_view method, const std::string& path,
                                         const std::string& body, std::string_view contentType) {
  if (method != "GET" && method != "POST" && method != "PUT" && method != "PATCH" &&
      method != "DELETE") {
    return fail(Error::invalid("Kubernetes API: unsupported method " + std::string(method)));
  }
  std::lock_guard lock(impl_->mu);
  auto bearer = token();
  if (!bearer) return fail(bearer.error());
  httplib::Headers headers{{"Accept", "application/json"}};
  if (!bearer->empty()) headers.emplace("Authorization", "Bearer " + *bearer);
  if (!config_.userAgent.empty()) headers.emplace("User-Agent", config_.userAgent);
  const std::string type(contentType);
  auto& http = *impl_->http;
  httplib::Result res = [&] {
    if (method == "GET") return http.Get(path, headers);
    if (method == "POST") return http.Post(path, headers, body, type);
    if (method == "PUT") return http.Put(path, headers, body, type);
    if (method == "PATCH") return http.Patch(path, headers, body, type);
    return http.Delete(path, headers, body, type);
  }();
  if (!res) {
    std::string why = httplib::to_string(res.error());
    if (res.error() == httplib::Error::SSLServerVerification) {
      why += " (the certificate does not chain to " + config_.caFile + ")";
    }
    return fail(Error::internal("Kubernetes API " + std::string(method) + " " + config_.server +
                                path + ": " + why));
  }
  return KubeResponse{res->status, res->body};
}

void StreamStopper::stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  if (abort_) abort_();
}

bool StreamStopper::stopped() const {
  std::lock_guard lock(mu_);
  return stopped_;
}

Result<KubeResponse> KubeClient::stream(const std::string& path,
                                        const std::function<bool(std::string_view)>& onData,
                                        StreamStopper* stopper, int readTimeoutMs) {
  std::string bearer;
  {
    std::lock_guard lock(impl_->mu);
    auto t = token();
    if (!t) return fail(t.error());
    bearer = std::move(*t);
  }
  // A connection of its own: a watch holds it for minutes.
  httplib::Client http(config_.server);
  if (config_.server.rfind("https://", 0) == 0) {
    http.set_ca_cert_path(config_.caFile.c_str());
    http.enable_server_certificate_verification(true);
  }
  const int readMs = readTimeoutMs > 0 ? readTimeoutMs : config_.timeoutMs;
  http.set_connection_timeout(config_.timeoutMs / 1000, (config_.timeoutMs % 1000) * 1000);
  http.set_read_timeout(readMs / 1000, (readMs % 1000) * 1000);
  http.set_keep_alive(false);
  if (stopper != nullptr) {
    std::lock_guard lock(stopper->mu_);
    if (stopper->stopped_) {
      return fail(Error::internal("Kubernetes API GET " + config_.server + path + ": stopped"));
    }
    stopper->abort_ = [&http] { http.stop(); };
  }
  httplib::Headers headers{{"Accept", "application/json"}};
  if (!bearer.empty()) headers.emplace("Authorization", "Bearer " + bearer);
  if (!config_.userAgent.empty()) headers.emplace("User-Agent", config_.userAgent);
  KubeResponse out;
  httplib::Result res = http.Get(
      path, headers,
      [&out](const httplib::Response& r) {
        out.status = r.status;
        return true;
      },
      [&](const char* data, size_t size) {
        if (out.status != 200) {
          out.body.append(data, size);
          return true;
        }
        return onData(std::string_view(data, size));
      });
  bool stopped = false;
  if (stopper != nullptr) {
    std::lock_guard lock(stopper->mu_);
    stopper->abort_ = nullptr;
    stopped = stopper->stopped_;
  }
  if (!res) {
    // The receiver ending the stream is not a failure.
    if (res.error() == httplib::Error::Canceled && !stopped) return out;
    return fail(
        Error::internal("Kubernetes API GET " + config_.server + path + ": " +
                        (stopped ? std::string("stopped") : httplib::to_string(res.error()))));
  }
  out.status = res->status;
  return out;
}

Result<void> KubeClient::bindPod(const std::string& ns, const std::string& name,
                                 const std::string& uid, const std::string& node) {
  json metadata{{"name", name}, {"namespace", ns}};
  if (!uid.empty()) metadata["uid"] = uid;
  const json binding{{"apiVersion", "v1"},
                     {"kind", "Binding"},
                     {"metadata", std::move(metadata)},
                     {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  const std::string path = "/api/v1/namespaces/" + pathSegment(ns) + "/pods/" +
                           pathSegment(name) + "/binding";
  auto res = request("POST", path, binding.dump());
  if (!res) return fail(res.error());
  if (res->status == 201 || res->status == 200) return {};
  return fail(Error::precondition("binding " + ns + "/" + name + " to " + node + ": " +
                                        describeFailure(*res)));
}

Binder bindingPoster(KubeClient& client) {
  return [&client](const std::string& ns, const std::string& name, const std::string& uid,
                   const std::string& node) { return client.bindPod(ns, name, uid, node); };
}

PodSource podReader(KubeClient& client) {
  return [&client](const std::string& ns, const std::string& name) -> Result<json> {
    auto res = client.request(
        "GET", "/api/v1/namespaces/" + pathSegment(ns) + "/pods/" + pathSegment(name));
    if (!res) return fail(res.error());
    if (res->status != 200) {
      return fail(Error::internal("reading pod " + ns + "/" + name + ": " + describeFailure(*res)));
    }
    json pod = json::parse(res->body, nullptr, false);
    if (pod.is_discarded() || !pod.is_object()) {
      return fail(Error::internal("reading pod " + ns + "/" + name + ": the answer is not JSON"));
    }
    return pod;
  };
}

}  // namespace tessera::k8s
