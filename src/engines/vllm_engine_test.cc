// The vLLM adapter against the stand-in vLLM (testing/fake_vllm.h) over real HTTP on a
// loopback port.

#include "engines/vllm_engine.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engines/testing/fake_vllm.h"
#include "engines/testing/scratch_dir.h"

namespace tessera::engines {
namespace {

using nlohmann::json;
using testing::FakeVllm;
using testing::FakeVllmOptions;
using testing::ScratchDir;

constexpr const char* kBase = "meta-llama/Llama-3.1-8B-Instruct";

bool vllmContains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class VllmEngineTest : public ::testing::Test {
 protected:
  void startServer(FakeVllmOptions options = {}) {
    server_ = std::make_unique<FakeVllm>(options);
    auto port = server_->start();
    ASSERT_TRUE(port) << port.error().message;
  }

  std::unique_ptr<Engine> engine(EngineConfig config = {}) {
    config.kind = "vllm";
    if (config.url.empty()) config.url = server_->url();
    auto made = makeEngine(config);
    EXPECT_TRUE(made) << made.error().message;
    return made ? std::move(*made) : nullptr;
  }

  // A LoRA adapter folder as vLLM expects it.
  std::string adapter(const std::string& name) {
    return dirs_.write(name + "/adapter_config.json", R"({"r": 16, "lora_alpha": 32})")
        .parent_path()
        .string();
  }

  std::vector<testing::RecordedRequest> sent(const std::string& path) const {
    std::vector<testing::RecordedRequest> out;
    for (const auto& r : server_->requests()) {
      if (r.path == path) out.push_back(r);
    }
    return out;
  }

  ScratchDir dirs_;
  std::unique_ptr<FakeVllm> server_;
};

TEST_F(VllmEngineTest, ListsTheBaseModel) {
  startServer();
  auto vllm = engine();
  auto healthy = vllm->healthy();
  ASSERT_TRUE(healthy) << healthy.error().message;
  EXPECT_TRUE(*healthy);
  auto states = vllm->list();
  ASSERT_TRUE(states) << states.error().message;
  ASSERT_EQ(states->size(), 1u);
  EXPECT_EQ((*states)[0].name, kBase);
  EXPECT_EQ((*states)[0].phase, ModelPhase::kReady);
  EXPECT_EQ((*states)[0].parent, "");
  EXPECT_TRUE(*vllm->ready(kBase));
}

TEST_F(VllmEngineTest, LoadsAndUnloadsLoRAAdapters) {
  startServer();
  auto vllm = engine();
  const std::string path = adapter("sql-lora");
  auto loaded = vllm->load({.model = "sql-lora", .path = path});
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(json::parse(sent("/v1/load_lora_adapter").at(0).body),
            (json{{"lora_name", "sql-lora"}, {"lora_path", path}}));

  auto states = vllm->list();
  ASSERT_TRUE(states) << states.error().message;
  ASSERT_EQ(states->size(), 2u);
  EXPECT_EQ((*states)[1].name, "sql-lora");
  EXPECT_EQ((*states)[1].parent, kBase);
  EXPECT_EQ((*states)[1].phase, ModelPhase::kReady);
  EXPECT_TRUE(*vllm->ready("sql-lora"));

  auto unloaded = vllm->unload("sql-lora");
  ASSERT_TRUE(unloaded) << unloaded.error().message;
  EXPECT_EQ(json::parse(sent("/v1/unload_lora_adapter").at(0).body),
            (json{{"lora_name", "sql-lora"}}));
  EXPECT_FALSE(*vllm->ready("sql-lora"));
  EXPECT_TRUE(server_->adapters().empty());
}

TEST_F(VllmEngineTest, ADuplicateAdapterIsAlreadyExistsUnlessReplaced) {
  startServer();
  auto vllm = engine();
  ASSERT_TRUE(vllm->load({.model = "chat", .path = adapter("chat-v1")}));
  auto again = vllm->load({.model = "chat", .path = adapter("chat-v2")});
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kAlreadyExists);
  EXPECT_TRUE(vllmContains(again.error().message,
                           "vllm at " + server_->url() + ": POST /v1/load_lora_adapter: HTTP 400"))
      << again.error().message;
  EXPECT_TRUE(
      vllmContains(again.error().message, "The lora adapter 'chat' has already been loaded"))
      << again.error().message;

  // Switched live: the same name now serves the new weights.
  auto replaced = vllm->load({.model = "chat", .path = adapter("chat-v2"), .replace = true});
  ASSERT_TRUE(replaced) << replaced.error().message;
  EXPECT_EQ(json::parse(sent("/v1/load_lora_adapter").back().body)["load_inplace"], true);
  EXPECT_EQ(server_->adapters(), std::vector<std::string>{"chat"});
}

TEST_F(VllmEngineTest, UnknownAdaptersAreNotFound) {
  startServer();
  auto vllm = engine();
  auto missing = vllm->load({.model = "ghost", .path = (dirs_.path() / "nothing").string()});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(vllmContains(missing.error().message, "No adapter found for"))
      << missing.error().message;

  auto notLoaded = vllm->unload("ghost");
  ASSERT_FALSE(notLoaded);
  EXPECT_EQ(notLoaded.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(vllmContains(notLoaded.error().message, "The lora adapter 'ghost' cannot be found."))
      << notLoaded.error().message;
}

TEST_F(VllmEngineTest, SleepsAndWakesInParts) {
  startServer();
  auto vllm = engine();
  ASSERT_TRUE(vllm->load({.model = "sql-lora", .path = adapter("sql-lora")}));
  auto slept = vllm->sleep(SleepLevel::kOffloadWeights);
  ASSERT_TRUE(slept) << slept.error().message;
  EXPECT_EQ(sent("/sleep").at(0).query, "level=1");
  EXPECT_EQ(server_->sleepLevel(), 1);
  EXPECT_TRUE(*vllm->sleeping());
  auto states = vllm->list();
  ASSERT_TRUE(states);
  for (const auto& s : *states) {
    EXPECT_EQ(s.phase, ModelPhase::kSleeping) << s.name;
  }
  EXPECT_FALSE(*vllm->ready(kBase));
  EXPECT_FALSE(*vllm->ready("sql-lora"));

  // Weights first (e.g. to update them), the KV cache after.
  ASSERT_TRUE(vllm->wakeUp({WakeTag::kWeights}));
  EXPECT_EQ(sent("/wake_up").at(0).query, "tags=weights");
  EXPECT_TRUE(*vllm->sleeping());
  EXPECT_EQ(server_->asleepParts(), std::set<std::string>{"kv_cache"});
  ASSERT_TRUE(vllm->wakeUp({WakeTag::kKvCache}));
  EXPECT_FALSE(*vllm->sleeping());
  EXPECT_TRUE(*vllm->ready("sql-lora"));

  ASSERT_TRUE(vllm->sleep(SleepLevel::kDiscardWeights));
  EXPECT_EQ(sent("/sleep").at(1).query, "level=2");
  ASSERT_TRUE(vllm->wakeUp());
  EXPECT_EQ(sent("/wake_up").back().query, "");
  EXPECT_FALSE(*vllm->sleeping());
}

TEST_F(VllmEngineTest, MissingServerSettingsAreNamed) {
  startServer({.devMode = false, .runtimeLora = false});
  auto vllm = engine();
  auto slept = vllm->sleep(SleepLevel::kOffloadWeights);
  ASSERT_FALSE(slept);
  EXPECT_EQ(slept.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(vllmContains(slept.error().message, "VLLM_SERVER_DEV_MODE=1"))
      << slept.error().message;
  EXPECT_TRUE(vllmContains(slept.error().message, "--enable-sleep-mode"));
  auto asleep = vllm->sleeping();
  ASSERT_FALSE(asleep);
  EXPECT_EQ(asleep.error().code, ErrorCode::kFailedPrecondition);

  auto loaded = vllm->load({.model = "x", .path = adapter("x")});
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(vllmContains(loaded.error().message, "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"))
      << loaded.error().message;

  // Without the sleep endpoints the engine is simply awake.
  auto states = vllm->list();
  ASSERT_TRUE(states) << states.error().message;
  EXPECT_EQ((*states)[0].phase, ModelPhase::kReady);
}

TEST_F(VllmEngineTest, RefusesTritonFieldsWithoutAsking) {
  startServer();
  auto vllm = engine();
  auto base = vllm->load({.model = kBase});
  ASSERT_FALSE(base);
  EXPECT_EQ(base.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(vllmContains(base.error().message, "LoRA adapters only")) << base.error().message;
  auto versioned = vllm->load({.model = "a", .version = 2, .path = adapter("a")});
  ASSERT_FALSE(versioned);
  auto ready = vllm->ready(kBase, 1);
  ASSERT_FALSE(ready);
  EXPECT_TRUE(server_->requests().empty());
}

TEST_F(VllmEngineTest, AHungSleepIsATimeoutSentOnce) {
  startServer();
  auto vllm = engine({.timeoutMs = 5'000, .loadTimeoutMs = 200, .retries = 2});
  server_->hang(true);
  auto slept = vllm->sleep(SleepLevel::kOffloadWeights);
  server_->hang(false);
  ASSERT_FALSE(slept);
  EXPECT_EQ(slept.error().code, ErrorCode::kInternal);
  EXPECT_TRUE(vllmContains(slept.error().message, "POST /sleep?level=1: timed out after 200 ms"))
      << slept.error().message;
  EXPECT_EQ(server_->count("POST", "/sleep"), 1);
}

TEST_F(VllmEngineTest, ARefusedConnectionIsAClearError) {
  startServer();
  const std::string url = server_->url();
  server_->stop();
  auto vllm = engine({.url = url, .retries = 1, .retryBackoffMs = 1});
  auto states = vllm->list();
  ASSERT_FALSE(states);
  EXPECT_TRUE(
      vllmContains(states.error().message, "vllm at " + url + ": GET /v1/models: cannot connect"))
      << states.error().message;
  EXPECT_TRUE(vllmContains(states.error().message, "tried 2 times"));
  auto woke = vllm->wakeUp();
  ASSERT_FALSE(woke);
  EXPECT_TRUE(vllmContains(woke.error().message, "POST /wake_up: cannot connect"))
      << woke.error().message;
}

TEST_F(VllmEngineTest, AnswersOutsideTheProtocolAreClearErrors) {
  startServer();
  auto vllm = engine();
  server_->garbleNext(1);
  auto garbled = vllm->list();
  ASSERT_FALSE(garbled);
  EXPECT_EQ(garbled.error().code, ErrorCode::kInternal);
  EXPECT_TRUE(
      vllmContains(garbled.error().message, "GET /v1/models: answer (HTTP 200) is not JSON"))
      << garbled.error().message;

  server_->failNext(1, 200, R"({"object": "list"})");
  auto noData = vllm->list();
  ASSERT_FALSE(noData);
  EXPECT_TRUE(vllmContains(noData.error().message, "no 'data' array")) << noData.error().message;

  server_->failNext(1, 200, R"({"sleeping": true})");
  auto badSleep = vllm->sleeping();
  ASSERT_FALSE(badSleep);
  EXPECT_TRUE(vllmContains(badSleep.error().message, "no boolean 'is_sleeping'"))
      << badSleep.error().message;
}

TEST_F(VllmEngineTest, OnlyRequestsThatChangeNothingAreRetried) {
  startServer();
  auto vllm = engine({.retries = 2, .retryBackoffMs = 1});
  const std::string busy =
      R"({"error": {"message": "engine busy", "type": "ServiceUnavailable", "param": null, "code": 503}})";
  server_->failNext(2, 503, busy);
  auto healthy = vllm->healthy();
  ASSERT_TRUE(healthy) << healthy.error().message;
  EXPECT_TRUE(*healthy);
  EXPECT_EQ(server_->count("GET", "/health"), 3);

  server_->failNext(1, 503, busy);
  auto loaded = vllm->load({.model = "a", .path = adapter("a")});
  ASSERT_FALSE(loaded);
  EXPECT_TRUE(vllmContains(loaded.error().message, "HTTP 503: engine busy"))
      << loaded.error().message;
  EXPECT_EQ(server_->count("POST", "/v1/load_lora_adapter"), 1);

  // A dead engine behind a live server: /health keeps answering 503.
  server_->failNext(3, 503, busy);
  auto dead = vllm->healthy();
  ASSERT_TRUE(dead) << dead.error().message;
  EXPECT_FALSE(*dead);
}

TEST_F(VllmEngineTest, ReadsOlderFlatErrorBodies) {
  startServer();
  auto vllm = engine();
  // vLLM releases before the nested form sent ErrorResponse's fields at the top level.
  server_->failNext(
      1, 400,
      R"({"object": "error", "message": "LoRA rank 64 is greater than max_lora_rank 16.", "type": "BadRequestError", "param": null, "code": 400})");
  auto loaded = vllm->load({.model = "big", .path = adapter("big")});
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(vllmContains(loaded.error().message,
                           "HTTP 400: LoRA rank 64 is greater than max_lora_rank 16."))
      << loaded.error().message;
}

}  // namespace
}  // namespace tessera::engines
