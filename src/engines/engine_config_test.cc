#include "engines/engine_config.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tessera::engines {
namespace {

using nlohmann::json;

TEST(EngineConfig, ReadsAllFieldsAndDefaults) {
  auto full = engineConfigFromJson(json::parse(R"({"kind": "triton", "url": "http://10.0.0.2:8000",
      "timeoutMs": 250, "loadTimeoutMs": 9000, "retries": 1, "retryBackoffMs": 5})"),
                                   "engines[0]");
  ASSERT_TRUE(full) << full.error().message;
  EXPECT_EQ(full->kind, "triton");
  EXPECT_EQ(full->url, "http://10.0.0.2:8000");
  EXPECT_EQ(full->timeoutMs, 250);
  EXPECT_EQ(full->loadTimeoutMs, 9000);
  EXPECT_EQ(full->retries, 1);
  EXPECT_EQ(full->retryBackoffMs, 5);

  auto minimal =
      engineConfigFromJson(json::parse(R"({"kind": "vllm", "url": "https://h/v"})"), "e");
  ASSERT_TRUE(minimal) << minimal.error().message;
  EXPECT_EQ(minimal->timeoutMs, EngineConfig{}.timeoutMs);
  EXPECT_EQ(minimal->retries, EngineConfig{}.retries);
}

TEST(EngineConfig, RefusalsNameTheField) {
  struct Case {
    const char* json;
    const char* field;
  };
  for (const Case& c : {
           Case{R"({"url": "http://h:1"})", "engines[1].kind"},
           Case{R"({"kind": "tgi", "url": "http://h:1"})", "engines[1].kind"},
           Case{R"({"kind": "vllm"})", "engines[1].url"},
           Case{R"({"kind": "vllm", "url": "h:1"})", "engines[1].url"},
           Case{R"({"kind": "vllm", "url": "http://h:1", "timeoutMs": 0})", "engines[1].timeoutMs"},
           Case{R"({"kind": "vllm", "url": "http://h:1", "timeoutMs": "5s"})",
                "engines[1].timeoutMs"},
           Case{R"({"kind": "vllm", "url": "http://h:1", "retries": -1})", "engines[1].retries"},
           Case{R"({"kind": "vllm", "url": "http://h:1", "timeout": 5})", "engines[1].timeout"},
       }) {
    auto config = engineConfigFromJson(json::parse(c.json), "engines[1]");
    ASSERT_FALSE(config) << c.json;
    EXPECT_EQ(config.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(config.error().message.find(c.field), std::string::npos) << config.error().message;
  }
}

TEST(MakeEngine, BuildsTheAdapterOfTheKind) {
  auto triton = makeEngine({.kind = "triton", .url = "http://127.0.0.1:8000/"});
  ASSERT_TRUE(triton) << triton.error().message;
  EXPECT_EQ((*triton)->kind(), "triton");
  EXPECT_TRUE((*triton)->capabilities().versions);
  EXPECT_FALSE((*triton)->capabilities().sleep);

  auto vllm = makeEngine({.kind = "vllm", .url = "http://127.0.0.1:8001"});
  ASSERT_TRUE(vllm) << vllm.error().message;
  EXPECT_EQ((*vllm)->kind(), "vllm");
  EXPECT_TRUE((*vllm)->capabilities().sleep);
  EXPECT_TRUE((*vllm)->capabilities().adapters);
}

TEST(MakeEngine, RefusesBadEntries) {
  EXPECT_FALSE(makeEngine({.kind = "tgi", .url = "http://h:1"}));
  EXPECT_FALSE(makeEngine({.kind = "vllm", .url = "ftp://h:1"}));
  EXPECT_FALSE(makeEngine({.kind = "vllm", .url = "http://"}));
  EXPECT_FALSE(makeEngine({.kind = "vllm", .url = "http://h:1", .timeoutMs = 0}));
  EXPECT_FALSE(makeEngine({.kind = "vllm", .url = "http://h:1", .retries = -1}));
}

TEST(MakeEngine, TritonHasNoSleepMode) {
  auto triton = makeEngine({.kind = "triton", .url = "http://127.0.0.1:1"});
  ASSERT_TRUE(triton);
  auto slept = (*triton)->sleep(SleepLevel::kOffloadWeights);
  ASSERT_FALSE(slept);
  EXPECT_EQ(slept.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(slept.error().message.find("no sleep mode"), std::string::npos);
}

}  // namespace
}  // namespace tessera::engines
