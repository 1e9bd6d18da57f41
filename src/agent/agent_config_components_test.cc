// The agent file's devicePlugin and engines sections.

#include <gtest/gtest.h>

#include "agent/agent_config.h"

namespace tessera::agent {
namespace {

TEST(AgentConfigComponents, DefaultsLeaveThePluginOnAutoAndNoEngines) {
  auto c = parseAgentYaml("nodeName: a\n", "agent.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_FALSE(c->devicePlugin.enabled.has_value());
  EXPECT_EQ(c->devicePlugin.dir, "/var/lib/kubelet/device-plugins");
  EXPECT_EQ(c->devicePlugin.resources, std::vector<std::string>{"tessera.io/gpus"});
  EXPECT_EQ(c->devicePlugin.slotsPerGpu, 4);
  EXPECT_EQ(c->devicePlugin.watchMs, 1000);
  EXPECT_TRUE(c->engines.empty());
}

TEST(AgentConfigComponents, ReadsEveryKey) {
  const std::string text = R"(devicePlugin:
  enabled: true
  dir: /tmp/dp
  resources: [tessera.io/gpus, nvidia.com/gpu]
  slotsPerGpu: 8
  mpsPipeDirectory: /run/mps
  watchSeconds: 0.5
engines:
  - {name: chat, kind: vllm, url: "http://127.0.0.1:8001", timeoutMs: 2000,
     loadTimeoutMs: 90000, retries: 1, retryBackoffMs: 50, onDrain: sleep}
  - {kind: triton, url: "http://127.0.0.1:8000", onDrain: none}
)";
  auto c = parseAgentYaml(text, "agent.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->devicePlugin.enabled, true);
  EXPECT_EQ(c->devicePlugin.dir, "/tmp/dp");
  EXPECT_EQ(c->devicePlugin.resources,
            (std::vector<std::string>{"tessera.io/gpus", "nvidia.com/gpu"}));
  EXPECT_EQ(c->devicePlugin.slotsPerGpu, 8);
  EXPECT_EQ(c->devicePlugin.mpsPipeDirectory, "/run/mps");
  EXPECT_EQ(c->devicePlugin.watchMs, 500);
  ASSERT_EQ(c->engines.size(), 2u);
  EXPECT_EQ(c->engines[0].name, "chat");
  EXPECT_EQ(c->engines[0].engine.kind, "vllm");
  EXPECT_EQ(c->engines[0].engine.url, "http://127.0.0.1:8001");
  EXPECT_EQ(c->engines[0].engine.timeoutMs, 2000);
  EXPECT_EQ(c->engines[0].engine.loadTimeoutMs, 90000);
  EXPECT_EQ(c->engines[0].engine.retries, 1);
  EXPECT_EQ(c->engines[0].engine.retryBackoffMs, 50);
  EXPECT_EQ(c->engines[0].onDrain, EngineDrain::kSleep);
  EXPECT_EQ(c->engines[1].name, "triton-1");  // default: kind and position
  EXPECT_EQ(c->engines[1].engine.timeoutMs, 5000);
  EXPECT_EQ(c->engines[1].onDrain, EngineDrain::kNone);
}

TEST(AgentConfigComponents, EnabledTakesAuto) {
  auto c = parseAgentYaml("devicePlugin: {enabled: auto}\n", "agent.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_FALSE(c->devicePlugin.enabled.has_value());
}

TEST(AgentConfigComponents, ErrorsNameTheFileLineAndField) {
  struct Case {
    std::string text, expected;
  };
  const std::vector<Case> cases = {
      {"devicePlugin: {enabled: yes}\n", "devicePlugin.enabled: must be true, false or auto"},
      {"devicePlugin: {resources: [amd.com/gpu]}\n", "must be tessera.io/gpus or nvidia.com/gpu"},
      {"devicePlugin: {resources: []}\n", "at least one resource"},
      {"devicePlugin: {slotsPerGpu: 0}\n", "slotsPerGpu"},
      {"devicePlugin: {socket: x}\n", "socket"},
      {"engines:\n  - {kind: tgi, url: \"http://x:1\"}\n", "agent.yaml:2: engines[0].kind"},
      {"engines:\n  - {kind: vllm}\n", "engines[0].url: required"},
      {"engines:\n  - {kind: vllm, url: \"http://x:1\", timeoutMs: 0}\n",
       "engines[0].timeoutMs: must be positive"},
      {"engines:\n  - {kind: vllm, url: \"http://x:1\", timeout: 5}\n", "timeout"},
      {"engines:\n  - {kind: vllm, url: \"http://x:1\", onDrain: nap}\n",
       "onDrain: must be auto, none, sleep or unload"},
      {"engines:\n  - {name: a, kind: vllm, url: \"http://x:1\"}\n"
       "  - {name: a, kind: triton, url: \"http://x:2\"}\n",
       "duplicate engine name"},
  };
  for (const Case& c : cases) {
    auto parsed = parseAgentYaml(c.text, "agent.yaml");
    ASSERT_FALSE(parsed) << c.text;
    EXPECT_NE(parsed.error().message.find(c.expected), std::string::npos)
        << c.text << " -> " << parsed.error().message;
    EXPECT_NE(parsed.error().message.find("agent.yaml"), std::string::npos)
        << parsed.error().message;
  }
}

}  // namespace
}  // namespace tessera::agent

namespace tessera::agent {
namespace {

// deploy/ ships the plugin on in the base (kubelet's directory is mounted there) and on
// auto in the dev overlay.
TEST(AgentConfigComponents, ShippedFilesRunThePlugin) {
  auto base = loadAgentFile(std::string(TESSERA_SOURCE_DIR) + "/deploy/base/agent-config.yaml");
  ASSERT_TRUE(base) << base.error().message;
  EXPECT_EQ(base->devicePlugin.enabled, true);
  EXPECT_EQ(base->devicePlugin.dir, "/var/lib/kubelet/device-plugins");
  EXPECT_EQ(base->devicePlugin.resources, std::vector<std::string>{"tessera.io/gpus"});
  auto dev =
      loadAgentFile(std::string(TESSERA_SOURCE_DIR) + "/deploy/overlays/dev/agent-config.yaml");
  ASSERT_TRUE(dev) << dev.error().message;
  EXPECT_FALSE(dev->devicePlugin.enabled.has_value());
}

}  // namespace
}  // namespace tessera::agent
