// `tessera agent` as a user runs it: the real binary against the real control plane on a
// loopback port. Bad input exits 2 with a reason; `agent run` registers the node and
// `agent drain` (the preStop hook) drains it and makes it exit 0; so does SIGTERM.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "agent/testing/agent_process.h"
#include "agent/testing/agent_testing.h"

namespace tessera::agent {
namespace {

using testing::ControlPlaneServer;
using testing::eventually;
using testing::TempDir;
using testing::writeFile;

struct Outcome {
  int exitCode = -1;
  std::string output;  // stdout and stderr together
};

Outcome runTessera(const std::string& args) {
  const std::string command = std::string(TESSERA_BINARY) + " " + args + " 2>&1 </dev/null";
  Outcome out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) out.output += buffer;
  const int status = ::pclose(pipe);
  out.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

class AgentCli : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.start();
    writeFile(dir_.path() / "models" / "llama-8b" / "model.bin", std::string(1000, 'w'));
  }
  std::string writeConfig(const std::string& extra = "") {
    const std::string path = dir_.file("agent.yaml");
    writeFile(path,
              "nodeName: cli-node\n"
              "server: " +
                  server_.url() +
                  "\n"
                  "heartbeatSeconds: 0.05\n"
                  "gpuDiscovery: virtual\n"
                  "virtualGpus: [{type: A100-80GB, count: 2, nvlinkGroup: 0}]\n"
                  "cache: {dir: " +
                  (dir_.path() / "cache").string() +
                  ", diskCapacity: 1Gi,"
                  " minFreeDisk: 0Mi}\n"
                  "modelSources: [{name: local, path: " +
                  (dir_.path() / "models").string() +
                  "}]\n"
                  "preload: [llama-8b]\n"
                  "admin: 127.0.0.1:0\n"
                  "drain: {stopNewWorkSeconds: 0.1, inFlightMaxSeconds: 5}\n" +
                  extra);
    return path;
  }
  bool registered() {
    const nlohmann::json n = server_.node("cli-node");
    return !n.is_null() && n["gpus"].size() == 2 && n["cachedModels"].size() == 1;
  }

  ControlPlaneServer server_;
  TempDir dir_;
};

TEST_F(AgentCli, BadInputExitsTwoWithAReason) {
  writeFile(dir_.file("typo.yaml"), "nodeName: x\nheartbeat: 2\n");
  writeFile(dir_.file("novirtual.yaml"), "gpuDiscovery: virtual\n");
  struct Case {
    std::string args, mention;
  };
  for (const Case& c : {
           Case{"agent run --config " + dir_.file("typo.yaml"),
                "typo.yaml:2: heartbeat: unknown key"},
           Case{"agent run --config " + dir_.file("novirtual.yaml"), "no virtualGpus are declared"},
           Case{"agent run --config " + writeConfig() + " --admin 0.0.0.0:9190",
                "not a loopback address"},
           Case{"agent run --config " + writeConfig() + " --server tessera:8080",
                "server: expected http://"},
           Case{"agent run --gpu-discovery cuda", "--gpu-discovery"},
           Case{"agent drain --admin 127.0.0.1:1", "no agent answers at http://127.0.0.1:1"},
           Case{"agent status --admin 127.0.0.1:1", "no agent answers"},
           Case{"agent status --config " + writeConfig() + " --admin 127.0.0.1:0",
                "has port 0, chosen when the agent started"},
       }) {
    const Outcome o = runTessera(c.args);
    EXPECT_EQ(o.exitCode, 2) << c.args << "\n" << o.output;
    EXPECT_NE(o.output.find(c.mention), std::string::npos) << c.args << "\n" << o.output;
  }
}

TEST_F(AgentCli, RunRegistersAndTheDrainCommandDrainsIt) {
  testing::AgentProcess agent(TESSERA_BINARY, writeConfig());
  ASSERT_NE(agent.adminAddress(), "") << agent.firstLine();
  EXPECT_NE(agent.firstLine().find("2 GPUs (virtual)"), std::string::npos) << agent.firstLine();
  ASSERT_TRUE(eventually([&] { return registered(); })) << server_.node("cli-node").dump();
  // The file says `admin: 127.0.0.1:0`: the commands find the port the agent chose through it.
  const std::string config = dir_.file("agent.yaml");
  const Outcome status = runTessera("agent status --config " + config);
  EXPECT_EQ(status.exitCode, 0) << status.output;
  EXPECT_NE(status.output.find("\"state\": \"running\""), std::string::npos) << status.output;
  // A second agent on the admin port the first holds is refused at start, naming it.
  const Outcome second =
      runTessera("agent run --config " + config + " --admin " + agent.adminAddress());
  EXPECT_EQ(second.exitCode, 2) << second.output;
  EXPECT_NE(second.output.find("cannot listen on " + agent.adminAddress()), std::string::npos)
      << second.output;
  const Outcome drained = runTessera("agent drain --config " + config);
  EXPECT_EQ(drained.exitCode, 0) << drained.output;
  EXPECT_NE(drained.output.find("tessera agent drain: drained"), std::string::npos)
      << drained.output;
  EXPECT_NE(drained.output.find("node cordoned"), std::string::npos) << drained.output;
  std::string rest;
  EXPECT_EQ(agent.wait(rest), 0) << rest;
  EXPECT_NE(rest.find("tessera agent: stopped"), std::string::npos) << rest;
  EXPECT_EQ(server_.node("cli-node")["cordoned"], true);
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "cache" / "admin-address"));
}

TEST_F(AgentCli, SigtermDrainsAndExitsZero) {
  testing::AgentProcess agent(TESSERA_BINARY, writeConfig());
  ASSERT_NE(agent.adminAddress(), "") << agent.firstLine();
  ASSERT_TRUE(eventually([&] { return registered(); }));
  agent.signal(SIGTERM);
  std::string rest;
  EXPECT_EQ(agent.wait(rest), 0) << rest;
  EXPECT_NE(rest.find("SIGTERM, draining"), std::string::npos) << rest;
  EXPECT_EQ(server_.node("cli-node")["cordoned"], true);
}

}  // namespace
}  // namespace tessera::agent
