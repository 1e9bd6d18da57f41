#pragma once
// A small client for the Kubernetes API server: what `tessera serve` needs to act on the
// cluster (today: post the v1.Binding of a pod the extender's bind booked).
//
// Where the API server is and how to authenticate comes from a KubeConfig, built either by
// inClusterConfig() (a pod's service account: $KUBERNETES_SERVICE_HOST/_PORT, the token,
// CA bundle and namespace under /var/run/secrets/kubernetes.io/serviceaccount) or from
// explicit settings (`tessera serve --kube-api-server URL --kube-token-file F --kube-ca-file
// F`; `http://127.0.0.1:8001` for `kubectl proxy`). The bearer token is read again whenever
// its file changes, because projected service-account tokens rotate (about hourly).
//
// Errors: a transport failure names the server and what failed; an answer that is not 2xx
// becomes an Error carrying the HTTP status and the message of the Kubernetes Status object
// ("409 Conflict: pod default/x is already assigned to node n1").
//
// Threading: one request at a time per client (calls are serialised inside).

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "common/result.h"
#include "k8s/extender.h"

namespace tessera::k8s {

inline constexpr std::string_view kServiceAccountDir =
    "/var/run/secrets/kubernetes.io/serviceaccount";

struct KubeConfig {
  std::string server;     // "https://10.0.0.1:443" or "http://127.0.0.1:8001"
  std::string tokenFile;  // bearer token; empty = none (kubectl proxy adds its own)
  std::string caFile;     // PEM bundle the server's certificate must chain to (https)
  int timeoutMs = 5000;   // connect and read timeout per request
  // Sent as User-Agent (the API server's audit log records it); empty: httplib's own.
  std::string userAgent;
};

// The service account's view of the API server, as a pod sees it. `env` reads an environment
// variable (nullptr = std::getenv). Fails naming what is missing when not inside a pod.
Result<KubeConfig> inClusterConfig(std::string_view serviceAccountDir = kServiceAccountDir,
                                   const char* (*env)(const char*) = nullptr);

struct KubeResponse {
  int status = 0;
  std::string body;
};

// Ends a KubeClient::stream from another thread (shutdown): the connection is shut down and
// the stream returns. Once stopped it stays stopped; a stream started afterwards returns at
// once.
class StreamStopper {
 public:
  void stop();
  bool stopped() const;

 private:
  friend class KubeClient;
  mutable std::mutex mu_;
  bool stopped_ = false;
  std::function<void()> abort_;  // set while a stream is open
};

class KubeClient {
 public:
  // Checks the settings (URL scheme and host, readable token and CA files) without
  // connecting.
  static Result<std::unique_ptr<KubeClient>> create(KubeConfig config);
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  // One request; `path` starts with "/" ("/api/v1/namespaces/x/pods"). Any HTTP status is a
  // response; only a transport failure is an error.
  Result<KubeResponse> request(std::string_view method, const std::string& path,
                               const std::string& body = "",
                               std::string_view contentType = "application/json");

  // POST /api/v1/namespaces/{ns}/pods/{name}/binding, with the pod's UID as a precondition
  // (a pod deleted and re-created under the same name is not bound by mistake). Succeeds on
  // 201; otherwise the error names the status and the API server's message.
  Result<void> bindPod(const std::string& ns, const std::string& name, const std::string& uid,
                       const std::string& node);

  // A GET whose body is read as it arrives (a watch): each piece of a 200 answer goes to
  // `onData` (return false to end the stream). Runs on its own connection, so it does not
  // hold up request(); `readTimeoutMs` bounds the silence between two pieces (0 = the
  // config's timeout). Returns the status; for a status other than 200 the body is returned
  // whole instead of streamed. A stop through `stopper` ends it with an error.
  Result<KubeResponse> stream(const std::string& path,
                              const std::function<bool(std::string_view)>& onData,
                              StreamStopper* stopper = nullptr, int readTimeoutMs = 0);

  const KubeConfig& config() const { return config_; }

 private:
  explicit KubeClient(KubeConfig config);
  Result<std::string> token();

  struct Impl;
  KubeConfig config_;
  std::unique_ptr<Impl> impl_;
};

// The extender's Binder, posting through `client` (borrowed; it must outlive the binder).
Binder bindingPoster(KubeClient& client);
// The extender's PodSource: GET /api/v1/namespaces/{ns}/pods/{name} through `client`.
PodSource podReader(KubeClient& client);

// "409 Conflict: <message>" from a non-2xx answer whose body may be a v1.Status.
std::string describeFailure(const KubeResponse& response);

}  // namespace tessera::k8s
