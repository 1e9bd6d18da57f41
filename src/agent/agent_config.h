#pragma once
// The `tessera agent` configuration file (docs/agent.md, "Configuration"). Every key is
// optional; flags override environment variables, which override the file, which overrides
// the defaults below.
//
//   apiVersion: tessera.io/v1alpha1
//   kind: AgentConfig
//   nodeName: gpu-a                      # default: the host name
//   server: https://tessera.example:8443
//   tokenFile: /etc/tessera/token
//   tlsCa: /etc/tessera/ca.crt
//   heartbeatSeconds: 10
//   cpu: 96
//   hostMemory: 768Gi
//   labels: {pool: inference}
//   gpuDiscovery: auto                   # auto | nvml | virtual
//   nvmlLibrary: libnvidia-ml.so.1
//   virtualGpus: [{type: A100-80GB, count: 2, nvlinkGroup: 0, numa: 0}]
//   cache: {dir: /var/lib/tessera/cache, diskCapacity: 500Gi, hostMemoryCapacity: 64Gi,
//           warnAtFraction: 0.9, minFreeDisk: 10Gi}
//   modelSources: [{name: local, path: /models}]
//   preload: [llama-8b]
//   admin: 127.0.0.1:9190                # or unix:/run/tessera/agent.sock
//   drain: {stopNewWorkSeconds: 10, inFlightMaxSeconds: 60}
//   logFormat: text
//   devicePlugin: {enabled: auto, dir: /var/lib/kubelet/device-plugins,
//                  resources: [tessera.io/gpus], slotsPerGpu: 4}
//   draDriver: {enabled: false, registryDir: /var/lib/kubelet/plugins_registry,
//               pluginDir: /var/lib/kubelet/plugins, cdiDir: /var/run/cdi, gpus: []}
//   engines: [{name: llm, kind: vllm, url: "http://127.0.0.1:8001", onDrain: auto}]
//   devicePool: {enabled: true, backend: auto, size: 8Gi, blockSize: 2Mi, readerThreads: 0}

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "engines/engine.h"

namespace tessera::agent {

// GPUs the agent reports when it runs without NVML (a laptop, CI, a simulator fleet). They
// are reported as virtual: the heartbeat never claims telemetry it did not measure.
struct VirtualGpuDecl {
  std::string type;  // a catalogue name or alias
  int count = 1;
  int nvlinkGroup = -1;
  int numaNode = -1;
  std::optional<std::int64_t> memoryMib;  // default: the type's
};

struct CacheConfig {
  std::string dir = "/var/lib/tessera/cache";
  std::int64_t diskCapacityBytes = std::int64_t{100} << 30;
  std::int64_t hostMemoryCapacityBytes = 0;  // 0: no host-memory tier
  double warnAtFraction = 0.9;
  std::int64_t minFreeDiskBytes = std::int64_t{1} << 30;  // warn when the filesystem has less
};

// Where weights come from. A directory source holds one folder (or one file) per model,
// named after the model; an HTTP source serves <url>/<model>/manifest.json and the files it
// lists (docs/agent.md, "Model sources").
struct ModelSourceConfig {
  std::string name;
  std::string path;  // a directory or mounted volume
  std::string url;   // http(s)://host[:port]/prefix
};

enum class GpuDiscovery { kAuto, kNvml, kVirtual };

// The kubelet device plugin the agent hosts (docs/agent.md, "Device plugin").
struct DevicePluginConfig {
  std::optional<bool> enabled;  // unset ("auto"): on when `dir` exists
  std::string dir = "/var/lib/kubelet/device-plugins";
  // One plugin per resource: "tessera.io/gpus" (slotsPerGpu slots per GPU) and/or
  // "nvidia.com/gpu" (whole GPUs, one device each).
  std::vector<std::string> resources = {"tessera.io/gpus"};
  int slotsPerGpu = 4;
  std::string mpsPipeDirectory = "/tmp/nvidia-mps";
  Millis watchMs = 1'000;  // kubelet restart check, retries of registration and confirmations
  // Kubelet's PodResources socket, read every watch to correct the books when twins swapped
  // (docs/device-plugin.md); "": not read.
  std::string podResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";
};

// Tessera as a Kubernetes DRA driver on this node (docs/dra.md): ResourceSlices of the node's
// GPUs, kubelet plugin registration and the DRAPlugin v1 service.
//
// GPU mode of the node: `device-plugin` (draDriver off, the default), `dra` (draDriver on and
// no `gpus` list: every GPU is the driver's, and devicePlugin's auto setting is off), or
// `both` (draDriver on with `gpus` naming the driver's GPUs; the device plugin serves the
// others). A device plugin switched on explicitly next to a driver that takes every GPU is a
// configuration error: one GPU must not be handed out by both.
struct DraDriverConfig {
  bool enabled = false;
  std::string registryDir = "/var/lib/kubelet/plugins_registry";
  std::string pluginDir = "/var/lib/kubelet/plugins";
  std::string cdiDir = "/var/run/cdi";  // where CDI spec files go (the runtime reads them)
  std::vector<std::string> gpus;        // GPU ids the driver publishes; empty: all
  // The API server (ResourceSlices, ResourceClaims); empty: the pod's service account.
  std::string kubeApiServer;
  std::string kubeTokenFile;
  std::string kubeCaFile;
  Millis watchMs = 1'000;  // socket check (kubelet restarts)
};

// What the drain does to an engine once work in flight is over.
enum class EngineDrain {
  kAuto,    // sleep where the engine can (vLLM), else unload its models (Triton)
  kNone,    // leave it serving
  kSleep,   // vLLM sleep level 1 (weights to host memory)
  kUnload,  // unload every loaded model (Triton) or LoRA adapter (vLLM)
};

// One inference server on the node that the agent drives (docs/engines.md).
struct AgentEngineConfig {
  std::string name;  // default: "<kind>-<index>"
  engines::EngineConfig engine;
  EngineDrain onDrain = EngineDrain::kAuto;
};

// The device memory pool the agent pre-allocates and loads models into (docs/agent.md,
// "Device pool"; src/devpool).
struct DevicePoolConfig {
  // unset ("auto"): a pool that cannot be created is logged and the agent runs without one;
  // true: it fails the start-up; false: no pool.
  std::optional<bool> enabled = true;
  std::string backend = "auto";  // host | cuda | auto
  std::int64_t sizeBytes = 0;    // 0: the default share (device_pool_host.h)
  std::int64_t blockBytes = std::int64_t{2} << 20;
  int readerThreads = 0;  // 0: the loader's default
};

struct AgentConfig {
  std::string nodeName;  // empty: the host name
  std::string server = "http://127.0.0.1:8080";
  std::optional<std::string> tokenFile;
  std::optional<std::string> tlsCa;
  Millis heartbeatMs = 10'000;
  std::int64_t cpuMilli = 0;
  std::int64_t hostMemoryMib = 0;
  std::map<std::string, std::string> labels;
  GpuDiscovery discovery = GpuDiscovery::kAuto;
  std::string nvmlLibrary = "libnvidia-ml.so.1";
  std::vector<VirtualGpuDecl> virtualGpus;
  CacheConfig cache;
  std::vector<ModelSourceConfig> modelSources;
  std::vector<std::string> preload;
  std::string admin = "127.0.0.1:9190";
  Millis stopNewWorkMs = 10'000;
  Millis inFlightMaxMs = 60'000;
  std::string logFormat = "text";
  DevicePluginConfig devicePlugin;
  DraDriverConfig draDriver;
  std::vector<AgentEngineConfig> engines;
  DevicePoolConfig devicePool;
};

// Reads the file over `base` (the defaults, or what earlier layers set): keys the file
// leaves out keep base's values. Unknown keys are errors naming the file, line and path.
Result<AgentConfig> parseAgentYaml(const std::string& text, const std::string& sourceName,
                                   AgentConfig base = {});
Result<AgentConfig> loadAgentFile(const std::string& path, AgentConfig base = {});

// The admin address, HOST:PORT on a loopback host (127.0.0.1, ::1, localhost; port 0: any);
// errors start with "admin: ".
Result<std::pair<std::string, int>> parseAdminAddress(const std::string& address);

// "10s"-free seconds as the file writes them (heartbeatSeconds: 2.5) to Millis.
Millis secondsToMillis(double seconds);

const char* discoveryName(GpuDiscovery d);
Result<GpuDiscovery> parseDiscovery(const std::string& text);
const char* engineDrainName(EngineDrain d);
Result<EngineDrain> parseEngineDrain(const std::string& text);

}  // namespace tessera::agent
