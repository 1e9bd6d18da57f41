#pragma once
// Engine adapters: the node agent drives each inference server on its node through the
// server's own load controls, never by restarting it.
//
//  - TritonEngine (triton_engine.h): KServe v2 health/readiness and Triton's model
//    repository extension (index, load, unload); versions are switched by reloading with
//    a `version_policy` override, which Triton applies without losing availability.
//  - VllmEngine (vllm_engine.h): vLLM's sleep mode (sleep, wake_up, is_sleeping) and its
//    runtime LoRA adapter endpoints; the base model is fixed when vLLM starts.
//
// Every call is one or more HTTP requests with a deadline. Errors name the engine, its URL
// and the request, and carry the server's own message. Codes: a refusal the server
// explains is kInvalidArgument (400), kNotFound (404), kAlreadyExists (a duplicate LoRA
// adapter) or kFailedPrecondition (the server lacks the feature, e.g. vLLM without
// VLLM_SERVER_DEV_MODE); a server that cannot be reached, hangs past the deadline, answers
// 5xx or answers something that is not the protocol is kInternal. Only requests that
// change nothing are retried (docs/engines.md).
//
// Threading: an Engine holds no mutable state of its own besides its connection settings;
// calls may come from several threads at once (each call opens its own connection).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace tessera::engines {

// Where a model (or a version of it, or an adapter) is, as the server reports it.
enum class ModelPhase {
  kAvailable,  // in the repository, never loaded (Triton index entry with a name only)
  kLoading,
  kReady,  // serving
  kUnloading,
  kUnavailable,  // unloaded or failed to load; `reason` says which
  kSleeping,     // vLLM base model (and its adapters) while the engine sleeps
};
const char* modelPhaseName(ModelPhase phase);

struct ModelState {
  std::string name;
  std::optional<std::int64_t> version;  // Triton model version; none for vLLM
  ModelPhase phase = ModelPhase::kAvailable;
  std::string reason;  // the server's words, when it gives any
  std::string parent;  // vLLM: the base model a LoRA adapter runs on; empty otherwise
};

struct LoadRequest {
  std::string model{};
  // Triton: serve exactly this version. Sent as the config override's version_policy
  // {"specific": {"versions": [v]}}; Triton loads it and then retires the versions the
  // policy no longer names, without a gap in availability.
  std::optional<std::int64_t> version{};
  // Triton: a model configuration (JSON text) used instead of the repository's
  // config.pbtxt. With `version` but without this, the adapter reuses the configuration
  // of the loaded model (GET v2/models/<model>/config).
  std::string configJson{};
  // Triton: files of an override model directory, relative path ("1/model.onnx") to raw
  // bytes; sent base64-encoded as "file:<path>" parameters. Triton needs `configJson` too.
  std::map<std::string, std::string> files{};
  // vLLM: the LoRA adapter's directory (as the vLLM server sees it).
  std::string path{};
  // vLLM: replace an adapter of the same name in place (`load_inplace`).
  bool replace = false;
};

// vLLM sleep levels: 1 moves the weights to host memory and drops the KV cache (a wake is a
// copy back); 2 drops both (a wake needs the weights reloaded, e.g. after an update).
enum class SleepLevel { kOffloadWeights = 1, kDiscardWeights = 2 };

// What vLLM's wake_up may restore on its own (`tags=`); empty = everything.
enum class WakeTag { kWeights, kKvCache };

struct Capabilities {
  bool repository = false;  // load/unload whole models by name (Triton)
  bool versions = false;    // load a specific version (Triton)
  bool adapters = false;    // load/unload LoRA adapters on a fixed base model (vLLM)
  bool sleep = false;       // sleep/wake the whole engine (vLLM)
};

class Engine {
 public:
  virtual ~Engine() = default;

  virtual std::string_view kind() const = 0;  // "triton", "vllm"
  virtual const std::string& url() const = 0;
  virtual Capabilities capabilities() const = 0;

  // The server answers and says it can serve (Triton v2/health/ready, vLLM /health).
  // A refused connection or a timeout is an error, not false.
  virtual Result<bool> healthy() = 0;
  // Every model, version and adapter the server knows, in its order.
  virtual Result<std::vector<ModelState>> list() = 0;
  // Returns once the server reports the load finished (both servers load synchronously).
  virtual Result<void> load(const LoadRequest& request) = 0;
  // Triton acknowledges at once and finishes unloading in the background (the model shows
  // kUnloading, then kUnavailable); vLLM drops an adapter at once.
  virtual Result<void> unload(const std::string& model) = 0;
  // Whether the model (a version of it, where versions exist) can take requests now.
  virtual Result<bool> ready(const std::string& model,
                             std::optional<std::int64_t> version = std::nullopt) = 0;

  // Sleep mode; kFailedPrecondition where the engine has none.
  virtual Result<void> sleep(SleepLevel level);
  virtual Result<void> wakeUp(const std::vector<WakeTag>& tags = {});
  virtual Result<bool> sleeping();
};

// One engine entry of the agent's configuration.
struct EngineConfig {
  std::string kind{};              // "triton" | "vllm"
  std::string url{};               // "http://127.0.0.1:8000" (https too; a path prefix is kept)
  Millis timeoutMs = 5'000;        // connect, and each wait for bytes, on quick calls
  Millis loadTimeoutMs = 600'000;  // the same for load, unload, sleep and wake-up
  int retries = 2;                 // extra tries of a request that changes nothing
  Millis retryBackoffMs = 100;     // before the first retry; doubles after each
};

// Checks the entry (kind known, URL http(s) with a host, timeouts positive, retries >= 0)
// and builds the adapter. Nothing is contacted.
Result<std::unique_ptr<Engine>> makeEngine(const EngineConfig& config);

}  // namespace tessera::engines
