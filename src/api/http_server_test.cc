// Integration tests: the real server on a loopback port, driven over HTTP with a real client.

#include "api/http_server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/testing/raw_http.h"
#include "model/gpu_catalog.h"
#include "store/store.h"
#include "store/testing/forwarding_store.h"
#include "store/testing/temp_dir.h"

namespace tessera::api {
namespace {

using nlohmann::json;

constexpr const char* kToken = "s3cret-token";

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto plane = ControlPlane::create(catalog_, clock_);
    ASSERT_TRUE(plane) << plane.error().message;
    plane_ = std::move(*plane);
    ServerConfig config;
    config.port = 0;
    config.token = kToken;
    config.maxBodyBytes = 64 * 1024;
    config.threads = 2;
    server_ = std::make_unique<HttpServer>(*plane_, config);
    auto port = server_->start();
    ASSERT_TRUE(port) << port.error().message;
    port_ = *port;
    client_ = std::make_unique<httplib::Client>("127.0.0.1", *port);
    client_->set_connection_timeout(5);
    client_->set_read_timeout(10);
  }
  void TearDown() override { server_->stop(); }
  int port_ = 0;

  struct Reply {
    int status = 0;
    json body;
    std::string text;
  };
  static Reply reply(const httplib::Result& r) {
    Reply out;
    if (!r) {
      ADD_FAILURE() << "no HTTP answer: " << httplib::to_string(r.error());
      return out;
    }
    out.status = r->status;
    out.text = r->body;
    out.body = json::parse(r->body, nullptr, false);
    return out;
  }
  httplib::Headers auth() const { return {{"Authorization", std::string("Bearer ") + kToken}}; }
  Reply post(const std::string& path, const json& body) {
    return reply(client_->Post(path, auth(), body.dump(), "application/json"));
  }
  Reply get(const std::string& path) { return reply(client_->Get(path)); }
  Reply del(const std::string& path) { return reply(client_->Delete(path, auth())); }

  static json node(const std::string& name, int gpus, const std::string& type = "A100-80GB") {
    json list = json::array();
    for (int i = 0; i < gpus; ++i) list.push_back({{"type", type}});
    return {{"name", name}, {"cpu", 64}, {"hostMemory", "512Gi"}, {"gpus", list}};
  }

  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{0};
  std::unique_ptr<ControlPlane> plane_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

// One port, one server: a second server on the port this one listens on is refused at start
// (httplib's default SO_REUSEPORT would let both listen and split the connections).
TEST_F(ServerTest, ASecondServerOnTheSamePortIsRefused) {
  auto plane = ControlPlane::create(catalog_, clock_);
  ASSERT_TRUE(plane) << plane.error().message;
  ServerConfig config;
  config.host = "127.0.0.1";
  config.port = port_;
  HttpServer second(**plane, config);
  auto started = second.start();
  ASSERT_FALSE(started) << "a second server listens on " << port_;
  EXPECT_NE(started.error().message.find("127.0.0.1:" + std::to_string(port_)), std::string::npos)
      << started.error().message;
  // Every request still reaches the first server.
  for (int i = 0; i < 12; ++i) EXPECT_EQ(get("/healthz").status, 200);
}

TEST_F(ServerTest, ProbesAndMetricsAnswer) {
  auto health = client_->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto ready = client_->Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  server_->setReady(false);
  EXPECT_EQ(client_->Get("/readyz")->status, 503);
  ASSERT_EQ(post("/api/v1/nodes", node("n1", 2)).status, 201);
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->get_header_value("Content-Type").find("text/plain"), std::string::npos);
  const std::string& m = metrics->body;
  EXPECT_NE(m.find("# TYPE tessera_gpu_memory_capacity_bytes gauge"), std::string::npos);
  EXPECT_NE(m.find("tessera_gpu_memory_capacity_bytes{node=\"n1\",gpu=\"0\",type=\"A100-80GB\"} "
                   "85899345920"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("tessera_fleet_gpus 2"), std::string::npos);
  // httplib counts a request after its answer went out, so the counter may trail the
  // answer by a moment: poll for it (bounded).
  const std::string counted =
      "tessera_http_requests_total{method=\"POST\",route=\"/api/v1/nodes\",code=\"201\"} 1";
  std::string latest = m;
  for (int i = 0; i < 100 && latest.find(counted) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    latest = client_->Get("/metrics")->body;
  }
  EXPECT_NE(latest.find(counted), std::string::npos) << latest;
}

TEST_F(ServerTest, RegistersNodesPlacesReplicasAndExplains) {
  ASSERT_EQ(post("/api/v1/nodes", node("n1", 2)).status, 201);
  ASSERT_EQ(post("/api/v1/nodes", node("n2", 1, "T4")).status, 201);
  EXPECT_EQ(post("/api/v1/nodes", node("n1", 1)).status, 409);  // already registered
  Reply model =
      post("/api/v1/models", {{"name", "llama-70b"}, {"weights", "120Gi"}, {"gpusPerReplica", 2}});
  ASSERT_EQ(model.status, 200) << model.text;
  EXPECT_EQ(model.body["memoryPerGpuMib"], 60 * 1024);  // 72 GiB with the safety factor

  Reply placed = post("/api/v1/replicas", {{"replicaId", "chat-0"}, {"model", "llama-70b"}});
  ASSERT_EQ(placed.status, 201) << placed.text;
  const json& r = placed.body["replicas"][0];
  EXPECT_EQ(r["node"], "n1");  // the T4 node is far too small
  EXPECT_EQ(r["gpus"].size(), 2u);
  EXPECT_EQ(r["phase"], "reserved");

  // A second one does not fit: 409 with the reason and every rejection.
  Reply full = post("/api/v1/replicas", {{"replicaId", "chat-1"}, {"model", "llama-70b"}});
  EXPECT_EQ(full.status, 409) << full.text;
  EXPECT_EQ(full.body["error"]["code"], "does_not_fit");
  EXPECT_FALSE(full.body["error"]["detail"]["rejections"].empty());

  Reply explain = post("/api/v1/explain", {{"replicaId", "probe"}, {"model", "llama-70b"}});
  ASSERT_EQ(explain.status, 200);
  EXPECT_FALSE(explain.body["fits"]);
  EXPECT_FALSE(explain.body["summary"].get<std::string>().empty());
  // The same advice as the CLI's (issue 14, usability): chat-0 has the same priority, so no
  // eviction; a node with two GPUs that hold 72 GiB each would take it.
  const json& advice = explain.body["eviction"];
  ASSERT_TRUE(advice.is_object()) << explain.text;
  EXPECT_FALSE(advice["feasible"].get<bool>());
  EXPECT_EQ(advice["addGpus"], 2) << advice.dump();
  EXPECT_TRUE(advice["addGpuType"].is_string()) << advice.dump();

  EXPECT_EQ(post("/api/v1/replicas/chat-0/loaded", json::object()).status, 200);
  EXPECT_EQ(get("/api/v1/replicas/chat-0").body["phase"], "loaded");
  EXPECT_EQ(get("/api/v1/nodes/n1").body["replicas"], json({"chat-0"}));
  EXPECT_EQ(get("/api/v1/replicas").body["replicas"].size(), 1u);
  EXPECT_EQ(del("/api/v1/replicas/chat-0").status, 200);
  EXPECT_EQ(get("/api/v1/replicas/chat-0").status, 404);
  EXPECT_EQ(post("/api/v1/replicas", {{"replicaId", "chat-1"}, {"model", "llama-70b"}}).status,
            201);

  // A model in use is not forgotten; once nothing uses it, it is (issue 14, usability).
  const Reply inUse = del("/api/v1/models/llama-70b");
  EXPECT_EQ(inUse.status, 409) << inUse.text;
  EXPECT_NE(inUse.text.find("replica chat-1"), std::string::npos) << inUse.text;
  EXPECT_EQ(get("/api/v1/models/llama-70b").status, 200);
  EXPECT_EQ(del("/api/v1/models/nope").status, 404);

  Reply events = get("/api/v1/events?after=0");
  ASSERT_EQ(events.status, 200);
  std::vector<std::string> types;
  for (const json& e : events.body["events"]) types.push_back(e["type"]);
  EXPECT_EQ(types, (std::vector<std::string>{"NodeRegistered", "NodeRegistered", "ModelRegistered",
                                             "ReplicaPlaced", "ReplicaUnplaceable", "ReplicaLoaded",
                                             "ReplicaRemoved", "ReplicaPlaced"}));
}

using tessera::testing::rawRequest;

// `curl -X POST .../cordon` sends neither Content-Length nor a body: an empty body (RFC 9112
// §6.3), served as such, not read until the connection's timeout and refused.
TEST_F(ServerTest, APostWithoutContentLengthHasAnEmptyBody) {
  ASSERT_EQ(post("/api/v1/nodes", node("n1", 1)).status, 201);
  const std::string auth = std::string("Authorization: Bearer ") + kToken + "\r\n";
  EXPECT_EQ(rawRequest(port_, "POST /api/v1/nodes/n1/cordon HTTP/1.1\r\nHost: t\r\n" + auth +
                                  "Connection: keep-alive\r\n\r\n"),
            200);
  EXPECT_EQ(get("/api/v1/nodes/n1").body["cordoned"], true);
  EXPECT_EQ(rawRequest(port_, "POST /api/v1/nodes/n1/uncordon HTTP/1.1\r\nHost: t\r\n" + auth +
                                  "\r\n"),
            200);
  EXPECT_EQ(get("/api/v1/nodes/n1").body["cordoned"], false);
  // A call that needs a body still says which.
  EXPECT_EQ(rawRequest(port_, "POST /api/v1/nodes HTTP/1.1\r\nHost: t\r\n" + auth + "\r\n"), 400);
}

// The HTTP edges docs/api.md promises: a Content-Length that is no length is a 400 at once
// (httplib read "-5" as 2^64 - 5 and answered 413 after its 5-s read timeout), a body needs
// its JSON media type, the bearer scheme is case-insensitive (RFC 7235 §2.1), and a method a
// route does not take is a 405 with Allow.
TEST_F(ServerTest, HttpEdgesAnswerAsTheContractSays) {
  const std::string authLine = std::string("Authorization: Bearer ") + kToken + "\r\n";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(rawRequest(port_, "POST /api/v1/nodes HTTP/1.1\r\nHost: t\r\n" + authLine +
                                  "Content-Type: application/json\r\nContent-Length: -5\r\n\r\n"),
            400);
  EXPECT_EQ(rawRequest(port_, "POST /api/v1/nodes HTTP/1.1\r\nHost: t\r\n" + authLine +
                                  "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}"),
            400);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));

  const std::string body = node("n1", 1).dump();
  const std::string len = "Content-Length: " + std::to_string(body.size()) + "\r\n";
  EXPECT_EQ(rawRequest(port_, "POST /api/v1/nodes HTTP/1.1\r\nHost: t\r\n" + authLine + len +
                                  "\r\n" + body),
            415);
  EXPECT_EQ(get("/api/v1/nodes").body["nodes"].size(), 0u);
  EXPECT_EQ(rawRequest(port_, "POST /api/v1/nodes HTTP/1.1\r\nHost: t\r\n" + authLine + len +
                                  "Content-Type: Application/JSON; charset=utf-8\r\n\r\n" + body),
            201);

  auto lower =
      client_->Post("/api/v1/nodes/n1/cordon",
                    {{"Authorization", std::string("bearer  ") + kToken}}, "", "application/json");
  ASSERT_TRUE(lower);
  EXPECT_EQ(lower->status, 200) << lower->body;
  auto other =
      client_->Post("/api/v1/nodes/n1/uncordon",
                    {{"Authorization", std::string("Basic ") + kToken}}, "", "application/json");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 401);

  for (const char* method : {"PUT", "PATCH"}) {
    httplib::Request req;
    req.method = method;
    req.path = "/api/v1/nodes/n1";
    req.headers = auth();
    req.body = "{}";
    req.set_header("Content-Type", "application/json");
    auto r = client_->send(req);
    ASSERT_TRUE(r) << method;
    EXPECT_EQ(r->status, 405) << method << " " << r->body;
    EXPECT_EQ(r->get_header_value("Allow"), "GET, HEAD, DELETE") << method;
    EXPECT_EQ(json::parse(r->body)["error"]["code"], "method_not_allowed");
  }
  // The dashboard's routes too (they were 404 to other methods).
  for (const char* path : {"/", "/ui/settings.json", "/ui/app.js"}) {
    httplib::Request req;
    req.method = "PUT";
    req.path = path;
    auto r = client_->send(req);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 405) << path << " " << r->body;
    EXPECT_EQ(r->get_header_value("Allow"), "GET, HEAD") << path;
  }
  EXPECT_EQ(get("/api/v1/no-such-thing").status, 404);
}

// Names follow Kubernetes' rules (common/names.h) everywhere: a 400 naming the field and the
// rule, never a 500, and nothing stored.
TEST_F(ServerTest, NamesNobodyCouldAddressAreRefused) {
  const std::string nul("a\0b", 3);
  for (const std::string& bad : {std::string("a/b"), std::string("../x"), std::string("sp ace"),
                                 std::string("\xc3\xa9"), std::string(300, 'a'), nul,
                                 std::string("Node-A")}) {
    const Reply n = post("/api/v1/nodes", node(bad, 1));
    EXPECT_EQ(n.status, 400) << n.text;
    EXPECT_EQ(n.body["error"]["code"], "invalid_argument") << n.text;
    EXPECT_NE(n.text.find("name"), std::string::npos) << n.text;
    EXPECT_NE(n.text.find("DNS-1123 subdomain"), std::string::npos) << n.text;
    const Reply m = post("/api/v1/models", {{"name", bad}, {"weights", "16Gi"}});
    EXPECT_EQ(m.status, 400) << m.text;
    EXPECT_NE(m.text.find("DNS-1123 subdomain"), std::string::npos) << m.text;
  }
  EXPECT_TRUE(get("/api/v1/nodes").body["nodes"].empty());
  ASSERT_EQ(post("/api/v1/nodes", node("n1", 1)).status, 201);
  ASSERT_EQ(post("/api/v1/models", {{"name", "llama-8b"}, {"weights", "16Gi"}}).status, 200);
  // Replica ids: a name, or NAMESPACE/NAME as the extender books pods.
  const Reply r = post("/api/v1/replicas", {{"replicaId", "x/y/z"}, {"model", "llama-8b"}});
  EXPECT_EQ(r.status, 400) << r.text;
  EXPECT_NE(r.text.find("replicaId"), std::string::npos) << r.text;
  EXPECT_EQ(post("/api/v1/replicas", {{"replicaId", "default/chat-0"}, {"model", "llama-8b"}})
                .status,
            201);
  const Reply d = post("/api/v1/deployments", {{"name", "Chat"}, {"model", "llama-8b"}});
  EXPECT_EQ(d.status, 400) << d.text;
  EXPECT_NE(d.text.find("DNS-1123 subdomain"), std::string::npos) << d.text;
}

TEST_F(ServerTest, HeartbeatsFeedTelemetryAndCordonStopsPlacement) {
  ASSERT_EQ(post("/api/v1/nodes", node("n1", 1)).status, 201);
  Reply hb = post("/api/v1/nodes/n1/heartbeat",
                  {{"gpus", {{{"id", "0"}, {"usedMib", 30000}, {"utilization", 0.25}}}},
                   {"cachedModels", {"llama-7b"}}});
  ASSERT_EQ(hb.status, 200) << hb.text;
  const json gpu = get("/api/v1/nodes/n1").body["gpus"][0];
  EXPECT_EQ(gpu["usedMib"], 30000);
  EXPECT_DOUBLE_EQ(gpu["utilization"].get<double>(), 0.25);
  EXPECT_EQ(get("/api/v1/nodes/n1").body["cachedModels"], json({"llama-7b"}));

  ASSERT_EQ(post("/api/v1/nodes/n1/cordon", json::object()).status, 200);
  Reply refused = post("/api/v1/replicas",
                       {{"replicaId", "a"}, {"model", {{"name", "m"}, {"weightsMib", 1000}}}});
  EXPECT_EQ(refused.status, 409) << refused.text;
  ASSERT_EQ(post("/api/v1/nodes/n1/uncordon", json::object()).status, 200);
  EXPECT_EQ(post("/api/v1/replicas",
                 {{"replicaId", "a"}, {"model", {{"name", "m"}, {"weightsMib", 1000}}}})
                .status,
            201);
  // A node with replicas is removed only with force.
  EXPECT_EQ(del("/api/v1/nodes/n1").status, 409);
  EXPECT_EQ(del("/api/v1/nodes/n1?force=true").status, 200);
  EXPECT_EQ(get("/api/v1/nodes").body["nodes"].size(), 0u);
}

TEST_F(ServerTest, AModelReadsBackEverythingItWasPostedWith) {
  ASSERT_EQ(post("/api/v1/models", {{"name", "big"},
                                    {"weights", "120Gi"},
                                    {"gpusPerReplica", 2},
                                    {"nvlinkRequired", true},
                                    {"sharing", "exclusive"},
                                    {"memoryBandwidthGBps", 1500}})
                .status,
            200);
  const Reply m = get("/api/v1/models/big");
  ASSERT_EQ(m.status, 200) << m.text;
  EXPECT_EQ(m.body["nvlinkRequired"], true) << m.text;
  EXPECT_EQ(m.body["sharing"], json({"exclusive"})) << m.text;
  EXPECT_EQ(m.body["memoryBandwidthGBps"], 1500) << m.text;
  EXPECT_EQ(m.body["memoryPerGpuMib"], 61440) << m.text;
  EXPECT_EQ(get("/api/v1/models").body["models"][0], m.body);
}

TEST_F(ServerTest, MutatingCallsNeedTheBearerToken) {
  const std::string body = node("n1", 1).dump();
  auto none = client_->Post("/api/v1/nodes", body, "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(json::parse(none->body)["error"]["code"], "unauthenticated");
  auto wrong =
      client_->Post("/api/v1/nodes", {{"Authorization", "Bearer nope"}}, body, "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(get("/api/v1/nodes").body["nodes"].size(), 0u);  // nothing was registered
  // Reads are open.
  EXPECT_EQ(get("/api/v1/nodes").status, 200);
}

TEST_F(ServerTest, BadInputGetsA4xxNamingTheFieldAndChangesNothing) {
  ASSERT_EQ(post("/api/v1/nodes", node("n1", 1)).status, 201);
  struct Case {
    std::string path;
    std::string body;
    int status;
    std::string mention;
  };
  json badType = node("n2", 1);
  badType["gpus"][0]["type"] = "K9000";
  json badKey = node("n3", 1);
  badKey["colour"] = "blue";
  const std::vector<Case> cases = {
      {"/api/v1/nodes", "{not json", 400, "not valid JSON"},
      {"/api/v1/nodes", "[1,2]", 400, "body"},
      {"/api/v1/nodes", badType.dump(), 400, "K9000"},
      {"/api/v1/nodes", badKey.dump(), 400, "colour"},
      {"/api/v1/models", R"({"name": "m", "weightsMib": -5})", 400, "weightsMib"},
      {"/api/v1/replicas", R"({"replicaId": "x", "model": "nope"})", 400, "nope"},
      {"/api/v1/nodes/n1/heartbeat", R"({"gpus": [{"id": "7", "usedMib": 1}]})", 400, "gpus[0].id"},
      {"/api/v1/nodes/n1/heartbeat", R"({"gpus": [{"id": "0", "utilization": 3}]})", 400,
       "utilization"},
      // More memory in use than the card has (an A100-80GB: 81920 MiB).
      {"/api/v1/nodes/n1/heartbeat", R"({"gpus": [{"id": "0", "usedMib": 999999999}]})", 400,
       "gpus[0].usedMib"},
      {"/api/v1/nodes/n1/heartbeat", R"({"gpus": [{"id": "0", "usedMib": 81921}]})", 400, "81920"},
      {"/api/v1/nodes/n1/heartbeat",
       R"({"gpus": [{"id": "0", "usedMib": 100, "replicaUsedMib": {"a": 81921}}]})", 400,
       "gpus[0].replicaUsedMib.a"},
      {"/api/v1/nodes/ghost/heartbeat", R"({})", 404, "ghost"},
      {"/scheduler/filter", R"({"Pod": 5, "NodeNames": []})", 400, "Pod"},
  };
  const std::string before = get("/api/v1/nodes").text;
  for (const Case& c : cases) {
    Reply r = reply(client_->Post(c.path, auth(), c.body, "application/json"));
    EXPECT_EQ(r.status, c.status) << c.path << " " << c.body << " -> " << r.text;
    ASSERT_TRUE(r.body.contains("error")) << r.text;
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find(c.mention), std::string::npos)
        << r.text;
  }
  EXPECT_EQ(get("/api/v1/nodes").text, before);
  // The whole card in use is a report, not an error.
  EXPECT_EQ(
      post("/api/v1/nodes/n1/heartbeat", {{"gpus", {{{"id", "0"}, {"usedMib", 81920}}}}}).status,
      200);
  EXPECT_EQ(get("/api/v1/nodes/n1").body["gpus"][0]["freeMib"], 0);
  // Wrong media type and an oversized body.
  Reply xml = reply(client_->Post("/api/v1/nodes", auth(), "<node/>", "application/xml"));
  EXPECT_EQ(xml.status, 415);
  Reply huge = reply(
      client_->Post("/api/v1/nodes", auth(), std::string(100 * 1024, ' '), "application/json"));
  EXPECT_EQ(huge.status, 413);
  EXPECT_EQ(get("/api/v1/no-such-thing").status, 404);
}

TEST_F(ServerTest, ExtenderEndpointsSpeakTheKubeSchedulerWireFormat) {
  ASSERT_EQ(post("/api/v1/nodes", node("gpu-a", 2)).status, 201);
  ASSERT_EQ(post("/api/v1/nodes", node("gpu-t4", 1, "T4")).status, 201);
  const json pod = {
      {"metadata", {{"name", "p"}, {"namespace", "ns"}, {"uid", "u-1"}}},
      {"spec",
       {{"containers",
         {{{"name", "c"}, {"resources", {{"limits", {{"tessera.io/gpu-memory", "40960"}}}}}}}}}}};
  // kube-scheduler sends no bearer token: the extender answers without one.
  auto filter = client_->Post("/scheduler/filter",
                              json{{"Pod", pod}, {"NodeNames", {"gpu-a", "gpu-t4"}}}.dump(),
                              "application/json");
  ASSERT_TRUE(filter);
  ASSERT_EQ(filter->status, 200) << filter->body;
  const json f = json::parse(filter->body);
  EXPECT_EQ(f["NodeNames"], json({"gpu-a"}));
  EXPECT_TRUE(f["FailedAndUnresolvableNodes"].contains("gpu-t4"));
  auto prio = client_->Post("/scheduler/prioritize",
                            json{{"Pod", pod}, {"NodeNames", {"gpu-a", "gpu-t4"}}}.dump(),
                            "application/json");
  ASSERT_TRUE(prio);
  EXPECT_EQ(json::parse(prio->body),
            json::parse(R"([{"Host":"gpu-a","Score":10},{"Host":"gpu-t4","Score":0}])"));
  const std::string metrics = client_->Get("/metrics")->body;
  EXPECT_NE(metrics.find("tessera_extender_request_duration_seconds_count{verb=\"filter\"} 1"),
            std::string::npos);
}

TEST_F(ServerTest, DeeplyNestedBodiesAreRefusedAndTheServerStaysUp) {
  ASSERT_EQ(post("/api/v1/nodes", node("gpu-a", 1)).status, 201);
  // 30,000 levels fit the 64 KiB body limit; copying and dumping such a value recursed once
  // per level and could overflow the answering thread's stack (the echo of a passing v1.Node
  // copies it, the node loader dumps it), taking the whole server down.
  const std::string deep = std::string(30'000, '[') + std::string(30'000, ']');
  const std::string filterArgs = R"({"Pod":{"metadata":{"name":"p","uid":"u"},"spec":{}},)"
                                 R"("Nodes":{"items":[{"metadata":{"name":"gpu-a"},"x":)" +
                                 deep + "}]}}";
  auto filter = client_->Post("/scheduler/filter", filterArgs, "application/json");
  ASSERT_TRUE(filter);
  EXPECT_EQ(filter->status, 400);
  EXPECT_NE(filter->body.find("nested deeper than 128 levels"), std::string::npos) << filter->body;
  Reply nodeReply = reply(client_->Post(
      "/api/v1/nodes", auth(), R"({"name":"n2","labels":)" + deep + "}", "application/json"));
  EXPECT_EQ(nodeReply.status, 400);
  // Still serving, and nothing changed.
  EXPECT_EQ(client_->Get("/healthz")->status, 200);
  EXPECT_EQ(get("/api/v1/nodes").body["nodes"].size(), 1u);
  // Nesting up to the bound is served as before.
  const std::string ok = std::string(100, '[') + std::string(100, ']');
  auto fine = client_->Post(
      "/scheduler/filter",
      R"({"Pod":{"metadata":{"name":"p","uid":"u"},"spec":{}},"NodeNames":["gpu-a"],"x":)" + ok +
          "}",
      "application/json");
  ASSERT_TRUE(fine);
  EXPECT_EQ(fine->status, 200) << fine->body;
}

TEST_F(ServerTest, BindPostsItsBindingOutsideTheLockSoOtherCallsGoOn) {
  ASSERT_EQ(post("/api/v1/nodes", node("gpu-a", 2)).status, 201);
  // A Binding POST that takes until the test releases it (an API server slow to answer).
  std::mutex m;
  std::condition_variable cv;
  bool inBinding = false, release = false, timedOut = false;
  server_->withPlane([&](ControlPlane& p) {
    p.setBinder([&](const std::string&, const std::string&, const std::string&,
                    const std::string&) -> Result<void> {
      std::unique_lock l(m);
      inBinding = true;
      cv.notify_all();
      if (!cv.wait_for(l, std::chrono::seconds(20), [&] { return release; })) {
        timedOut = true;
        return fail(Error::internal("never released"));
      }
      return {};
    });
  });
  auto podJson = [](const std::string& name, const std::string& uid) {
    return json{
        {"metadata", {{"name", name}, {"namespace", "ns"}, {"uid", uid}}},
        {"spec",
         {{"containers",
           {{{"name", "c"}, {"resources", {{"limits", {{"tessera.io/gpu-memory", "20480"}}}}}}}}}}};
  };
  auto filter = client_->Post("/scheduler/filter",
                              json{{"Pod", podJson("p", "u-1")}, {"NodeNames", {"gpu-a"}}}.dump(),
                              "application/json");
  ASSERT_TRUE(filter && filter->status == 200);
  std::string bound;
  std::thread binding([&] {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30);
    auto r = c.Post(
        "/scheduler/bind",
        json{{"PodName", "p"}, {"PodNamespace", "ns"}, {"PodUID", "u-1"}, {"Node", "gpu-a"}}.dump(),
        "application/json");
    if (r && r->status == 200) bound = r->body;
  });
  {
    std::unique_lock l(m);
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(10), [&] { return inBinding; }));
  }
  // While the Binding is in flight the server answers other calls, and the pod's booking is
  // already in the books (assumed), so nothing else can take its memory.
  const Reply replicas = get("/api/v1/replicas");
  EXPECT_EQ(replicas.status, 200);
  ASSERT_EQ(replicas.body["replicas"].size(), 1u) << replicas.text;
  EXPECT_EQ(replicas.body["replicas"][0]["replica"], "ns/p");
  auto other = client_->Post("/scheduler/filter",
                             json{{"Pod", podJson("q", "u-2")}, {"NodeNames", {"gpu-a"}}}.dump(),
                             "application/json");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200);
  {
    std::lock_guard l(m);
    release = true;
  }
  cv.notify_all();
  binding.join();
  EXPECT_FALSE(timedOut) << "the server held its lock across the Binding";
  ASSERT_FALSE(bound.empty());
  EXPECT_EQ(json::parse(bound)["Error"], "") << bound;
}

// A real SQLite store whose first booking write ("replica" upsert) waits until the test lets
// it go: the window between the extender releasing its lock and the write landing.
class PausingStore final : public store::testing::ForwardingStore {
 public:
  explicit PausingStore(std::unique_ptr<store::Store> inner)
      : ForwardingStore(std::move(inner)) {}
  Result<void> commitAtomically(const store::WriteSet& batch) override {
    bool booking = false;
    for (const auto& w : batch.writes()) {
      booking = booking || (w.op == store::WriteSet::Write::Op::kPut && w.kind == "replica");
    }
    if (booking) {
      std::unique_lock l(m_);
      if (!paused_) {
        paused_ = true;
        cv_.notify_all();
        cv_.wait_for(l, std::chrono::seconds(20), [&] { return released_; });
      }
    }
    return ForwardingStore::commitAtomically(batch);
  }
  bool waitUntilPaused() {
    std::unique_lock l(m_);
    return cv_.wait_for(l, std::chrono::seconds(10), [&] { return paused_; });
  }
  void release() {
    std::lock_guard l(m_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool paused_ = false, released_ = false;
};

// A pod removed while its bind is outside the lock (here before its booking reached the
// store) is not bound, and its booking does not outlive it: neither in memory nor in the file
// a restart reads.
TEST(ServerBindRace, APodRemovedWhileItsBindIsInFlightLeavesNoBookingBehind) {
  store::testing::TempDir dir;
  const auto path = dir.file("state.db");
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  ManualClock clock{0};
  auto opened = store::Store::open(path);
  ASSERT_TRUE(opened) << opened.error().message;
  PausingStore store(std::move(*opened));
  auto plane = ControlPlane::create(catalog, clock, {}, &store);
  ASSERT_TRUE(plane) << plane.error().message;
  ServerConfig config;
  config.port = 0;
  config.token = kToken;
  config.threads = 2;
  HttpServer server(**plane, config);
  auto port = server.start();
  ASSERT_TRUE(port) << port.error().message;
  httplib::Client client("127.0.0.1", *port);
  client.set_read_timeout(30);
  const httplib::Headers auth = {{"Authorization", std::string("Bearer ") + kToken}};
  json gpus = json::array({{{"type", "A100-80GB"}}, {{"type", "A100-80GB"}}});
  auto node = client.Post(
      "/api/v1/nodes", auth,
      json{{"name", "gpu-a"}, {"cpu", 64}, {"hostMemory", "512Gi"}, {"gpus", gpus}}.dump(),
      "application/json");
  ASSERT_TRUE(node && node->status == 201);
  const json pod = {
      {"metadata", {{"name", "p"}, {"namespace", "ns"}, {"uid", "u-1"}}},
      {"spec",
       {{"containers",
         {{{"name", "c"}, {"resources", {{"limits", {{"tessera.io/gpu-memory", "20480"}}}}}}}}}}};
  auto filter = client.Post("/scheduler/filter",
                            json{{"Pod", pod}, {"NodeNames", {"gpu-a"}}}.dump(), "application/json");
  ASSERT_TRUE(filter && filter->status == 200) << (filter ? filter->body : "no answer");
  std::string answer;
  std::thread binding([&] {
    httplib::Client c("127.0.0.1", *port);
    c.set_read_timeout(30);
    auto r = c.Post(
        "/scheduler/bind",
        json{{"PodName", "p"}, {"PodNamespace", "ns"}, {"PodUID", "u-1"}, {"Node", "gpu-a"}}.dump(),
        "application/json");
    if (r && r->status == 200) answer = r->body;
  });
  ASSERT_TRUE(store.waitUntilPaused()) << "the bind never wrote its booking";
  auto removed = client.Delete("/api/v1/replicas/ns/p", auth);
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->status, 200) << removed->body;
  store.release();
  binding.join();
  ASSERT_FALSE(answer.empty());
  const std::string error = json::parse(answer)["Error"];
  EXPECT_NE(error.find("removed while it was being bound"), std::string::npos) << answer;
  auto replicas = client.Get("/api/v1/replicas");
  ASSERT_TRUE(replicas);
  EXPECT_TRUE(json::parse(replicas->body)["replicas"].empty()) << replicas->body;
  server.stop();
  // What a restart reads: no booking for the removed pod.
  auto reopened = store::Store::open(path);
  ASSERT_TRUE(reopened) << reopened.error().message;
  auto restarted = ControlPlane::create(catalog, clock, {}, reopened->get());
  ASSERT_TRUE(restarted) << restarted.error().message;
  EXPECT_TRUE((*restarted)->listReplicas()["replicas"].empty())
      << (*restarted)->listReplicas().dump();
}

}  // namespace
}  // namespace tessera::api
