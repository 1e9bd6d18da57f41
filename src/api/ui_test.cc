// The dashboard's routes (api/ui.h) on a real server over loopback, and the real
// `tessera serve --demo` binary: the page and its files with their media types, security and
// cache headers; nothing that reaches beyond this server; the demo placing and scaling.

#include "api/ui.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "api/http_server.h"
#include "api/testing/serve_process.h"
#include "api/ui_assets.h"
#include "model/gpu_catalog.h"

namespace tessera::api {
namespace {

using nlohmann::json;

class UiServer : public ::testing::Test {
 protected:
  void start(ServerConfig config) {
    auto plane = ControlPlane::create(catalog_, clock_);
    ASSERT_TRUE(plane.has_value());
    plane_ = std::move(*plane);
    config.host = "127.0.0.1";
    config.port = 0;
    server_ = std::make_unique<HttpServer>(*plane_, config);
    auto port = server_->start();
    ASSERT_TRUE(port.has_value());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", *port);
  }
  void TearDown() override {
    if (server_) server_->stop();
  }

  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{0};
  std::unique_ptr<ControlPlane> plane_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(UiServer, ServesThePageAndItsFilesWithTypesAndSecurityHeaders) {
  start({});
  auto page = client_->Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(page->get_header_value("Content-Security-Policy"), ui::kContentSecurityPolicy);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'self'"),
            std::string::npos);
  EXPECT_EQ(page->get_header_value("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(page->get_header_value("Cache-Control"), "no-cache");
  EXPECT_NE(page->body.find("<title>Tessera"), std::string::npos);

  // Every file the page links to loads, with its media type.
  const std::regex link(R"((?:src|href)="(/ui/[^"]+)\")");
  std::map<std::string, std::string> expected = {{"/ui/app.js", "text/javascript; charset=utf-8"},
                                                 {"/ui/style.css", "text/css; charset=utf-8"},
                                                 {"/ui/favicon.svg", "image/svg+xml"}};
  std::set<std::string> linked;
  for (auto it = std::sregex_iterator(page->body.begin(), page->body.end(), link);
       it != std::sregex_iterator(); ++it) {
    linked.insert((*it)[1]);
  }
  EXPECT_EQ(linked.size(), expected.size());
  for (const std::string& path : linked) {
    auto res = client_->Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 200) << path;
    EXPECT_EQ(res->get_header_value("Content-Type"), expected[path]) << path;
    EXPECT_EQ(res->get_header_value("Content-Security-Policy"), ui::kContentSecurityPolicy);
    EXPECT_FALSE(res->body.empty()) << path;
  }
}

TEST_F(UiServer, RevalidatesWithETagsAndAnswers404ForUnknownFiles) {
  start({});
  auto first = client_->Get("/ui/app.js");
  ASSERT_TRUE(first);
  const std::string etag = first->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  auto again = client_->Get("/ui/app.js", {{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  auto stale = client_->Get("/ui/app.js", {{"If-None-Match", "\"0000\""}});
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->status, 200);
  EXPECT_NE(client_->Get("/")->get_header_value("ETag"), etag);

  for (const char* path : {"/ui/nothing.js", "/ui/index.html", "/ui/", "/ui/..%2Fapp.js"}) {
    auto res = client_->Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 404) << path;
    EXPECT_EQ(json::parse(res->body)["error"]["code"], "not_found") << path;
  }
}

TEST_F(UiServer, ReadsNeedNoTokenAndTheSettingsSayDemo) {
  ServerConfig config;
  config.token = "a-token-of-sixteen-chars";
  config.demo = true;
  start(config);
  for (const char* path : {"/", "/ui/app.js", "/ui/settings.json", "/api/v1/nodes"}) {
    auto res = client_->Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 200) << path;
  }
  const json settings = json::parse(client_->Get("/ui/settings.json")->body);
  EXPECT_EQ(settings["demo"], true);
  EXPECT_EQ(settings["version"], TESSERA_VERSION);
  // The page only reads: a POST to it is a 405 that says so.
  auto post = client_->Post("/", "{}", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET, HEAD");
}

TEST(UiAssets, AreTheRepositoryFilesAndReachNothingButThisServer) {
  const auto files = ui::embeddedFiles();
  ASSERT_GE(files.size(), 4u);
  for (const ui::EmbeddedFile& f : files) {
    std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/web/" + std::string(f.name),
                     std::ios::binary);
    std::stringstream disk;
    disk << in.rdbuf();
    EXPECT_EQ(disk.str(), f.bytes) << f.name << " differs from web/" << f.name;
    // No URL to another origin (the SVG namespace is a name, not a fetch).
    const std::string text(f.bytes);
    const std::regex url(R"(https?://[^\s'"`)]+)");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), url);
         it != std::sregex_iterator(); ++it) {
      EXPECT_EQ(it->str(), "http://www.w3.org/2000/svg") << f.name;
    }
    EXPECT_NE(ui::contentTypeFor(f.name), "application/octet-stream") << f.name;
  }
  EXPECT_EQ(ui::findAsset("nothing.js"), std::nullopt);
}

// ---- the real binary --------------------------------------------------------------------------

int runServe(const std::string& args, std::string* err) {
  const std::string errFile = "/tmp/tessera_ui_test_err_" + std::to_string(::getpid());
  const int status = std::system(
      (std::string(TESSERA_BINARY) + " serve " + args + " >/dev/null 2>" + errFile).c_str());
  std::ifstream in(errFile);
  std::stringstream ss;
  ss << in.rdbuf();
  *err = ss.str();
  std::remove(errFile.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(DemoBinary, RefusesDemoFlagsThatDoNotGoTogether) {
  std::string err;
  EXPECT_EQ(runServe("--demo --cluster " + std::string(TESSERA_SOURCE_DIR) +
                         "/examples/cluster.yaml --listen 127.0.0.1:0",
                     &err),
            2);
  EXPECT_NE(err.find("--demo seeds its own fleet"), std::string::npos) << err;
  EXPECT_EQ(runServe("--demo-speed 3 --listen 127.0.0.1:0 --store :memory:", &err), 2);
  EXPECT_NE(err.find("--demo-speed needs --demo"), std::string::npos) << err;
  EXPECT_EQ(runServe("--demo --demo-speed 0 --listen 127.0.0.1:0", &err), 2);
  EXPECT_NE(err.find("--demo-speed"), std::string::npos) << err;
}

TEST(DemoBinary, ServesTheLabelledDashboardAndPlacesAndScales) {
  // The banner: listening, Kubernetes, dashboard, ..., and last the demo's line.
  tessera::api::testing::ServeProcess serve(
      TESSERA_BINARY, {"--demo", "--demo-speed", "10", "--listen", "127.0.0.1:0"}, "DEMO", 8);
  ASSERT_GT(serve.port(), 0) << serve.banner();
  EXPECT_NE(serve.banner().find("DEMO"), std::string::npos) << serve.banner();
  EXPECT_NE(
      serve.banner().find("dashboard at http://127.0.0.1:" + std::to_string(serve.port()) + "/"),
      std::string::npos)
      << serve.banner();
  EXPECT_NE(serve.banner().find("state in :memory:"), std::string::npos) << serve.banner();

  httplib::Client client("127.0.0.1", serve.port());
  auto page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(page->get_header_value("Content-Security-Policy"), ui::kContentSecurityPolicy);
  EXPECT_EQ(json::parse(client.Get("/ui/settings.json")->body)["demo"], true);
  EXPECT_EQ(json::parse(client.Get("/api/v1/nodes")->body)["nodes"].size(), 6u);

  // Poll the event history until the demo has placed, loaded and scaled up (at 10× speed the
  // first scale-up comes within seconds; the limit is only a guard against a hang).
  std::set<std::string> seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::int64_t after = 0;
  while (std::chrono::steady_clock::now() < deadline &&
         !(seen.contains("ReplicaPlaced") && seen.contains("ReplicaLoaded") &&
           seen.contains("ScaledUp"))) {
    auto res = client.Get("/api/v1/events?after=" + std::to_string(after));
    ASSERT_TRUE(res);
    const json events = json::parse(res->body)["events"];
    for (const json& e : events) {
      seen.insert(e["type"].get<std::string>());
      after = std::max(after, e["seq"].get<std::int64_t>());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(seen.contains("ReplicaPlaced"));
  EXPECT_TRUE(seen.contains("ReplicaLoaded"));
  EXPECT_TRUE(seen.contains("ScaledUp"));
  // The virtual GPUs report telemetry: used memory where replicas run.
  bool used = false;
  const json nodes = json::parse(client.Get("/api/v1/nodes")->body)["nodes"];
  for (const json& n : nodes) {
    for (const json& g : n["gpus"]) {
      if (!g["usedMib"].is_null() && g["usedMib"].get<std::int64_t>() > 0) used = true;
    }
  }
  EXPECT_TRUE(used);
}

}  // namespace
}  // namespace tessera::api
