// The Kubernetes API client against a real HTTP(S) server on loopback that answers the way
// the API server does for pod bindings (201 Created with a v1.Status; 409 Conflict when the
// pod is already bound or its UID differs; 401 without the right token).

#include "k8s/kube_client.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "store/testing/temp_dir.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;
using store::testing::TempDir;

void writeFile(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

// Pods by namespace/name with their UID and node ("" = not bound), served at the binding
// subresource like the API server: the token must match, the body must be a v1.Binding whose
// metadata names the pod, a UID precondition must hold, and a bound pod cannot move.
class BindingApiServer {
 public:
  explicit BindingApiServer(std::unique_ptr<httplib::Server> server) : server_(std::move(server)) {
    server_->Post(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding)",
                  [this](const httplib::Request& req, httplib::Response& res) {
                    handle(req, res);
                  });
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~BindingApiServer() {
    server_->stop();
    thread_.join();
  }
  int port() const { return port_; }
  void addPod(const std::string& key, const std::string& uid) {
    std::lock_guard lock(mu_);
    pods_[key] = {uid, ""};
  }
  std::string nodeOf(const std::string& key) {
    std::lock_guard lock(mu_);
    return pods_[key].node;
  }
  std::string token = "sa-token-1";
  std::string lastAuthorization;
  json lastBody;

 private:
  struct Pod {
    std::string uid, node;
  };
  static void status(httplib::Response& res, int code, const std::string& reason,
                     const std::string& message) {
    res.status = code;
    res.set_content(json{{"kind", "Status"},
                         {"apiVersion", "v1"},
                         {"status", code < 300 ? "Success" : "Failure"},
                         {"message", message},
                         {"reason", reason},
                         {"code", code}}
                        .dump(),
                    "application/json");
  }
  void handle(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu_);
    lastAuthorization = req.get_header_value("Authorization");
    if (lastAuthorization != "Bearer " + token) {
      return status(res, 401, "Unauthorized", "Unauthorized");
    }
    const std::string ns = req.matches[1], name = req.matches[2];
    lastBody = json::parse(req.body, nullptr, false);
    if (!lastBody.is_object() || lastBody.value("kind", "") != "Binding" ||
        !lastBody.contains("target") || lastBody["target"].value("kind", "") != "Node") {
      return status(res, 400, "BadRequest", "not a v1.Binding");
    }
    auto it = pods_.find(ns + "/" + name);
    if (it == pods_.end()) return status(res, 404, "NotFound", "pods \"" + name + "\" not found");
    const json& meta = lastBody["metadata"];
    if (meta.value("name", "") != name || meta.value("namespace", "") != ns) {
      return status(res, 400, "BadRequest", "binding metadata does not name the pod");
    }
    if (meta.contains("uid") && meta["uid"] != it->second.uid) {
      return status(res, 409, "Conflict",
                    "Operation cannot be fulfilled on pods/binding \"" + name +
                        "\": Precondition failed: UID in precondition: " +
                        meta["uid"].get<std::string>() + ", UID in object meta: " +
                        it->second.uid);
    }
    if (!it->second.node.empty()) {
      return status(res, 409, "Conflict",
                    "Operation cannot be fulfilled on pods/binding \"" + name +
                        "\": pod " + name + " is already assigned to node \"" +
                        it->second.node + "\"");
    }
    it->second.node = lastBody["target"].value("name", "");
    status(res, 201, "", "");
  }

  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, Pod> pods_;
};

class KubeClientTest : public ::testing::Test {
 protected:
  KubeClientTest() : api_(std::make_unique<httplib::Server>()) {
    writeFile(tokenFile(), api_.token + "\n");
    api_.addPod("default/llama-0", "uid-0");
    api_.addPod("team-a/llama-1", "uid-1");
  }
  std::filesystem::path tokenFile() const { return dir_.path() / "token"; }
  std::unique_ptr<KubeClient> client() {
    KubeConfig c;
    c.server = "http://127.0.0.1:" + std::to_string(api_.port());
    c.tokenFile = tokenFile().string();
    auto made = KubeClient::create(c);
    EXPECT_TRUE(made) << made.error().message;
    return made ? std::move(*made) : nullptr;
  }

  TempDir dir_;
  BindingApiServer api_;
};

TEST_F(KubeClientTest, BindPodPostsABindingWithTheUidPrecondition) {
  auto c = client();
  ASSERT_TRUE(c);
  auto bound = c->bindPod("team-a", "llama-1", "uid-1", "gpu-node-3");
  ASSERT_TRUE(bound) << bound.error().message;
  EXPECT_EQ(api_.nodeOf("team-a/llama-1"), "gpu-node-3");
  EXPECT_EQ(api_.lastAuthorization, "Bearer sa-token-1");
  EXPECT_EQ(api_.lastBody["apiVersion"], "v1");
  EXPECT_EQ(api_.lastBody["metadata"]["uid"], "uid-1");
  EXPECT_EQ(api_.lastBody["target"]["name"], "gpu-node-3");
}

TEST_F(KubeClientTest, RefusalsCarryTheStatusAndTheApiServersMessage) {
  auto c = client();
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->bindPod("default", "llama-0", "uid-0", "n1"));
  auto again = c->bindPod("default", "llama-0", "uid-0", "n2");
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find("409 Conflict"), std::string::npos) << again.error().message;
  EXPECT_NE(again.error().message.find("already assigned to node \"n1\""), std::string::npos)
      << again.error().message;
  EXPECT_EQ(api_.nodeOf("default/llama-0"), "n1");  // not moved

  auto recreated = c->bindPod("team-a", "llama-1", "uid-old", "n1");
  ASSERT_FALSE(recreated);
  EXPECT_NE(recreated.error().message.find("Precondition failed"), std::string::npos);
  EXPECT_EQ(api_.nodeOf("team-a/llama-1"), "");

  auto missing = c->bindPod("default", "nope", "", "n1");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("404 Not Found: pods \"nope\" not found"),
            std::string::npos)
      << missing.error().message;
}

TEST_F(KubeClientTest, ARotatedTokenIsReadAgain) {
  auto c = client();
  ASSERT_TRUE(c);
  api_.token = "sa-token-2";
  // Make sure the modification time moves even on a coarse-grained filesystem clock.
  writeFile(tokenFile(), "sa-token-2\n");
  std::filesystem::last_write_time(
      tokenFile(), std::filesystem::last_write_time(tokenFile()) + std::chrono::seconds(2));
  auto bound = c->bindPod("default", "llama-0", "uid-0", "n1");
  ASSERT_TRUE(bound) << bound.error().message;
  EXPECT_EQ(api_.lastAuthorization, "Bearer sa-token-2");
}

TEST_F(KubeClientTest, AWrongTokenIsAnUnauthorizedError) {
  writeFile(tokenFile(), "someone-else");
  auto c = client();
  ASSERT_TRUE(c);
  auto bound = c->bindPod("default", "llama-0", "uid-0", "n1");
  ASSERT_FALSE(bound);
  EXPECT_NE(bound.error().message.find("401 Unauthorized"), std::string::npos);
}

TEST(KubeClient, TransportFailuresNameTheServer) {
  // A port nothing listens on: bind one, then close it.
  int port = 0;
  {
    httplib::Server s;
    port = s.bind_to_any_port("127.0.0.1");
  }
  KubeConfig c;
  c.server = "http://127.0.0.1:" + std::to_string(port);
  c.timeoutMs = 500;
  auto client = KubeClient::create(c);
  ASSERT_TRUE(client) << client.error().message;
  auto bound = (*client)->bindPod("default", "p", "u", "n");
  ASSERT_FALSE(bound);
  EXPECT_NE(bound.error().message.find(c.server), std::string::npos) << bound.error().message;
}

TEST(KubeClient, BadSettingsAreRefusedBeforeAnyRequest) {
  struct Case {
    std::string server, ca, token, expect;
  };
  TempDir dir;
  const auto empty = dir.path() / "empty-token";
  writeFile(empty, "\n");
  for (const Case& k : std::vector<Case>{
           {"ftp://api:6443", "", "", "expected https://host[:port]"},
           {"https://api:6443", "", "", "give the CA bundle"},
           {"https://api:6443/prefix", "", "", "without a path"},
           {"http://api:99999", "", "", "bad port"},
           {"http://:8001", "", "", "no host"},
           {"https://api:6443", (dir.path() / "no-ca.crt").string(), "", "cannot read"},
           {"http://127.0.0.1:8001", "", (dir.path() / "no-token").string(), "cannot read"},
           {"http://127.0.0.1:8001", "", empty.string(), "is empty"},
       }) {
    KubeConfig c;
    c.server = k.server;
    c.caFile = k.ca;
    c.tokenFile = k.token;
    auto made = KubeClient::create(c);
    ASSERT_FALSE(made) << k.server;
    EXPECT_NE(made.error().message.find(k.expect), std::string::npos)
        << k.server << ": " << made.error().message;
  }
}

// The environment inClusterConfig reads, for one test at a time.
std::map<std::string, std::string>* fakeEnv = nullptr;
const char* readFakeEnv(const char* name) {
  auto it = fakeEnv->find(name);
  return it == fakeEnv->end() ? nullptr : it->second.c_str();
}

TEST(KubeClient, InClusterConfigComesFromTheServiceAccount) {
  TempDir sa;
  std::map<std::string, std::string> env;
  fakeEnv = &env;
  auto outside = inClusterConfig(sa.path().string(), readFakeEnv);
  ASSERT_FALSE(outside);
  EXPECT_NE(outside.error().message.find("KUBERNETES_SERVICE_HOST"), std::string::npos);

  env = {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}};
  auto noToken = inClusterConfig(sa.path().string(), readFakeEnv);
  ASSERT_FALSE(noToken);
  EXPECT_NE(noToken.error().message.find("token"), std::string::npos);

  writeFile(sa.path() / "token", "t");
  writeFile(sa.path() / "ca.crt", "pem");
  auto inside = inClusterConfig(sa.path().string(), readFakeEnv);
  ASSERT_TRUE(inside) << inside.error().message;
  EXPECT_EQ(inside->server, "https://10.96.0.1:443");
  EXPECT_EQ(inside->tokenFile, (sa.path() / "token").string());
  EXPECT_EQ(inside->caFile, (sa.path() / "ca.crt").string());

  env["KUBERNETES_SERVICE_HOST"] = "fd00::1";
  auto v6 = inClusterConfig(sa.path().string(), readFakeEnv);
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->server, "https://[fd00::1]:443");
  fakeEnv = nullptr;
}

// A self-signed certificate for 127.0.0.1 made with the openssl command line.
bool makeCertificate(const std::filesystem::path& dir, const std::string& name) {
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=" + name +
                          " -addext subjectAltName=IP:127.0.0.1 -keyout " +
                          (dir / (name + ".key")).string() + " -out " +
                          (dir / (name + ".crt")).string() + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

TEST(KubeClient, HttpsVerifiesTheServerAgainstTheCaBundle) {
  TempDir dir;
  if (!makeCertificate(dir.path(), "apiserver") || !makeCertificate(dir.path(), "stranger")) {
    GTEST_SKIP() << "the openssl command is not installed (scripts/install-deps.sh installs it)";
  }
  BindingApiServer api(std::make_unique<httplib::SSLServer>(
      (dir.path() / "apiserver.crt").c_str(), (dir.path() / "apiserver.key").c_str()));
  api.addPod("default/p", "u");
  writeFile(dir.path() / "token", api.token);
  KubeConfig c;
  c.server = "https://127.0.0.1:" + std::to_string(api.port());
  c.tokenFile = (dir.path() / "token").string();

  c.caFile = (dir.path() / "stranger.crt").string();
  auto wrong = KubeClient::create(c);
  ASSERT_TRUE(wrong) << wrong.error().message;
  auto refused = (*wrong)->bindPod("default", "p", "u", "n1");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("does not chain to"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(api.nodeOf("default/p"), "");

  c.caFile = (dir.path() / "apiserver.crt").string();
  auto right = KubeClient::create(c);
  ASSERT_TRUE(right) << right.error().message;
  auto bound = (*right)->bindPod("default", "p", "u", "n1");
  ASSERT_TRUE(bound) << bound.error().message;
  EXPECT_EQ(api.nodeOf("default/p"), "n1");
}

}  // namespace
}  // namespace tessera::k8s
