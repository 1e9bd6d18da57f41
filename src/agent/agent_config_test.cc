#include "agent/agent_config.h"

#include <gtest/gtest.h>

namespace tessera::agent {
namespace {

TEST(AgentConfig, ReadsEveryKey) {
  const std::string text = R"(apiVersion: tessera.io/v1alpha1
kind: AgentConfig
nodeName: gpu-a
server: https://tessera.example:8443
tokenFile: /etc/tessera/token
tlsCa: /etc/tessera/ca.crt
heartbeatSeconds: 2.5
cpu: 96
hostMemory: 768Gi
labels: {pool: inference}
gpuDiscovery: virtual
nvmlLibrary: /opt/nvidia/libnvidia-ml.so.1
virtualGpus:
  - {type: h100-80gb, count: 2, nvlinkGroup: 0, numa: 1}
  - {type: H100-80GB, memory: 40Gi}
cache: {dir: /var/cache/tessera, diskCapacity: 500Gi, hostMemoryCapacity: 64Gi,
        warnAtFraction: 0.8, minFreeDisk: 10Gi}
modelSources:
  - {name: nfs, path: /models}
  - {name: hub, url: "http://models.internal:8000/weights"}
preload: [llama-8b, qwen-7b]
admin: 127.0.0.1:9300
drain: {stopNewWorkSeconds: 5, inFlightMaxSeconds: 90}
logFormat: json
)";
  auto c = parseAgentYaml(text, "agent.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->nodeName, "gpu-a");
  EXPECT_EQ(c->server, "https://tessera.example:8443");
  EXPECT_EQ(c->tokenFile, "/etc/tessera/token");
  EXPECT_EQ(c->tlsCa, "/etc/tessera/ca.crt");
  EXPECT_EQ(c->heartbeatMs, 2500);
  EXPECT_EQ(c->cpuMilli, 96000);
  EXPECT_EQ(c->hostMemoryMib, 768 * 1024);
  EXPECT_EQ(c->labels.at("pool"), "inference");
  EXPECT_EQ(c->discovery, GpuDiscovery::kVirtual);
  EXPECT_EQ(c->nvmlLibrary, "/opt/nvidia/libnvidia-ml.so.1");
  ASSERT_EQ(c->virtualGpus.size(), 2u);
  EXPECT_EQ(c->virtualGpus[0].type, "h100-80gb");
  EXPECT_EQ(c->virtualGpus[0].count, 2);
  EXPECT_EQ(c->virtualGpus[0].nvlinkGroup, 0);
  EXPECT_EQ(c->virtualGpus[0].numaNode, 1);
  EXPECT_FALSE(c->virtualGpus[0].memoryMib.has_value());
  EXPECT_EQ(c->virtualGpus[1].memoryMib, 40 * 1024);
  EXPECT_EQ(c->cache.dir, "/var/cache/tessera");
  EXPECT_EQ(c->cache.diskCapacityBytes, std::int64_t{500} << 30);
  EXPECT_EQ(c->cache.hostMemoryCapacityBytes, std::int64_t{64} << 30);
  EXPECT_DOUBLE_EQ(c->cache.warnAtFraction, 0.8);
  EXPECT_EQ(c->cache.minFreeDiskBytes, std::int64_t{10} << 30);
  ASSERT_EQ(c->modelSources.size(), 2u);
  EXPECT_EQ(c->modelSources[0].path, "/models");
  EXPECT_EQ(c->modelSources[1].url, "http://models.internal:8000/weights");
  EXPECT_EQ(c->preload, (std::vector<std::string>{"llama-8b", "qwen-7b"}));
  EXPECT_EQ(c->admin, "127.0.0.1:9300");
  EXPECT_EQ(c->stopNewWorkMs, 5000);
  EXPECT_EQ(c->inFlightMaxMs, 90000);
  EXPECT_EQ(c->logFormat, "json");
}

TEST(AgentConfig, EmptyFileKeepsTheDefaults) {
  auto c = parseAgentYaml("", "empty.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->heartbeatMs, 10'000);
  EXPECT_EQ(c->stopNewWorkMs, 10'000);
  EXPECT_EQ(c->inFlightMaxMs, 60'000);
  EXPECT_EQ(c->admin, "127.0.0.1:9190");
  EXPECT_EQ(c->discovery, GpuDiscovery::kAuto);
  EXPECT_EQ(c->nvmlLibrary, "libnvidia-ml.so.1");
}

TEST(AgentConfig, BadInputNamesTheFileLineAndField) {
  struct Case {
    std::string text, mention;
  };
  for (const Case& c : {
           Case{"nodeName: a\nheartbeat: 3\n", "agent.yaml:2: heartbeat: unknown key"},
           Case{"kind: ServerConfig\n", "kind"},
           Case{"server: tessera:8080\n", "server: must start with http://"},
           Case{"heartbeatSeconds: 0\n", "heartbeatSeconds"},
           Case{"gpuDiscovery: cuda\n", "gpuDiscovery: must be auto, nvml or virtual"},
           Case{"virtualGpus:\n  - {count: 2}\n", "virtualGpus[0].type: required"},
           Case{"virtualGpus:\n  - {type: L4, cuont: 2}\n", "virtualGpus[0].cuont: unknown key"},
           Case{"virtualGpus:\n  - {type: L4, count: 0}\n", "virtualGpus[0].count"},
           Case{"cache: {diskCapacity: 10}\n", "cache.diskCapacity"},
           Case{"cache: {warnAtFraction: 1.5}\n", "cache.warnAtFraction"},
           Case{"cache: {size: 1Gi}\n", "cache.size: unknown key"},
           Case{"modelSources:\n  - {name: a}\n", "needs exactly one of path"},
           Case{"modelSources:\n  - {name: a, url: ftp://x}\n", "modelSources[0].url"},
           Case{"modelSources:\n  - {name: a, path: /x}\n  - {name: a, path: /y}\n",
                "duplicate source name"},
           Case{"drain: {stopNewWorkSeconds: -1}\n", "drain.stopNewWorkSeconds"},
           Case{"drain: {grace: 3}\n", "drain.grace: unknown key"},
           Case{"logFormat: xml\n", "logFormat: must be text or json"},
           // Issue 14, usability: the admin address and GPU types are checked with the line.
           Case{"admin: 10.0.0.1:9300\n", "agent.yaml:1: admin: 10.0.0.1 is not a loopback"},
           Case{"admin: 127.0.0.1:x\n", "agent.yaml:1: admin: port must be 0 to 65535"},
           Case{"virtualGpus:\n  - {type: L44}\n",
                "agent.yaml:2: virtualGpus[0].type: unknown GPU type 'L44' (did you mean 'L4'?)"},
           Case{"virtualGpus:\n  - {type: L4, nvlinkGroup: 0}\n",
                "virtualGpus[0].nvlinkGroup: type L4 has no NVLink"},
           Case{"nodeName: [a]\n", "nodeName"},
       }) {
    auto parsed = parseAgentYaml(c.text, "agent.yaml");
    ASSERT_FALSE(parsed) << c.text;
    EXPECT_NE(parsed.error().message.find(c.mention), std::string::npos)
        << c.text << "\n-> " << parsed.error().message;
  }
}

TEST(AgentConfig, MissingFileIsAnError) {
  auto c = loadAgentFile("/nonexistent/agent.yaml");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("/nonexistent/agent.yaml"), std::string::npos);
}

}  // namespace
}  // namespace tessera::agent

namespace tessera::agent {
namespace {

// The agent files deploy/ ships must load as they are.
TEST(AgentConfig, ShippedDeployFilesLoad) {
  for (const char* path :
       {"/deploy/base/agent-config.yaml", "/deploy/overlays/dev/agent-config.yaml"}) {
    auto c = loadAgentFile(std::string(TESSERA_SOURCE_DIR) + path);
    ASSERT_TRUE(c) << path << ": " << c.error().message;
    EXPECT_EQ(c->admin, "127.0.0.1:9190") << path;
    EXPECT_EQ(c->stopNewWorkMs + c->inFlightMaxMs, 70'000) << path;
  }
}

}  // namespace
}  // namespace tessera::agent
