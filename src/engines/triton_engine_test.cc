// The Triton adapter against the stand-in Triton (testing/fake_triton.h) over real HTTP on
// a loopback port.

#include "engines/triton_engine.h"

#include <future>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engines/testing/fake_triton.h"
#include "engines/testing/scratch_dir.h"

namespace tessera::engines {
namespace {

using nlohmann::json;
using testing::FakeTriton;
using testing::FakeTritonOptions;
using testing::ScratchDir;

bool tritonContains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const ModelState* find(const std::vector<ModelState>& states, const std::string& name,
                       std::optional<std::int64_t> version = std::nullopt) {
  for (const auto& s : states) {
    if (s.name == name && s.version == version) return &s;
  }
  return nullptr;
}

class TritonEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_.write("resnet/config.pbtxt", "name: \"resnet\"\nbackend: \"onnxruntime\"\n");
    repo_.mkdir("resnet/1");
    repo_.mkdir("resnet/2");
    repo_.write("llm/config.pbtxt",
                "backend: \"python\"\nversion_policy: { specific: { versions: [1] } }\n");
    repo_.mkdir("llm/1");
    repo_.mkdir("llm/2");
    repo_.write("llm/3/FAIL", "CUDA out of memory while loading weights\n");
    repo_.mkdir("noconfig/1");
  }

  void startServer(long long loadDelayMs = 0, long long unloadDelayMs = 0) {
    server_ = std::make_unique<FakeTriton>(FakeTritonOptions{
        .repository = repo_.path(), .loadDelayMs = loadDelayMs, .unloadDelayMs = unloadDelayMs});
    auto port = server_->start();
    ASSERT_TRUE(port) << port.error().message;
  }

  std::unique_ptr<Engine> engine(EngineConfig config = {}) {
    config.kind = "triton";
    if (config.url.empty()) config.url = server_->url();
    auto made = makeEngine(config);
    EXPECT_TRUE(made) << made.error().message;
    return made ? std::move(*made) : nullptr;
  }

  ScratchDir repo_;
  std::unique_ptr<FakeTriton> server_;
};

TEST_F(TritonEngineTest, ListsTheRepositoryBeforeAnythingIsLoaded) {
  startServer();
  auto triton = engine();
  auto healthy = triton->healthy();
  ASSERT_TRUE(healthy) << healthy.error().message;
  EXPECT_TRUE(*healthy);

  auto states = triton->list();
  ASSERT_TRUE(states) << states.error().message;
  ASSERT_EQ(states->size(), 3u);
  EXPECT_EQ((*states)[0].name, "llm");
  EXPECT_EQ((*states)[1].name, "noconfig");
  EXPECT_EQ((*states)[2].name, "resnet");
  for (const auto& s : *states) {
    EXPECT_EQ(s.phase, ModelPhase::kAvailable) << s.name;
    EXPECT_FALSE(s.version) << s.name;
  }
}

TEST_F(TritonEngineTest, LoadsServesAndUnloadsAModel) {
  startServer();
  auto triton = engine();
  auto before = triton->ready("resnet");
  ASSERT_TRUE(before) << before.error().message;
  EXPECT_FALSE(*before);

  auto loaded = triton->load({.model = "resnet"});
  ASSERT_TRUE(loaded) << loaded.error().message;
  // The default policy serves the latest version only.
  EXPECT_TRUE(*triton->ready("resnet"));
  EXPECT_TRUE(*triton->ready("resnet", 2));
  EXPECT_FALSE(*triton->ready("resnet", 1));
  auto states = triton->list();
  ASSERT_TRUE(states) << states.error().message;
  const ModelState* v2 = find(*states, "resnet", 2);
  ASSERT_NE(v2, nullptr);
  EXPECT_EQ(v2->phase, ModelPhase::kReady);
  // Nothing to override: an empty body.
  ASSERT_EQ(server_->count("POST", "/v2/repository/models/resnet/load"), 1);
  for (const auto& r : server_->requests()) {
    if (r.path == "/v2/repository/models/resnet/load") {
      EXPECT_EQ(r.body, "");
    }
  }

  auto unloaded = triton->unload("resnet");
  ASSERT_TRUE(unloaded) << unloaded.error().message;
  EXPECT_FALSE(*triton->ready("resnet"));
  states = triton->list();
  ASSERT_TRUE(states);
  v2 = find(*states, "resnet", 2);
  ASSERT_NE(v2, nullptr);
  EXPECT_EQ(v2->phase, ModelPhase::kUnavailable);
  EXPECT_EQ(v2->reason, "unloaded");
}

TEST_F(TritonEngineTest, LoadRefusalsCarryTritonsMessage) {
  startServer();
  auto triton = engine();
  auto ghost = triton->load({.model = "ghost"});
  ASSERT_FALSE(ghost);
  EXPECT_EQ(ghost.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(tritonContains(ghost.error().message, "triton at " + server_->url() +
                                                        ": POST /v2/repository/models/ghost/load"))
      << ghost.error().message;
  EXPECT_TRUE(tritonContains(ghost.error().message, "HTTP 400"));
  EXPECT_TRUE(tritonContains(ghost.error().message,
                             "failed to load 'ghost', failed to poll from model repository"))
      << ghost.error().message;

  auto noConfig = triton->load({.model = "noconfig"});
  ASSERT_FALSE(noConfig);
  EXPECT_TRUE(tritonContains(noConfig.error().message, "no config.pbtxt"))
      << noConfig.error().message;
  EXPECT_FALSE(*triton->ready("noconfig"));
}

TEST_F(TritonEngineTest, SwitchesVersionWhileTheOldOneKeepsServing) {
  startServer();
  auto triton = engine();
  ASSERT_TRUE(triton->load({.model = "llm"}));
  EXPECT_TRUE(*triton->ready("llm", 1));

  // The stand-in holds the load of version 2 half-way; meanwhile the index must show
  // version 2 loading beside version 1 still serving.
  server_->holdWork(true);
  auto switching =
      std::async(std::launch::async, [&] { return triton->load({.model = "llm", .version = 2}); });
  const ModelState* v2 = nullptr;
  std::vector<ModelState> states;
  Result<bool> oldReady = false;
  bool listFailed = false;
  while (v2 == nullptr || v2->phase != ModelPhase::kLoading) {
    // A load that ends while held failed before it reached the server's loading stage.
    if (switching.wait_for(std::chrono::seconds(0)) == std::future_status::ready) break;
    auto listed = triton->list();
    if (!listed) {
      listFailed = true;
      break;
    }
    states = std::move(*listed);
    v2 = find(states, "llm", 2);
  }
  if (v2 != nullptr && v2->phase == ModelPhase::kLoading) oldReady = triton->ready("llm", 1);
  // Released before any assertion can return: the pending load must finish.
  server_->holdWork(false);
  ASSERT_FALSE(listFailed);
  ASSERT_NE(v2, nullptr);
  ASSERT_EQ(v2->phase, ModelPhase::kLoading);
  const ModelState* v1 = find(states, "llm", 1);
  ASSERT_NE(v1, nullptr);
  EXPECT_EQ(v1->phase, ModelPhase::kReady);
  ASSERT_TRUE(oldReady) << oldReady.error().message;
  EXPECT_TRUE(*oldReady);

  auto switched = switching.get();
  ASSERT_TRUE(switched) << switched.error().message;
  EXPECT_TRUE(*triton->ready("llm", 2));
  EXPECT_FALSE(*triton->ready("llm", 1));
  EXPECT_EQ(server_->state("llm", 1), "UNAVAILABLE");

  // What went over the wire: the served configuration with a specific-version policy.
  json sent;
  for (const auto& r : server_->requests()) {
    if (r.path == "/v2/repository/models/llm/load" && !r.body.empty()) sent = json::parse(r.body);
  }
  ASSERT_TRUE(sent.contains("parameters")) << sent.dump();
  const json config = json::parse(sent["parameters"]["config"].get<std::string>());
  EXPECT_EQ(config["version_policy"], json::parse(R"({"specific": {"versions": [2]}})"));
  EXPECT_EQ(config["backend"], "python");
  EXPECT_EQ(server_->count("GET", "/v2/models/llm/config"), 1);
}

TEST_F(TritonEngineTest, AFailedNewVersionLeavesTheOldOneServing) {
  startServer();
  auto triton = engine();
  ASSERT_TRUE(triton->load({.model = "llm"}));
  auto failed = triton->load({.model = "llm", .version = 3});
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(tritonContains(failed.error().message, "CUDA out of memory while loading weights"))
      << failed.error().message;
  EXPECT_TRUE(*triton->ready("llm", 1));
  auto states = triton->list();
  ASSERT_TRUE(states);
  const ModelState* v3 = find(*states, "llm", 3);
  ASSERT_NE(v3, nullptr);
  EXPECT_EQ(v3->phase, ModelPhase::kUnavailable);
  EXPECT_EQ(v3->reason, "CUDA out of memory while loading weights");
}

TEST_F(TritonEngineTest, AVersionOfAModelNotLoadedNeedsItsConfiguration) {
  startServer();
  auto triton = engine();
  auto blind = triton->load({.model = "resnet", .version = 1});
  ASSERT_FALSE(blind);
  EXPECT_EQ(blind.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(tritonContains(blind.error().message, "pass configJson")) << blind.error().message;
  EXPECT_EQ(server_->count("POST", "/v2/repository/models/resnet/load"), 0);

  auto given = triton->load(
      {.model = "resnet", .version = 1, .configJson = R"({"backend": "onnxruntime"})"});
  ASSERT_TRUE(given) << given.error().message;
  EXPECT_TRUE(*triton->ready("resnet", 1));
  EXPECT_FALSE(*triton->ready("resnet", 2));
}

TEST_F(TritonEngineTest, SendsOverrideFilesBase64Encoded) {
  startServer();
  auto triton = engine();
  const std::string weights("\x00\x01\xfe\xffONNX", 8);
  auto loaded = triton->load({.model = "fresh",
                              .configJson = R"({"backend": "onnxruntime"})",
                              .files = {{"1/model.onnx", weights}}});
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(server_->overrideFiles("fresh").at("1/model.onnx"), weights);
  EXPECT_TRUE(*triton->ready("fresh", 1));

  auto noConfig = triton->load({.model = "fresh2", .files = {{"1/model.onnx", weights}}});
  ASSERT_FALSE(noConfig);
  EXPECT_EQ(noConfig.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(server_->count("POST", "/v2/repository/models/fresh2/load"), 0);
}

TEST_F(TritonEngineTest, UnloadIsAcknowledgedBeforeItFinishes) {
  startServer(/*loadDelayMs=*/0, /*unloadDelayMs=*/60'000);  // cut short by the server's stop
  auto triton = engine();
  ASSERT_TRUE(triton->load({.model = "resnet"}));
  ASSERT_TRUE(triton->unload("resnet"));
  auto states = triton->list();
  ASSERT_TRUE(states);
  const ModelState* v2 = find(*states, "resnet", 2);
  ASSERT_NE(v2, nullptr);
  EXPECT_EQ(v2->phase, ModelPhase::kUnloading);
  EXPECT_FALSE(*triton->ready("resnet"));
}

TEST_F(TritonEngineTest, AHungServerIsATimeoutNotRetried) {
  startServer();
  auto triton = engine({.timeoutMs = 200, .retries = 2, .retryBackoffMs = 1});
  server_->hang(true);
  auto states = triton->list();
  server_->hang(false);
  ASSERT_FALSE(states);
  EXPECT_EQ(states.error().code, ErrorCode::kInternal);
  EXPECT_TRUE(
      tritonContains(states.error().message, "POST /v2/repository/index: timed out after 200 ms"))
      << states.error().message;
  EXPECT_EQ(server_->count("POST", "/v2/repository/index"), 1);
}

TEST_F(TritonEngineTest, ALoadLongerThanItsDeadlineIsATimeout) {
  startServer(/*loadDelayMs=*/60'000);  // cut short by the server's stop
  auto triton = engine({.timeoutMs = 5'000, .loadTimeoutMs = 200});
  auto loaded = triton->load({.model = "resnet"});
  ASSERT_FALSE(loaded);
  EXPECT_TRUE(tritonContains(loaded.error().message, "timed out after 200 ms"))
      << loaded.error().message;
  EXPECT_EQ(server_->count("POST", "/v2/repository/models/resnet/load"), 1);
}

TEST_F(TritonEngineTest, ARefusedConnectionIsRetriedThenReported) {
  startServer();
  const std::string url = server_->url();
  server_->stop();  // nothing listens on the port any more
  auto triton = engine({.url = url, .retries = 2, .retryBackoffMs = 1});
  auto states = triton->list();
  ASSERT_FALSE(states);
  EXPECT_EQ(states.error().code, ErrorCode::kInternal);
  EXPECT_TRUE(
      tritonContains(states.error().message, "triton at " + url + ": POST /v2/repository/index"));
  EXPECT_TRUE(tritonContains(states.error().message, "cannot connect")) << states.error().message;
  EXPECT_TRUE(tritonContains(states.error().message, "tried 3 times")) << states.error().message;

  auto healthy = triton->healthy();
  ASSERT_FALSE(healthy);  // unreachable is an error, not "unhealthy"
  auto loaded = triton->load({.model = "resnet"});
  ASSERT_FALSE(loaded);
  EXPECT_FALSE(tritonContains(loaded.error().message, "tried")) << loaded.error().message;
}

TEST_F(TritonEngineTest, AnswersOutsideTheProtocolAreClearErrors) {
  startServer();
  auto triton = engine();
  server_->garbleNext(1);
  auto garbled = triton->list();
  ASSERT_FALSE(garbled);
  EXPECT_EQ(garbled.error().code, ErrorCode::kInternal);
  EXPECT_TRUE(tritonContains(garbled.error().message, "is not JSON")) << garbled.error().message;
  EXPECT_TRUE(tritonContains(garbled.error().message, "502 Bad Gateway"))
      << garbled.error().message;

  server_->failNext(1, 200, R"({"models": []})");
  auto notArray = triton->list();
  ASSERT_FALSE(notArray);
  EXPECT_TRUE(tritonContains(notArray.error().message, "not a repository index"))
      << notArray.error().message;

  server_->failNext(1, 200, R"([{"name": "a", "version": "one", "state": "READY"}])");
  auto badVersion = triton->list();
  ASSERT_FALSE(badVersion);
  EXPECT_TRUE(tritonContains(badVersion.error().message, "version 'one' is not a number"));

  server_->failNext(1, 200, R"([{"name": "a", "version": "1", "state": "DANCING"}])");
  auto badState = triton->list();
  ASSERT_FALSE(badState);
  EXPECT_TRUE(tritonContains(badState.error().message, "DANCING"));
}

TEST_F(TritonEngineTest, OnlyRequestsThatChangeNothingAreRetried) {
  startServer();
  auto triton = engine({.retries = 2, .retryBackoffMs = 1});
  const std::string busy = R"({"error": "Server is not ready"})";
  server_->failNext(2, 503, busy);
  auto states = triton->list();
  ASSERT_TRUE(states) << states.error().message;
  EXPECT_EQ(server_->count("POST", "/v2/repository/index"), 3);

  server_->failNext(1, 503, busy);
  auto loaded = triton->load({.model = "resnet"});
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().code, ErrorCode::kInternal);
  EXPECT_TRUE(tritonContains(loaded.error().message, "HTTP 503: Server is not ready"))
      << loaded.error().message;
  EXPECT_EQ(server_->count("POST", "/v2/repository/models/resnet/load"), 1);

  server_->failNext(1, 503, busy);
  ASSERT_FALSE(triton->unload("resnet"));
  EXPECT_EQ(server_->count("POST", "/v2/repository/models/resnet/unload"), 1);
}

TEST_F(TritonEngineTest, WithoutExplicitModelControlTheFlagIsNamed) {
  server_ = std::make_unique<FakeTriton>(
      FakeTritonOptions{.repository = repo_.path(), .explicitMode = false});
  ASSERT_TRUE(server_->start());
  auto triton = engine({.retries = 2, .retryBackoffMs = 1});
  for (auto result : {triton->load({.model = "resnet"}), triton->unload("resnet")}) {
    ASSERT_FALSE(result);
    EXPECT_EQ(result.error().code, ErrorCode::kFailedPrecondition);
    EXPECT_TRUE(
        tritonContains(result.error().message,
                       "HTTP 503: explicit model load / unload is not allowed if polling is "
                       "enabled (start Triton with --model-control-mode=explicit)"))
        << result.error().message;
  }
  // A 503 to a load is not retried: it changed something, or may have.
  EXPECT_EQ(server_->count("POST", "/v2/repository/models/resnet/load"), 1);
  auto states = triton->list();
  ASSERT_TRUE(states) << states.error().message;
}

TEST_F(TritonEngineTest, RefusesLoRAFieldsAndHasNoSleep) {
  startServer();
  auto triton = engine();
  auto lora = triton->load({.model = "resnet", .path = "/adapters/x"});
  ASSERT_FALSE(lora);
  EXPECT_EQ(lora.error().code, ErrorCode::kInvalidArgument);
  auto slept = triton->sleep(SleepLevel::kOffloadWeights);
  ASSERT_FALSE(slept);
  EXPECT_EQ(slept.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(server_->requests().empty());
}

TEST_F(TritonEngineTest, KeepsTheURLsPathPrefix) {
  startServer();
  auto triton = engine({.url = server_->url() + "/"});
  ASSERT_TRUE(triton->list());
  // A prefix the stand-in does not serve shows up in the request path.
  auto prefixed = engine({.url = server_->url() + "/triton"});
  auto states = prefixed->list();
  ASSERT_FALSE(states);
  EXPECT_TRUE(tritonContains(states.error().message, "POST /triton/v2/repository/index"))
      << states.error().message;
  EXPECT_EQ(server_->requests().back().path, "/triton/v2/repository/index");
}

}  // namespace
}  // namespace tessera::engines
