// The agent driving inference engines, against the stand-in Triton and vLLM servers
// (src/engines/testing) over loopback: a model version switch through the admin API, a LoRA
// adapter replaced in place, engine health and models in /status, sleep refused while work
// is in flight, and the drain putting vLLM to sleep and unloading Triton's models, or
// leaving vLLM awake when work is still running.

#include "agent/engines_host.h"

#include <sstream>

#include <gtest/gtest.h>

#include "agent/agent.h"
#include "agent/testing/agent_testing.h"
#include "engines/testing/fake_triton.h"
#include "engines/testing/fake_vllm.h"
#include "engines/testing/scratch_dir.h"

namespace tessera::agent {
namespace {

using nlohmann::json;
using testing::ControlPlaneServer;

constexpr const char* kEnginesHostToken = "engines-host-token";

class EnginesHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_.write("resnet/config.pbtxt",
                "backend: \"onnxruntime\"\nversion_policy: { specific: { versions: [1] } }\n");
    repo_.mkdir("resnet/1");
    repo_.mkdir("resnet/2");
    repo_.write("resnet/3/FAIL", "CUDA out of memory while loading weights\n");
    adapters_.write("chat-v1/adapter_config.json", R"({"r": 8})");
    adapters_.write("chat-v2/adapter_config.json", R"({"r": 16})");
    triton_ = std::make_unique<engines::testing::FakeTriton>(
        engines::testing::FakeTritonOptions{.repository = repo_.path()});
    ASSERT_TRUE(triton_->start());
    vllm_ = std::make_unique<engines::testing::FakeVllm>(engines::testing::FakeVllmOptions{});
    ASSERT_TRUE(vllm_->start());
    // Triton serves version 1 of resnet, as after `--load-model resnet`.
    auto loader = engines::makeEngine({.kind = "triton", .url = triton_->url()});
    ASSERT_TRUE(loader);
    auto loaded = (*loader)->load({.model = "resnet"});
    ASSERT_TRUE(loaded) << loaded.error().message;
    ASSERT_EQ(triton_->state("resnet", 1), "READY");

    server_.start();
    config_.nodeName = "node-eng";
    config_.server = server_.url();
    config_.heartbeatMs = 50;
    config_.discovery = GpuDiscovery::kVirtual;
    config_.virtualGpus = {{"L4", 1, -1, -1, std::nullopt}};
    config_.admin = "127.0.0.1:0";
    config_.stopNewWorkMs = 0;
    config_.inFlightMaxMs = 20'000;
    config_.devicePlugin.enabled = false;
    timings_.backoffInitialMs = 20;
    timings_.backoffMaxMs = 200;
    timings_.drainPollMs = 10;
    timings_.lingerMs = 20;
  }
  void TearDown() override {
    agent_.reset();
    host_.reset();
    if (triton_) triton_->stop();
    if (vllm_) vllm_->stop();
  }

  void startAgent() {
    std::vector<AgentEngineConfig> engines = {
        {"triton", {.kind = "triton", .url = triton_->url()}, EngineDrain::kAuto},
        {"chat", {.kind = "vllm", .url = vllm_->url()}, EngineDrain::kAuto}};
    auto host = EnginesHost::create(engines, 50);
    ASSERT_TRUE(host) << host.error().message;
    host_ = std::move(*host);
    std::vector<std::string> warnings;
    auto gpus = openGpuSource(config_, catalog_, config_.nodeName, warnings);
    ASSERT_TRUE(gpus) << gpus.error().message;
    gpus_ = std::move(*gpus);
    auto client = ControlClient::create({config_.server, kEnginesHostToken, std::nullopt, 5});
    ASSERT_TRUE(client) << client.error().message;
    client_ = std::move(*client);
    AgentParts parts;
    parts.gpus = gpus_.get();
    parts.client = client_.get();
    parts.log = &log_;
    parts.components = {host_.get()};
    agent_ = std::make_unique<Agent>(config_, parts, timings_);
    host_->setInFlight([this] { return agent_->inFlight(); });
    host_->setAccepting([this] { return agent_->phase() == AgentPhase::kRunning; });
    auto port = agent_->start();
    ASSERT_TRUE(port) << port.error().message;
    admin_ = std::make_unique<httplib::Client>("127.0.0.1", *port);
    admin_->set_connection_timeout(5);
    admin_->set_read_timeout(30);
  }

  using Reply = testing::JsonReply;
  Reply post(const std::string& path, const json& body = json::object()) {
    return testing::postJson(*admin_, path, body);
  }
  json engineStatus(const std::string& name) {
    auto r = admin_->Get("/status");
    if (!r || r->status != 200) return nullptr;
    const json s = json::parse(r->body, nullptr, false);
    for (const json& e : s["engines"]) {
      if (e["name"] == name) return e;
    }
    return nullptr;
  }
  static const json* model(const json& engine, const std::string& name,
                           std::optional<std::int64_t> version = std::nullopt) {
    if (!engine.is_object() || !engine.contains("models")) return nullptr;
    for (const json& m : engine["models"]) {
      if (m["name"] != name) continue;
      if (version && (!m.contains("version") || m["version"] != *version)) continue;
      return &m;
    }
    return nullptr;
  }
  std::vector<std::string> drainSteps() {
    std::vector<std::string> out;
    const json status = agent_->status();
    for (const json& s : status["drain"]["steps"]) out.push_back(s.get<std::string>());
    return out;
  }
  static bool anyContains(const std::vector<std::string>& lines, const std::string& part) {
    for (const std::string& l : lines) {
      if (l.find(part) != std::string::npos) return true;
    }
    return false;
  }

  engines::testing::ScratchDir repo_, adapters_;
  std::unique_ptr<engines::testing::FakeTriton> triton_;
  std::unique_ptr<engines::testing::FakeVllm> vllm_;
  ControlPlaneServer server_{kEnginesHostToken};
  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  std::ostringstream logText_;
  api::Logger log_{api::LogFormat::kText, logText_};
  AgentConfig config_;
  AgentTimings timings_;
  std::unique_ptr<EnginesHost> host_;
  std::unique_ptr<GpuSource> gpus_;
  std::unique_ptr<ControlClient> client_;
  std::unique_ptr<Agent> agent_;
  std::unique_ptr<httplib::Client> admin_;
};

TEST_F(EnginesHostTest, StatusShowsEachEnginesHealthAndModels) {
  startAgent();
  ASSERT_TRUE(testing::eventually([&] {
    const json t = engineStatus("triton");
    const json* m = model(t, "resnet", 1);
    return m != nullptr && (*m)["state"] == "ready";
  }));
  const json t = engineStatus("triton");
  EXPECT_EQ(t["kind"], "triton");
  EXPECT_EQ(t["url"], triton_->url());
  EXPECT_EQ(t["healthy"], true);
  EXPECT_EQ(t["onDrain"], "auto");
  ASSERT_TRUE(testing::eventually([&] { return engineStatus("chat").contains("models"); }));
  const json v = engineStatus("chat");
  EXPECT_EQ(v["healthy"], true);
  EXPECT_EQ(v["sleeping"], false);
  EXPECT_NE(model(v, "meta-llama/Llama-3.1-8B-Instruct"), nullptr) << v.dump();

  // A server that goes away shows as unhealthy, with the adapter's error.
  triton_->stop();
  ASSERT_TRUE(testing::eventually([&] { return engineStatus("triton")["healthy"] == false; }));
  EXPECT_NE(engineStatus("triton")["error"].get<std::string>().find(triton_->url()),
            std::string::npos);
}

TEST_F(EnginesHostTest, TritonVersionSwitchThroughTheAdminApi) {
  startAgent();
  Reply r = post("/models/resnet/switch", {{"version", 2}});
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["engine"], "triton");  // found by the model, not named
  EXPECT_EQ(r.body["version"], 2);
  EXPECT_EQ(r.body["ready"], true);
  EXPECT_EQ(triton_->state("resnet", 2), "READY");
  EXPECT_EQ(triton_->state("resnet", 1), "UNAVAILABLE");
  // The load carried the served configuration with the new version policy.
  bool sawPolicy = false;
  for (const auto& req : triton_->requests()) {
    if (req.path == "/v2/repository/models/resnet/load") {
      sawPolicy = req.body.find("version_policy") != std::string::npos &&
                  req.body.find("[2]") != std::string::npos;
    }
  }
  EXPECT_TRUE(sawPolicy);
  const json t = engineStatus("triton");
  EXPECT_EQ(t["lastSwitch"]["version"], 2);

  // A version that fails to load: Triton's reason comes back, version 2 keeps serving.
  r = post("/models/resnet/switch", {{"version", 3}});
  EXPECT_EQ(r.status, 400) << r.body.dump();
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find("CUDA out of memory"),
            std::string::npos)
      << r.body.dump();
  EXPECT_EQ(triton_->state("resnet", 2), "READY");

  // Bad bodies and unknown models.
  EXPECT_EQ(post("/models/resnet/switch", {{"version", "two"}}).status, 400);
  EXPECT_EQ(post("/models/resnet/switch", {{"version", 2}, {"engine", "nope"}}).status, 404);
  r = post("/models/unknown-model/switch", {{"version", 1}});
  EXPECT_EQ(r.status, 404) << r.body.dump();
}

TEST_F(EnginesHostTest, VllmAdapterIsLoadedThenReplacedInPlace) {
  startAgent();
  const std::string v1 = (adapters_.path() / "chat-v1").string();
  const std::string v2 = (adapters_.path() / "chat-v2").string();
  Reply r =
      post("/models/support-bot/switch", {{"engine", "chat"}, {"path", v1}, {"version", "v1"}});
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["replaced"], false);
  EXPECT_EQ(vllm_->adapters(), std::vector<std::string>{"support-bot"});

  // Now the adapter is listed, so the engine is found by the model's name.
  r = post("/models/support-bot/switch", {{"path", v2}, {"version", "v2"}});
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["engine"], "chat");
  EXPECT_EQ(r.body["replaced"], true);
  EXPECT_EQ(vllm_->adapters(), std::vector<std::string>{"support-bot"});
  int inplace = 0;
  for (const auto& req : vllm_->requests()) {
    if (req.path == "/v1/load_lora_adapter" &&
        req.body.find("\"load_inplace\":true") != std::string::npos &&
        req.body.find("chat-v2") != std::string::npos) {
      ++inplace;
    }
  }
  EXPECT_EQ(inplace, 1);
  const json v = engineStatus("chat");
  const json* m = model(v, "support-bot");
  ASSERT_NE(m, nullptr) << v.dump();
  EXPECT_EQ((*m)["version"], "v2");
  EXPECT_EQ((*m)["parent"], "meta-llama/Llama-3.1-8B-Instruct");

  // The base model is fixed when vLLM starts; a path without an adapter is vLLM's 404.
  r = post("/models/meta-llama/Llama-3.1-8B-Instruct/switch", {{"engine", "chat"}, {"path", v1}});
  EXPECT_EQ(r.status, 400) << r.body.dump();
  r = post("/models/support-bot/switch", {{"path", (adapters_.path() / "nothing").string()}});
  EXPECT_EQ(r.status, 404) << r.body.dump();
  EXPECT_EQ(post("/models/support-bot/switch", json::object()).status, 400);
}

TEST_F(EnginesHostTest, SleepWaitsForWorkInFlightAndWakeBringsItBack) {
  startAgent();
  auto lease = agent_->acquireLease("");
  ASSERT_TRUE(lease);
  Reply r = post("/engines/chat/sleep", {{"level", 1}});
  EXPECT_EQ(r.status, 409) << r.body.dump();
  EXPECT_EQ(vllm_->sleepLevel(), 0);
  ASSERT_TRUE(agent_->releaseLease(*lease));
  r = post("/engines/chat/sleep", {{"level", 1}});
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(vllm_->sleepLevel(), 1);
  EXPECT_EQ(engineStatus("chat")["sleeping"], true);
  // An adapter switch on a sleeping engine is refused, not half done.
  r = post("/models/x/switch",
           {{"engine", "chat"}, {"path", (adapters_.path() / "chat-v1").string()}});
  EXPECT_EQ(r.status, 409) << r.body.dump();
  r = post("/engines/chat/wake");
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(vllm_->sleepLevel(), 0);
  EXPECT_EQ(post("/engines/triton/sleep").status, 409);  // Triton has no sleep mode
}

TEST_F(EnginesHostTest, DrainSleepsVllmAndUnloadsTritonOnceWorkIsDone) {
  startAgent();
  auto lease = agent_->acquireLease("");
  ASSERT_TRUE(lease);
  agent_->drain("test");
  // In flight: nothing is touched yet, and no new switch starts.
  EXPECT_EQ(vllm_->sleepLevel(), 0);
  EXPECT_EQ(triton_->state("resnet", 1), "READY");
  const Reply refused = post("/models/resnet/switch", {{"version", 2}});
  EXPECT_EQ(refused.status, 409) << refused.body.dump();
  EXPECT_EQ(triton_->state("resnet", 2), "");
  ASSERT_TRUE(agent_->releaseLease(*lease));
  EXPECT_EQ(agent_->wait(), 0);
  EXPECT_EQ(vllm_->sleepLevel(), 1);
  const std::string state = triton_->state("resnet", 1);
  EXPECT_TRUE(state == "UNLOADING" || state == "UNAVAILABLE") << state;
  EXPECT_EQ(triton_->count("POST", "/v2/repository/models/resnet/unload"), 1);
  const auto steps = drainSteps();
  EXPECT_TRUE(anyContains(steps, "engine chat (vllm): asleep")) << ::testing::PrintToString(steps);
  EXPECT_TRUE(anyContains(steps, "engine triton (triton): unloaded 1 model"))
      << ::testing::PrintToString(steps);
}

TEST_F(EnginesHostTest, DrainLeavesVllmAwakeWhenWorkIsStillRunning) {
  config_.inFlightMaxMs = 50;
  startAgent();
  auto lease = agent_->acquireLease("");
  ASSERT_TRUE(lease);
  agent_->drain("test");
  EXPECT_EQ(agent_->wait(), 0);
  EXPECT_EQ(vllm_->sleepLevel(), 0);
  EXPECT_EQ(vllm_->count("POST", "/sleep"), 0);
  const auto steps = drainSteps();
  EXPECT_TRUE(anyContains(steps, "engine chat (vllm): not put to sleep: 1 work item(s)"))
      << ::testing::PrintToString(steps);
  // Triton finishes running requests before it unloads, so it is unloaded anyway.
  EXPECT_EQ(triton_->count("POST", "/v2/repository/models/resnet/unload"), 1);
}

TEST_F(EnginesHostTest, OnDrainNoneLeavesEnginesServing) {
  std::vector<AgentEngineConfig> engines = {
      {"chat", {.kind = "vllm", .url = vllm_->url()}, EngineDrain::kNone}};
  auto host = EnginesHost::create(engines, 50);
  ASSERT_TRUE(host);
  const auto lines = (*host)->drain(0);
  EXPECT_EQ(lines, std::vector<std::string>{"engine chat (vllm): left serving (onDrain: none)"});
  EXPECT_EQ(vllm_->count("POST", "/sleep"), 0);
}

}  // namespace
}  // namespace tessera::agent
