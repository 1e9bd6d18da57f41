// Request bodies over HTTP: every kind's nested field errors name the field relative to the
// body, numbers, quantities and booleans read as in the YAML files (docs/configuration.md), and
// randomly mutated bodies get a 2xx or a 4xx naming a field, never a crash, and a 4xx changes
// nothing.

#include <httplib.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/control_plane.h"
#include "api/http_server.h"
#include "model/gpu_catalog.h"

namespace tessera::api {
namespace body_decode_test {
namespace {

using nlohmann::json;

constexpr const char* kToken = "t0ken";

class BodyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto plane = ControlPlane::create(catalog_, clock_);
    ASSERT_TRUE(plane) << plane.error().message;
    plane_ = std::move(*plane);
    ServerConfig config;
    config.port = 0;
    config.token = kToken;
    config.threads = 2;
    server_ = std::make_unique<HttpServer>(*plane_, config);
    auto port = server_->start();
    ASSERT_TRUE(port) << port.error().message;
    client_ = std::make_unique<httplib::Client>("127.0.0.1", *port);
    client_->set_read_timeout(10);
    ASSERT_EQ(
        post("/api/v1/nodes",
             json{{"name", "n1"}, {"cpu", 64}, {"gpus", {{"type", "A100-80GB"}, {"count", 2}}}}
                 .dump())
            .status,
        201);
    ASSERT_EQ(post("/api/v1/models", R"({"name": "small", "weights": "4Gi"})").status, 200);
  }
  void TearDown() override { server_->stop(); }

  struct Reply {
    int status = 0;
    json body;
    std::string message;
  };
  Reply post(const std::string& path, const std::string& body) {
    auto r = client_->Post(path, {{"Authorization", std::string("Bearer ") + kToken}}, body,
                           "application/json");
    Reply out;
    if (!r) {
      ADD_FAILURE() << "no answer to " << path << " " << body;
      return out;
    }
    out.status = r->status;
    out.body = json::parse(r->body, nullptr, false);
    if (out.body.is_object() && out.body.contains("error")) {
      out.message = out.body["error"].value("message", "");
    }
    return out;
  }
  // Everything a refused call must leave as it was.
  std::string state() {
    std::string out;
    for (const char* path :
         {"/api/v1/nodes", "/api/v1/models", "/api/v1/replicas", "/api/v1/deployments"}) {
      auto r = client_->Get(path);
      out += r ? r->body : std::string("no answer");
    }
    return out;
  }

  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{0};
  std::unique_ptr<ControlPlane> plane_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

struct Case {
  const char* path;
  const char* body;
  const char* message;  // exact, or a prefix when it ends in "..."
};

void expectMessage(const std::string& got, std::string_view want) {
  if (want.ends_with("...")) {
    want.remove_suffix(3);
    EXPECT_TRUE(std::string_view(got).starts_with(want)) << got << "\n  wanted " << want << "...";
  } else {
    EXPECT_EQ(got, want);
  }
}

TEST_F(BodyTest, NestedFieldErrorsNameTheExactPathInEveryKindOfBody) {
  const std::vector<Case> cases = {
      // Nodes.
      {"/api/v1/nodes", R"({"name": "n2", "gpus": [{"type": "L4"}, {"type": "K9000"}]})",
       R"(gpus[1].type: unknown GPU type "K9000"...)"},
      {"/api/v1/nodes", R"({"name": "n2", "gpus": [{"type": "L4", "memoryMib": -5}]})",
       "gpus[0].memoryMib: must be > 0, got -5"},
      {"/api/v1/nodes",
       R"({"name": "n2", "gpus": [{"id": "a", "type": "L4"}, {"id": "a", "type": "L4"}]})",
       R"(gpus[1].id: duplicate GPU id "a" (first at gpus[0].id))"},
      {"/api/v1/nodes", R"({"name": "n2", "gpus": {"type": "L4", "count": 0}})",
       "gpus.count: must be > 0, got 0"},
      {"/api/v1/nodes",
       R"({"name": "n2", "gpus": [{"type": "A100-80GB", "migEnabled": true, "migInstances": [{"profile": "3g.40gb", "startSlot": 99}]}]})",
       "gpus[0].migInstances[0].startSlot: ..."},
      {"/api/v1/nodes", R"({"name": "n2", "taints": [{"key": "k", "effect": "Sometimes"}]})",
       R"(taints[0].effect: must be NoSchedule, PreferNoSchedule or NoExecute, got "Sometimes")"},
      {"/api/v1/nodes", R"({"name": "n2", "labels": {"zone": ["a"]}})",
       "labels.zone: must be text, got a list"},
      {"/api/v1/nodes", R"({"name": "n2", "gpu": []})",
       R"(gpu: unknown key (did you mean "gpus"?)...)"},
      {"/api/v1/nodes", R"([{"name": "n2"}])", "body: expected a node object"},
      // Heartbeats.
      {"/api/v1/nodes/n1/heartbeat",
       R"({"gpus": [{"id": "0", "usedMib": 1}, {"id": "1", "usedMib": 1, "replicaUsedMib": {"r": -1}}]})",
       "gpus[1].replicaUsedMib.r: ..."},
      {"/api/v1/nodes/n1/heartbeat", R"({"gpus": [{"id": "0", "utilization": "0.5"}]})",
       "gpus[0].utilization: expected a number from 0 to 1"},
      {"/api/v1/nodes/n1/heartbeat", R"({"cachedModels": ["small", 7]})",
       "cachedModels[1]: expected a model name"},
      {"/api/v1/nodes/n1/heartbeat",
       R"({"devicePool": {"blockBytes": 1, "blocks": 4, "freeBlocks": 9}})",
       "devicePool.freeBlocks: ..."},
      // Models.
      {"/api/v1/models", R"({"name": "m", "weightsMib": 1, "sharing": ["shared", "half"]})",
       R"(sharing[1]: unknown sharing mode "half"; allowed: exclusive, shared, mig)"},
      {"/api/v1/models", R"({"name": "m", "weights": "1Zi"})", "weights: ..."},
      {"/api/v1/models", R"({"name": "m"})", "body: needs GPU memory: ..."},
      {"/api/v1/models", R"("m")", "body: expected a model profile object"},
      // Replicas: the model may be a profile inline.
      {"/api/v1/replicas", R"({"replicaId": "r", "model": {"name": "m", "kvCache": 12}})",
       "model.kvCache: needs a unit..."},
      {"/api/v1/replicas",
       R"({"replicaId": "r", "model": "small", "tolerations": [{"operator": "Exists"}, {"operator": "Maybe"}]})",
       R"(tolerations[1].operator: must be Equal or Exists, got "Maybe")"},
      {"/api/v1/replicas", R"({"replicaId": "r", "model": "small", "nodeSelector": {"zone": {}}})",
       "nodeSelector.zone: must be text, got a mapping"},
      {"/api/v1/replicas", R"({"replicaId": "r", "model": "smol"})",
       R"(model: unknown model "smol"; known models: small)"},
      // Explain reads the same request.
      {"/api/v1/explain",
       R"({"replicaId": "r", "model": "small", "tolerations": [{"key": "k", "effect": "Later"}]})",
       "tolerations[0].effect: must be NoSchedule, PreferNoSchedule, NoExecute or left out..."},
      {"/api/v1/explain", R"({"replicaId": "r", "model": "small", "gpuTypes": ["L4", "H100-80G"]})",
       "gpuTypes[1]: unknown GPU type..."},
      // Deployments.
      {"/api/v1/deployments",
       R"({"name": "d", "model": "small", "autoscaling": {"syncPeriodSeconds": 0}})",
       "autoscaling.syncPeriodSeconds: expected a whole number from 1 to 3600"},
      {"/api/v1/deployments",
       R"({"name": "d", "model": "small", "autoscaling": {"args": {"queuePerReplica": "5"}}})",
       "autoscaling.args.queuePerReplica: expected a number"},
      {"/api/v1/deployments", R"({"name": "d", "model": "small", "autoscaling": {"window": 1}})",
       "autoscaling.window: unknown field..."},
  };
  const std::string before = state();
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.path) + " " + c.body);
    const Reply r = post(c.path, c.body);
    EXPECT_EQ(r.status, 400);
    expectMessage(r.message, c.message);
  }
  EXPECT_EQ(state(), before);
}

// The API reads numbers, sizes and booleans as the YAML files do: an integer field takes a
// JSON integer only (1.0 and 1e3 are floats, as `1.0` in a file is not an integer), a number
// field integers and floats, a size a quantity string or plain MiB under the *Mib key, a bool
// true or false and never the text "true".
TEST_F(BodyTest, NumbersSizesAndBooleansFollowTheFileRules) {
  const std::vector<Case> refused = {
      {"/api/v1/nodes", R"({"name": "n2", "cpuMilli": 1e3})",
       "cpuMilli: must be an integer, got 1000.0"},
      {"/api/v1/nodes", R"({"name": "n2", "cpuMilli": 1000.0})",
       "cpuMilli: must be an integer, got 1000.0"},
      {"/api/v1/nodes", R"({"name": "n2", "cpuMilli": "1000"})",
       R"(cpuMilli: must be an integer, got "1000" (quoted text; remove the quotes))"},
      {"/api/v1/nodes", R"({"name": "n2", "hostMemory": 12})", "hostMemory: needs a unit..."},
      {"/api/v1/nodes", R"({"name": "n2", "cordoned": "true"})",
       R"(cordoned: must be true or false, got "true" (quoted text; remove the quotes))"},
      {"/api/v1/models", R"({"name": "m", "weightsMib": 1, "gpusPerReplica": 1.0})",
       "gpusPerReplica: must be an integer, got 1.0"},
      {"/api/v1/models", R"({"name": "m", "weightsMib": 1, "numaAligned": 1})",
       "numaAligned: must be true or false, got 1"},
      {"/api/v1/nodes/n1/heartbeat", R"({"gpus": [{"id": "0", "usedMib": 1.0}]})",
       "gpus[0].usedMib: expected an integer"},
      {"/api/v1/nodes/n1/heartbeat", R"({"healthy": "true"})", "healthy: expected true or false"},
      {"/api/v1/deployments", R"({"name": "d", "model": "small", "minReplicas": 1.0})",
       "minReplicas: expected a whole number from 0 to 1000"},
  };
  const std::string before = state();
  for (const Case& c : refused) {
    SCOPED_TRACE(std::string(c.path) + " " + c.body);
    const Reply r = post(c.path, c.body);
    EXPECT_EQ(r.status, 400);
    expectMessage(r.message, c.message);
  }
  EXPECT_EQ(state(), before);

  // And what they take.
  const Reply node = post("/api/v1/nodes", R"({"name": "n2", "cpu": 1e3, "hostMemory": "12Gi",
      "cordoned": true, "labels": {"rack": 7}, "gpus": [{"id": 0, "type": "L4"}]})");
  ASSERT_EQ(node.status, 201) << node.message;
  EXPECT_EQ(node.body["cpuMilli"], 1000000);
  EXPECT_EQ(node.body["hostMemoryMib"], 12288);
  EXPECT_EQ(node.body["cordoned"], true);
  EXPECT_EQ(node.body["labels"]["rack"], "7");
  EXPECT_EQ(node.body["gpus"][0]["id"], "0");
  const Reply model = post("/api/v1/models", R"({"name": "m", "weights": "1.5Gi",
      "memoryBandwidthGBps": 2e2, "cpu": 0.5, "nvlinkRequired": true})");
  ASSERT_EQ(model.status, 200) << model.message;
  EXPECT_EQ(model.body["weightsMib"], 1536);
  EXPECT_EQ(model.body["memoryBandwidthGBps"], 200.0);
  EXPECT_EQ(model.body["cpuMilli"], 500);
  EXPECT_EQ(model.body["nvlinkRequired"], true);
}

// ---- randomised: mutated bodies
// ------------------------------------------------------------------

// Whether `message` starts by naming a field: "body: ..." or "<path>: ..." where the path is
// keys and [indices] and its first key is one of `keys`.
bool namesAField(const std::string& message, const json& sent, const json& valid) {
  if (message.starts_with("body: ")) return true;
  const std::size_t colon = message.find(": ");
  if (colon == std::string::npos || colon == 0) return false;
  const std::string path = message.substr(0, colon);
  for (const char c : path) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '[' && c != ']' &&
        c != '-' && c != '_' && c != '/') {
      return false;
    }
  }
  const std::string first = path.substr(0, path.find_first_of(".["));
  return (sent.is_object() && sent.contains(first)) || (valid.is_object() && valid.contains(first));
}

void pathsOf(const json& v, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  out.push_back(at);
  if (v.is_object()) {
    for (const auto& [k, item] : v.items()) pathsOf(item, at / k, out);
  } else if (v.is_array()) {
    for (std::size_t i = 0; i < v.size(); ++i) pathsOf(v[i], at / i, out);
  }
}

TEST_F(BodyTest, MutatedBodiesGetA2xxOrA4xxNamingAFieldAndA4xxChangesNothing) {
  std::uint64_t seed = std::random_device{}();
  if (const char* env = std::getenv("TESSERA_SEED"); env != nullptr && *env != '\0') {
    seed = std::strtoull(env, nullptr, 10);
  }
  std::printf("BodyTest mutations: TESSERA_SEED=%llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 random(seed);
  const auto pick = [&](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(random);
  };
  const std::vector<json> odd = {nullptr,
                                 true,
                                 false,
                                 0,
                                 -1,
                                 1,
                                 3,
                                 1e3,
                                 1.0,
                                 0.5,
                                 1e300,
                                 18446744073709551615ULL,
                                 -9223372036854775807LL - 1,
                                 "",
                                 "0",
                                 "12",
                                 "12Gi",
                                 "true",
                                 "small",
                                 "L4",
                                 "A100-80GB",
                                 "shared",
                                 "Exists",
                                 "NoSchedule",
                                 "hpa",
                                 "x y",
                                 std::string(300, 'a'),
                                 json::array(),
                                 json::array({"small"}),
                                 json::array({1}),
                                 json::object(),
                                 json{{"type", "L4"}, {"count", 1}}};

  struct Kind {
    std::string path;
    json body;
  };
  const std::vector<Kind> kinds = {
      {"/api/v1/nodes",
       {{"name", "fz"},
        {"cpu", 8},
        {"hostMemory", "64Gi"},
        {"labels", {{"zone", "a"}}},
        {"taints", json::array({{{"key", "k"}, {"value", "v"}, {"effect", "NoSchedule"}}})},
        {"gpus", json::array({{{"id", "0"}, {"type", "A100-80GB"}, {"numaNode", 0}},
                              {{"id", "1"}, {"type", "L4"}, {"uuid", "GPU-fz"}}})}}},
      {"/api/v1/nodes", {{"name", "fz"}, {"gpus", {{"type", "H100-80GB"}, {"count", 2}}}}},
      {"/api/v1/nodes/n1/heartbeat",
       {{"gpus", json::array({{{"id", "0"},
                               {"usedMib", 100},
                               {"utilization", 0.5},
                               {"healthy", true},
                               {"replicaUsedMib", json::object()}}})},
        {"cachedModels", {"small"}},
        {"healthy", true}}},
      {"/api/v1/models",
       {{"name", "fz"},
        {"weights", "2Gi"},
        {"kvCacheMib", 512},
        {"computeMilli", 100},
        {"sharing", {"shared", "exclusive"}},
        {"priority", 1},
        {"cpu", 0.5}}},
      {"/api/v1/replicas",
       {{"replicaId", "fz"},
        {"model", "small"},
        {"gpuTypes", {"A100-80GB"}},
        {"tolerations", json::array({{{"key", "k"}, {"operator", "Exists"}}})}}},
      {"/api/v1/replicas",
       {{"name", "fz"}, {"count", 2}, {"model", {{"name", "in"}, {"weightsMib", 64}}}}},
      {"/api/v1/explain",
       {{"replicaId", "fz"}, {"model", "small"}, {"nodeSelector", {{"z", "a"}}}}},
      {"/api/v1/deployments",
       {{"name", "fz"},
        {"model", "small"},
        {"minReplicas", 0},
        {"maxReplicas", 2},
        {"autoscaling",
         {{"recommender", "hpa"}, {"args", {{"queuePerReplica", 5}}}, {"syncPeriodSeconds", 15}}}}},
  };

  std::string before = state();
  int accepted = 0, refused = 0;
  for (int round = 0; round < 400; ++round) {
    const Kind& kind = kinds[pick(kinds.size())];
    json body = kind.body;
    // A fresh name, so that an accepted body does not make the next one a duplicate.
    for (const char* key : {"name", "replicaId"}) {
      if (body.contains(key))
        body[key] = body[key].get<std::string>() + "-" + std::to_string(round);
    }
    std::vector<json::json_pointer> paths;
    pathsOf(body, json::json_pointer(), paths);
    for (int n = 1 + static_cast<int>(pick(2)); n > 0; --n) {
      const json::json_pointer at = paths[pick(paths.size())];
      if (!body.contains(at)) continue;  // under a value an earlier mutation replaced
      switch (pick(4)) {
        case 0:
        case 1:
          body[at] = odd[pick(odd.size())];
          break;
        case 2:
          if (!at.empty() && body[at.parent_pointer()].is_object()) {
            body[at.parent_pointer()].erase(at.back());
          }
          break;
        default:
          if (body[at].is_object()) body[at]["colour"] = "blue";
          if (body[at].is_array()) body[at].push_back(odd[pick(odd.size())]);
          break;
      }
    }
    const std::string text = body.dump();
    SCOPED_TRACE("round " + std::to_string(round) + ": POST " + kind.path + " " + text);
    const Reply r = post(kind.path, text);
    ASSERT_NE(r.status, 0);
    if (r.status >= 200 && r.status < 300) {
      ++accepted;
      before = state();
      continue;
    }
    ++refused;
    // 400 names a field; 409 is a duplicate or no room (a valid body).
    ASSERT_TRUE(r.status == 400 || r.status == 409) << r.status << " " << r.message;
    if (r.status == 400) {
      EXPECT_TRUE(namesAField(r.message, body, kind.body)) << r.message;
      EXPECT_EQ(r.body["error"]["code"], "invalid_argument");
    }
    ASSERT_EQ(state(), before) << "a " << r.status << " changed the state: " << r.message;
  }
  std::printf("BodyTest mutations: %d accepted, %d refused\n", accepted, refused);
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace body_decode_test
}  // namespace tessera::api
