// The stand-ins themselves, driven by a plain HTTP client: the exact status codes, bodies
// and state changes of the protocols they follow, so that the adapters' tests rest on
// servers that behave like Triton and vLLM.

#include <httplib.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engines/testing/fake_triton.h"
#include "engines/testing/fake_vllm.h"
#include "engines/testing/scratch_dir.h"

namespace tessera::engines::testing {
namespace {

using nlohmann::json;

class Raw {
 public:
  explicit Raw(int port) : client_("127.0.0.1", port) {
    client_.set_connection_timeout(5);
    client_.set_read_timeout(10);
  }
  httplib::Result get(const std::string& path) { return client_.Get(path); }
  httplib::Result post(const std::string& path, const std::string& body = "",
                       const char* type = "application/json") {
    return body.empty() && type == nullptr ? client_.Post(path) : client_.Post(path, body, type);
  }

 private:
  httplib::Client client_;
};

TEST(FakeTriton, FollowsTheModelRepositoryExtension) {
  ScratchDir repo;
  repo.write("m/config.pbtxt", "backend: \"onnxruntime\"\nversion_policy: { all { } }\n");
  repo.mkdir("m/1");
  repo.mkdir("m/3");
  FakeTriton triton({.repository = repo.path()});
  auto port = triton.start();
  ASSERT_TRUE(port);
  Raw raw(*port);

  // Index without a body, and with {"ready": true}.
  auto index = raw.post("/v2/repository/index", "", nullptr);
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_EQ(json::parse(index->body), json::parse(R"([{"name": "m"}])"));
  auto bad = raw.post("/v2/repository/index", "[1,");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_TRUE(json::parse(bad->body)["error"].is_string());

  // Readiness is in the status.
  auto notReady = raw.get("/v2/models/m/ready");
  ASSERT_TRUE(notReady);
  EXPECT_EQ(notReady->status, 400);
  EXPECT_EQ(json::parse(notReady->body), json::parse(R"({"error": "Model version not ready"})"));

  // Load: 200 with an empty body; the "all" policy brings up both versions.
  auto load = raw.post("/v2/repository/models/m/load", "", nullptr);
  ASSERT_TRUE(load);
  EXPECT_EQ(load->status, 200);
  EXPECT_EQ(load->body, "");
  EXPECT_EQ(triton.state("m", 1), "READY");
  EXPECT_EQ(triton.state("m", 3), "READY");
  auto ready = raw.post("/v2/repository/index", R"({"ready": true})");
  ASSERT_TRUE(ready);
  EXPECT_EQ(json::parse(ready->body),
            json::parse(R"([{"name": "m", "version": "1", "state": "READY"},
                            {"name": "m", "version": "3", "state": "READY"}])"));
  EXPECT_EQ(raw.get("/v2/models/m/versions/3/ready")->status, 200);
  EXPECT_EQ(raw.get("/v2/models/m/versions/2/ready")->status, 400);

  auto config = raw.get("/v2/models/m/config");
  ASSERT_TRUE(config);
  EXPECT_EQ(config->status, 200);
  EXPECT_EQ(json::parse(config->body)["version_policy"], json::parse(R"({"all": {}})"));
  auto unknownConfig = raw.get("/v2/models/zzz/config");
  EXPECT_EQ(unknownConfig->status, 400);
  EXPECT_EQ(json::parse(unknownConfig->body)["error"],
            "Request for unknown model: 'zzz' is not found");

  // Parameters are checked: config must be a string, unload_dependents a boolean.
  auto notString = raw.post("/v2/repository/models/m/load", R"({"parameters": {"config": {}}})");
  EXPECT_EQ(notString->status, 400);
  auto badUnload =
      raw.post("/v2/repository/models/m/unload", R"({"parameters": {"unload_dependents": 1}})");
  EXPECT_EQ(badUnload->status, 400);
  EXPECT_EQ(triton.state("m", 1), "READY");

  auto unload =
      raw.post("/v2/repository/models/m/unload", R"({"parameters": {"unload_dependents": true}})");
  EXPECT_EQ(unload->status, 200);
  auto after = raw.post("/v2/repository/index", "{}");
  EXPECT_EQ(
      json::parse(after->body),
      json::parse(R"([{"name": "m", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"},
                            {"name": "m", "version": "3", "state": "UNAVAILABLE", "reason": "unloaded"}])"));
  EXPECT_EQ(raw.get("/v2/health/ready")->status, 200);
  EXPECT_EQ(raw.get("/v2/health/live")->status, 200);
}

TEST(FakeVllm, FollowsVllmsRoutes) {
  ScratchDir dirs;
  const auto lora = dirs.write("a/adapter_config.json", "{}").parent_path().string();
  FakeVllm vllm({});
  auto port = vllm.start();
  ASSERT_TRUE(port);
  Raw raw(*port);

  EXPECT_EQ(raw.get("/health")->status, 200);
  auto models = raw.get("/v1/models");
  ASSERT_TRUE(models);
  const json list = json::parse(models->body);
  EXPECT_EQ(list["object"], "list");
  EXPECT_EQ(list["data"][0]["object"], "model");
  EXPECT_TRUE(list["data"][0]["parent"].is_null());

  // validate_json_request, pydantic, then vLLM's own checks.
  auto plain =
      raw.post("/v1/load_lora_adapter", R"({"lora_name": "a", "lora_path": "x"})", "text/plain");
  EXPECT_EQ(plain->status, 415);
  auto missing = raw.post("/v1/load_lora_adapter", R"({"lora_name": "a"})");
  EXPECT_EQ(missing->status, 422);
  EXPECT_EQ(json::parse(missing->body)["detail"][0]["loc"],
            json::parse(R"(["body", "lora_path"])"));
  auto empty = raw.post("/v1/load_lora_adapter", R"({"lora_name": "", "lora_path": ""})");
  EXPECT_EQ(empty->status, 400);
  EXPECT_EQ(json::parse(empty->body)["error"]["type"], "InvalidUserInput");

  const std::string body = json{{"lora_name", "a"}, {"lora_path", lora}}.dump();
  auto ok = raw.post("/v1/load_lora_adapter", body);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, "Success: LoRA adapter 'a' added successfully.");
  auto dup = raw.post("/v1/load_lora_adapter", body);
  EXPECT_EQ(dup->status, 400);
  EXPECT_EQ(json::parse(dup->body)["error"]["code"], 400);
  auto listed = json::parse(raw.get("/v1/models")->body);
  EXPECT_EQ(listed["data"][1]["id"], "a");
  EXPECT_EQ(listed["data"][1]["root"], lora);
  EXPECT_EQ(listed["data"][1]["parent"], listed["data"][0]["id"]);

  auto gone = raw.post("/v1/unload_lora_adapter", R"({"lora_name": "b"})");
  EXPECT_EQ(gone->status, 404);
  EXPECT_EQ(json::parse(gone->body)["error"]["type"], "NotFoundError");
  auto removed = raw.post("/v1/unload_lora_adapter", R"({"lora_name": "a"})");
  EXPECT_EQ(removed->status, 200);
  EXPECT_EQ(removed->body, "Success: LoRA adapter 'a' removed successfully.");

  // Sleep: level defaults to 1; anything but 1 or 2 fails inside the engine.
  EXPECT_EQ(raw.post("/sleep?level=3", "", nullptr)->status, 500);
  EXPECT_EQ(vllm.sleepLevel(), 0);
  auto slept = raw.post("/sleep", "", nullptr);
  EXPECT_EQ(slept->status, 200);
  EXPECT_EQ(slept->body, "");
  EXPECT_EQ(vllm.sleepLevel(), 1);
  EXPECT_EQ(json::parse(raw.get("/is_sleeping")->body), json::parse(R"({"is_sleeping": true})"));
  EXPECT_EQ(raw.post("/wake_up?tags=gpu", "", nullptr)->status, 500);
  EXPECT_EQ(raw.post("/wake_up?tags=kv_cache&tags=weights", "", nullptr)->status, 200);
  EXPECT_EQ(json::parse(raw.get("/is_sleeping")->body), json::parse(R"({"is_sleeping": false})"));

  // Unknown paths: FastAPI's 404.
  auto nowhere = raw.get("/v1/nowhere");
  EXPECT_EQ(nowhere->status, 404);
  EXPECT_EQ(json::parse(nowhere->body), json::parse(R"({"detail": "Not Found"})"));
}

TEST(FakeVllm, WithoutTheSettingsTheRoutesDoNotExist) {
  FakeVllm vllm({.devMode = false, .runtimeLora = false});
  auto port = vllm.start();
  ASSERT_TRUE(port);
  Raw raw(*port);
  for (const char* path :
       {"/sleep", "/wake_up", "/v1/load_lora_adapter", "/v1/unload_lora_adapter"}) {
    auto r = raw.post(path, "{}");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404) << path;
    EXPECT_EQ(json::parse(r->body), json::parse(R"({"detail": "Not Found"})")) << path;
  }
  EXPECT_EQ(raw.get("/is_sleeping")->status, 404);
}

TEST(FakeServer, FaultsApplyToTheNextRequestsOnly) {
  FakeVllm vllm({});
  auto port = vllm.start();
  ASSERT_TRUE(port);
  Raw raw(*port);
  vllm.failNext(1, 503, R"({"error": "x"})");
  EXPECT_EQ(raw.get("/health")->status, 503);
  EXPECT_EQ(raw.get("/health")->status, 200);
  vllm.garbleNext(1);
  auto garbled = raw.get("/v1/models");
  EXPECT_EQ(garbled->status, 200);
  EXPECT_TRUE(json::parse(garbled->body, nullptr, false).is_discarded());
  EXPECT_EQ(vllm.count("GET", "/health"), 2);
  EXPECT_EQ(vllm.count("GET", "/v1/models"), 1);
}

}  // namespace
}  // namespace tessera::engines::testing
