// `tessera serve` with a Kubernetes API runs the ModelDeployment controller: against the test
// API server (src/k8s/testing), a ModelDeployment becomes a Tessera deployment, pods and a
// status; --controller=false leaves it off.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "k8s/testing/fake_apiserver.h"

namespace {

using nlohmann::json;

bool eventually(const std::function<bool()>& pred) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

// `tessera serve <args>` in the background; its stdout is read up to the dashboard line (the
// start-up lines). Stopped with SIGTERM when destroyed.
class Serve {
 public:
  explicit Serve(const std::vector<std::string>& args) {
    int out[2];
    if (::pipe(out) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      std::vector<char*> argv{const_cast<char*>(TESSERA_BINARY), const_cast<char*>("serve")};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(TESSERA_BINARY, argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    out_ = out[0];
    for (;;) {
      std::string text;
      char c = 0;
      bool any = false;
      while (::read(out_, &c, 1) == 1 && c != '\n') {
        text += c;
        any = true;
      }
      if (!any && c != '\n') break;  // the process ended
      banner_ += text + "\n";
      const auto at = text.find("listening on http://127.0.0.1:");
      if (at != std::string::npos) port_ = std::atoi(text.c_str() + at + 30);
      if (text.find("dashboard at") != std::string::npos) break;
    }
  }
  ~Serve() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    if (out_ >= 0) ::close(out_);
  }
  int port() const { return port_; }
  const std::string& banner() const { return banner_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int port_ = 0;
  std::string banner_;
};

json modelDeployment() {
  return {{"metadata", {{"name", "chat"}, {"namespace", "ml"}}},
          {"spec",
           {{"model", {{"name", "llama-8b"}, {"weights", "16Gi"}}},
            {"version", "v1"},
            {"replicas", {{"min", 2}, {"max", 4}}},
            {"image", "vllm/vllm-openai:v0.6"}}}};
}

TEST(ServeController, AModelDeploymentBecomesADeploymentPodsAndAStatus) {
  tessera::k8s::testing::FakeApiServer api;
  ASSERT_TRUE(api.start());
  ASSERT_TRUE(api.create("modeldeployments", modelDeployment()));
  Serve serve({"--listen", "127.0.0.1:0", "--store", ":memory:", "--kube-api-server", api.url()});
  ASSERT_GT(serve.port(), 0) << serve.banner();
  EXPECT_NE(serve.banner().find("watching ModelDeployments"), std::string::npos)
      << serve.banner();

  auto pods = [&] {
    int n = 0;
    for (const json& p : api.list("pods")) {
      n += p["metadata"]["annotations"].value("tessera.io/deployment", "") == "ml.chat" ? 1 : 0;
    }
    return n;
  };
  ASSERT_TRUE(eventually([&] { return pods() == 2; }));
  httplib::Client http("127.0.0.1", serve.port());
  auto d = http.Get("/api/v1/deployments/ml.chat");
  ASSERT_TRUE(d);
  ASSERT_EQ(d->status, 200) << d->body;
  EXPECT_EQ(json::parse(d->body)["placedBy"], "kubernetes") << d->body;
  EXPECT_TRUE(json::parse(d->body)["replicas"].empty()) << d->body;  // pods, not placements
  ASSERT_TRUE(eventually([&] {
    const json status = api.get("modeldeployments", "ml", "chat")->value("status", json());
    return status.is_object() && status.value("replicas", 0) == 2 &&
           status.value("currentVersion", "") == "v1";
  }));
}

TEST(ServeController, IsOffWithControllerFalse) {
  tessera::k8s::testing::FakeApiServer api;
  ASSERT_TRUE(api.start());
  Serve serve({"--listen", "127.0.0.1:0", "--store", ":memory:", "--kube-api-server", api.url(),
               "--controller=false"});
  ASSERT_GT(serve.port(), 0) << serve.banner();
  EXPECT_EQ(serve.banner().find("watching ModelDeployments"), std::string::npos)
      << serve.banner();
  EXPECT_NE(serve.banner().find("posts bindings to " + api.url()), std::string::npos)
      << serve.banner();
}

}  // namespace
