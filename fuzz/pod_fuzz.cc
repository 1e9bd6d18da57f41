// Fuzz target: k8s::readPod, the v1.Pod → placement request decoder behind every extender
// verb. The input is decoded as the HTTP server decodes a body; when it is an object with a
// `Pod` member (an extender argument, as in the golden payloads) that member is the pod,
// otherwise the whole document is.
//
// Checks beyond "no crash, no sanitizer report, no exception": an accepted pod has a replica
// id "<namespace>/<name>", and when Tessera manages it every figure is in range: 1 to 64
// GPUs, compute 0 to 1000 per GPU, memory, CPU and host memory neither negative nor beyond
// what any machine has (so no later sum or safety factor overflows); errors name a path under
// `Pod`; the answer is the same when decoded twice.

#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "k8s/pod.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto doc = tessera::fuzz::decodeBody(data, size);
  if (!doc) return 0;
  const nlohmann::json* pod = tessera::k8s::fieldIgnoringCase(*doc, "Pod");
  if (pod == nullptr) pod = &*doc;
  const tessera::k8s::ModelLookup models = &tessera::fuzz::SmallCluster::lookup;
  auto r = tessera::k8s::readPod(*pod, models);
  if (!r) {
    TESSERA_FUZZ_CHECK(r.error().message.starts_with("Pod"), r.error().message);
    tessera::fuzz::checkSerialises(nlohmann::json(r.error().message), "readPod error");
    return 0;
  }
  TESSERA_FUZZ_CHECK(r->request.replicaId == r->ns + "/" + r->name, r->request.replicaId);
  TESSERA_FUZZ_CHECK(!r->name.empty() && !r->ns.empty(), r->request.replicaId);
  if (r->managed) {
    const auto& m = r->request.model;
    const std::string what =
        r->request.replicaId + ": gpus=" + std::to_string(m.gpusPerReplica) +
        " compute=" + std::to_string(m.computeMilli) + " weights=" + std::to_string(m.weightsMib) +
        " cpu=" + std::to_string(m.cpuMilli) + " host=" + std::to_string(m.hostMemoryMib);
    constexpr std::int64_t kTiBInMib = 1024 * 1024;
    TESSERA_FUZZ_CHECK(m.gpusPerReplica >= 1 && m.gpusPerReplica <= 64, what);
    TESSERA_FUZZ_CHECK(m.computeMilli >= 0 && m.computeMilli <= 1000, what);
    TESSERA_FUZZ_CHECK(m.weightsMib >= 0 && m.weightsMib <= 64 * 16 * kTiBInMib, what);
    TESSERA_FUZZ_CHECK(m.memoryPerGpuMib() >= 0 && m.memoryPerGpuMib() <= 16 * kTiBInMib, what);
    TESSERA_FUZZ_CHECK(m.cpuMilli >= 0 && m.cpuMilli <= 10'000'000, what);
    TESSERA_FUZZ_CHECK(m.hostMemoryMib >= 0 && m.hostMemoryMib <= 256 * kTiBInMib, what);
  }
  auto again = tessera::k8s::readPod(*pod, models);
  TESSERA_FUZZ_CHECK(
      again && again->request.replicaId == r->request.replicaId &&
          again->request.model.memoryPerGpuMib() == r->request.model.memoryPerGpuMib(),
      "readPod is not deterministic");
  return 0;
}
