// `tessera serve` as a user starts it: refusals with exit code 2 and a message naming the
// problem, and a clean exit 0 on SIGTERM.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "api/testing/serve_process.h"
#include "common/testing/spawn.h"
#include "k8s/testing/fake_apiserver.h"
#include "store/store.h"
#include "store/testing/temp_dir.h"

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int exitCode = -1;
  std::string err;
};

// Runs `tessera serve <args>` to completion (it must exit by itself: bad input).
Outcome serve(const std::string& args) {
  const fs::path errFile =
      fs::temp_directory_path() / ("tessera_serve_err_" + std::to_string(::getpid()));
  const std::string command = std::string(TESSERA_BINARY) + " serve " + args + " >/dev/null 2>" +
                              errFile.string() + " </dev/null";
  const int status = std::system(command.c_str());
  Outcome out;
  out.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(errFile);
  out.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  fs::remove(errFile);
  return out;
}

TEST(ServeCli, RefusesBadSetupsWithExitTwoAndAReason) {
  const fs::path dir =
      fs::temp_directory_path() / ("tessera_serve_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path notDb = dir / "not.db";
  std::ofstream(notDb) << "this is not a database";
  const fs::path shortToken = dir / "token";
  std::ofstream(shortToken) << "abc\n";
  struct Case {
    std::string args;
    std::string mention;
  };
  for (const Case& c : {
           Case{"--listen nowhere --store :memory:", "HOST:PORT"},
           Case{"--listen 127.0.0.1:99999 --store :memory:", "port"},
           Case{"--listen 0.0.0.0:0 --store :memory:", "without a token"},
           Case{"--listen 127.0.0.1:0 --store " + notDb.string(), "not a Tessera database"},
           Case{"--listen 127.0.0.1:0 --store :memory: --token-file " + shortToken.string(),
                "shorter than 16"},
           Case{"--listen 127.0.0.1:0 --store :memory: --tls-cert " + notDb.string(),
                "certificate"},
       }) {
    const Outcome o = serve(c.args);
    EXPECT_EQ(o.exitCode, 2) << c.args << "\n" << o.err;
    EXPECT_NE(o.err.find(c.mention), std::string::npos) << c.args << "\n" << o.err;
  }
  // The store file that was refused is left as it was.
  std::ifstream in(notDb);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "this is not a database");
  fs::remove_all(dir);
}

TEST(ServeCli, ExitsZeroOnSigterm) {
  const auto child = tessera::testing::spawnWithStdoutPipe(
      {TESSERA_BINARY, "serve", "--listen", "127.0.0.1:0", "--store", ":memory:"});
  ASSERT_GT(child.pid, 0);
  const pid_t pid = child.pid;
  const int out = child.out;
  std::string line;
  char c = 0;
  while (::read(out, &c, 1) == 1 && c != '\n') line += c;
  EXPECT_NE(line.find("listening on http://127.0.0.1:"), std::string::npos) << line;
  ::kill(pid, SIGTERM);
  std::string rest;
  while (::read(out, &c, 1) == 1) rest += c;
  ::close(out);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(rest.find("shutting down"), std::string::npos) << rest;
}

// The binding subresource of a Kubernetes API server: records bindings, refuses a second one.
class BindingApi {
 public:
  BindingApi() {
    server_.Post(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding)",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   std::lock_guard lock(mu_);
                   const std::string key = std::string(req.matches[1]) + "/" +
                                           std::string(req.matches[2]);
                   if (req.get_header_value("Authorization") != "Bearer binder-token" ||
                       bound_.count(key) > 0 || refuse) {
                     res.status = 409;
                     res.set_content(R"({"kind":"Status","message":"pod is already assigned"})",
                                     "application/json");
                     return;
                   }
                   const auto body = nlohmann::json::parse(req.body);
                   bound_[key] = body["target"]["name"].get<std::string>();
                   res.status = 201;
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~BindingApi() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  std::map<std::string, std::string> bound() {
    std::lock_guard lock(mu_);
    return bound_;
  }
  bool refuse = false;

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, std::string> bound_;
};

// A node testdata/pod_llama.json fits on (its selector asks for the inference pool).
constexpr const char* kNode = R"({"name": "gpu-1", "cpu": 32, "hostMemory": "256Gi",
  "labels": {"tessera.io/pool": "inference"}, "gpus": [{"type": "H100-80GB"}]})";

TEST(ServeCli, TheExtendersBindPostsTheBindingAndTheBookingSurvivesARestart) {
  tessera::store::testing::TempDir dir;
  std::ofstream(dir.file("kube-token")) << "binder-token\n";
  BindingApi api;
  const std::vector<std::string> args{
      "--listen",          "127.0.0.1:0",
      "--store",           dir.file("state.db"),
      "--kube-api-server", "http://127.0.0.1:" + std::to_string(api.port()),
      "--kube-token-file", dir.file("kube-token")};
  nlohmann::json pod;
  {
    std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/src/k8s/testdata/pod_llama.json");
    pod = nlohmann::json::parse(in);
  }
  const std::string name = pod["metadata"]["name"], ns = pod["metadata"]["namespace"],
                    uid = pod["metadata"]["uid"];
  {
    tessera::api::testing::ServeProcess serve(TESSERA_BINARY, args, "", 2);
    ASSERT_GT(serve.port(), 0) << serve.banner();
    EXPECT_NE(serve.banner().find("posts bindings to http://127.0.0.1:"), std::string::npos)
        << serve.banner();
    httplib::Client http("127.0.0.1", serve.port());
    auto post = [&](const std::string& path, const nlohmann::json& body) {
      auto r = http.Post(path, body.dump(), "application/json");
      EXPECT_TRUE(r) << path;
      return r ? std::make_pair(r->status, r->body) : std::make_pair(0, std::string());
    };
    ASSERT_EQ(post("/api/v1/nodes", nlohmann::json::parse(kNode)).first, 201);
    ASSERT_EQ(post("/api/v1/models", {{"name", "llama-7b"}, {"weights", "14Gi"}}).first, 200);
    auto filtered = post("/scheduler/filter", {{"Pod", pod}, {"NodeNames", {"gpu-1"}}});
    ASSERT_EQ(filtered.first, 200) << filtered.second;
    ASSERT_EQ(nlohmann::json::parse(filtered.second)["NodeNames"], nlohmann::json({"gpu-1"}));
    auto bound = post("/scheduler/bind", {{"PodName", name},
                                          {"PodNamespace", ns},
                                          {"PodUID", uid},
                                          {"Node", "gpu-1"}});
    ASSERT_EQ(bound.first, 200) << bound.second;
    EXPECT_EQ(nlohmann::json::parse(bound.second)["Error"], "") << bound.second;
    EXPECT_EQ(api.bound()[ns + "/" + name], "gpu-1");
  }
  // After a restart the booking (with its GPU) is still there: bind persisted it.
  tessera::api::testing::ServeProcess again(TESSERA_BINARY, args, "", 2);
  ASSERT_GT(again.port(), 0) << again.banner();
  httplib::Client http("127.0.0.1", again.port());
  auto node = http.Get("/api/v1/nodes/gpu-1");
  ASSERT_TRUE(node);
  ASSERT_EQ(node->status, 200);
  const auto replicas = nlohmann::json::parse(node->body)["replicas"];
  ASSERT_EQ(replicas.size(), 1u) << node->body;
  EXPECT_NE(replicas.dump().find(ns + "/" + name), std::string::npos) << node->body;
}

TEST(ServeCli, ABindingTheApiServerRefusesBooksNothing) {
  tessera::store::testing::TempDir dir;
  std::ofstream(dir.file("kube-token")) << "binder-token\n";
  BindingApi api;
  api.refuse = true;
  const std::string kubeApi = "http://127.0.0.1:" + std::to_string(api.port());
  tessera::api::testing::ServeProcess serve(
      TESSERA_BINARY,
      {"--listen", "127.0.0.1:0", "--store", ":memory:", "--kube-api-server", kubeApi,
       "--kube-token-file", dir.file("kube-token")},
      "", 2);
  ASSERT_GT(serve.port(), 0) << serve.banner();
  httplib::Client http("127.0.0.1", serve.port());
  nlohmann::json pod;
  {
    std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/src/k8s/testdata/pod_llama.json");
    pod = nlohmann::json::parse(in);
  }
  ASSERT_EQ(http.Post("/api/v1/nodes", kNode, "application/json")
                ->status,
            201);
  ASSERT_EQ(http.Post("/api/v1/models", R"({"name":"llama-7b","weights":"14Gi"})",
                      "application/json")
                ->status,
            200);
  ASSERT_EQ(http.Post("/scheduler/filter",
                      nlohmann::json{{"Pod", pod}, {"NodeNames", {"gpu-1"}}}.dump(),
                      "application/json")
                ->status,
            200);
  auto bound = http.Post("/scheduler/bind",
                         nlohmann::json{{"PodName", pod["metadata"]["name"]},
                                        {"PodNamespace", pod["metadata"]["namespace"]},
                                        {"PodUID", pod["metadata"]["uid"]},
                                        {"Node", "gpu-1"}}
                             .dump(),
                         "application/json");
  ASSERT_TRUE(bound);
  const auto answer = nlohmann::json::parse(bound->body);
  EXPECT_NE(answer["Error"].get<std::string>().find("409"), std::string::npos) << bound->body;
  auto node = http.Get("/api/v1/nodes/gpu-1");
  ASSERT_TRUE(node);
  EXPECT_TRUE(nlohmann::json::parse(node->body)["replicas"].empty()) << node->body;
}

TEST(ServeCli, ABadKubernetesApiSettingIsRefused) {
  for (const auto& [args, mention] : std::vector<std::pair<std::string, std::string>>{
           {"--kube-api-server ftp://x", "expected https://"},
           {"--kube-api-server https://10.0.0.1:6443", "--kube-ca-file"},
           {"--kube-api-server in-cluster", "KUBERNETES_SERVICE_HOST"},
       }) {
    const Outcome o = serve("--listen 127.0.0.1:0 --store :memory: " + args);
    EXPECT_EQ(o.exitCode, 2) << args << "\n" << o.err;
    EXPECT_NE(o.err.find(mention), std::string::npos) << args << "\n" << o.err;
  }
}

TEST(ServeCli, ImportStoreCopiesTheSqliteStateIntoAnEmptyApiServerOnce) {
  tessera::k8s::testing::FakeApiServer api;
  ASSERT_TRUE(api.start());
  ASSERT_TRUE(api.create("pods", {{"metadata", {{"name", "p"}, {"namespace", "ml"}}},
                                  {"spec", {{"nodeName", "n1"}}}}));
  tessera::store::testing::TempDir dir;
  const std::string db = dir.file("state.db");
  {
    auto store = tessera::store::Store::open(db);
    ASSERT_TRUE(store) << store.error().message;
    tessera::store::Batch batch;
    batch.upsert("node", "n1", R"({"name":"n1","gpus":[{"type":"A100-80GB"}]})");
    batch.upsert("replica", "ml/p", R"({"placement":{"node":"n1"},"loaded":true})");
    ASSERT_TRUE((*store)->commit(batch));
  }
  const std::string base = "--listen 127.0.0.1:0 --controller false --kube-api-server " +
                           api.url() +
                           " --state-backend kubernetes --state-namespace tessera-system";
  const Outcome first = serve(base + " --import-store " + db);
  EXPECT_EQ(first.exitCode, 0) << first.err;
  const auto pod = api.get("pods", "ml", "p");
  ASSERT_TRUE(pod);
  EXPECT_TRUE((*pod)["metadata"]["annotations"].contains("tessera.io/booking")) << pod->dump();
  EXPECT_EQ(api.list("configmaps").size(), 1u);  // the node
  // Again: the API server holds state now, so nothing is imported over it.
  const Outcome again = serve(base + " --import-store " + db);
  EXPECT_EQ(again.exitCode, 2);
  EXPECT_NE(again.err.find("already holds 2 Tessera documents"), std::string::npos) << again.err;
  const Outcome sqlite = serve("--listen 127.0.0.1:0 --store :memory: --import-store " + db);
  EXPECT_EQ(sqlite.exitCode, 2);
  EXPECT_NE(sqlite.err.find("needs --state-backend kubernetes"), std::string::npos) << sqlite.err;
}

}  // namespace
