#include "sim/serving_model.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace tessera::sim {
namespace {

constexpr double kBytesPerMib = 1024.0 * 1024.0;

struct EfficiencyRow {
  std::string_view type;
  GpuEfficiency efficiency;
};

// Assumptions, not measurements (docs/serving-simulator.md, "GPU table"): prefill reaches
// 40-50 % of dense FP16 peak (Ampere's smaller peak is easier to fill), a decode step 70-75 % of
// HBM bandwidth, the range public vLLM / TensorRT-LLM benchmarks of 7-8 B models report.
constexpr std::array<EfficiencyRow, 6> kEfficiency = {{
    {"A100-40GB", {0.50, 0.75}},
    {"A100-80GB", {0.50, 0.75}},
    {"H100-80GB", {0.40, 0.70}},
    {"H200-141GB", {0.40, 0.70}},
    {"L40S", {0.45, 0.70}},
    {"L4", {0.45, 0.70}},
}};

}  // namespace

GpuEfficiency gpuEfficiency(std::string_view gpuType) {
  for (const auto& row : kEfficiency) {
    if (row.type == gpuType) return row.efficiency;
  }
  return {};
}

double ReplicaPerf::prefillSeconds(std::int64_t tokens) const {
  const auto l = static_cast<double>(tokens);
  const double flops = l * flopsPerToken + attentionFlopsPerPair * l * l / 2;
  return std::max(flops / flopsPerSec, weightsBytes / bytesPerSec);
}

Result<ReplicaPerf> replicaPerf(const ServingModel& model, const model::GpuType& gpu) {
  if (!gpu.memoryMib || !gpu.fp16Tflops || !gpu.memoryBandwidthGBps) {
    return fail(Error::invalid("GPU type " + gpu.name +
                               ": the catalogue lacks its memory, FP16 throughput or bandwidth, "
                               "so its serving speed is unknown"));
  }
  const GpuEfficiency eff = gpuEfficiency(gpu.name);
  ReplicaPerf p;
  p.flopsPerSec = *gpu.fp16Tflops * 1e12 * eff.prefillMfu;
  p.bytesPerSec = *gpu.memoryBandwidthGBps * 1e9 * eff.decodeHbm;
  p.weightsBytes = model.weightsBytes();
  p.flopsPerToken = model.flopsPerToken();
  p.attentionFlopsPerPair = model.attentionFlopsPerPair();
  p.kvBytesPerToken = static_cast<double>(model.kvBytesPerToken);
  p.memoryMib = static_cast<std::int64_t>(
      std::floor(static_cast<double>(*gpu.memoryMib) * model.gpuMemoryUtilization));
  const std::int64_t kvMib = p.memoryMib - model.weightsMib - model.overheadMib;
  if (kvMib <= 0 || model.kvBytesPerToken <= 0) {
    return fail(Error::invalid("model " + model.name + " does not fit on a " + gpu.name + ": " +
                               std::to_string(p.memoryMib) + " MiB usable, weights " +
                               std::to_string(model.weightsMib) + " + overhead " +
                               std::to_string(model.overheadMib) + " MiB leave no KV cache"));
  }
  p.kvCapacityTokens = static_cast<std::int64_t>(static_cast<double>(kvMib) * kBytesPerMib /
                                                 static_cast<double>(model.kvBytesPerToken));
  p.maxNumSeqs = model.maxNumSeqs;
  p.maxBatchedTokens = model.maxBatchedTokens;
  return p;
}

const char* cacheTierName(CacheTier tier) {
  switch (tier) {
    case CacheTier::kHostMemory:
      return "host-memory";
    case CacheTier::kLocalDisk:
      return "local-disk";
    case CacheTier::kRemote:
      return "remote";
  }
  return "?";
}

double LoadTimes::seconds(CacheTier tier, double weightsBytes) const {
  const double gbps = tier == CacheTier::kHostMemory  ? hostMemoryGBps
                      : tier == CacheTier::kLocalDisk ? localDiskGBps
                                                      : remoteGBps;
  return engineStartupSeconds + weightsBytes / (gbps * 1e9);
}

Result<ReplicaPerf> sharePerf(const ReplicaPerf& whole, const ServingModel& model, double share) {
  if (!(share > 0 && share <= 1)) {
    return fail(Error::invalid("GPU share must be in (0, 1], got " + std::to_string(share)));
  }
  ReplicaPerf p = whole;
  p.flopsPerSec = whole.flopsPerSec * share;
  p.bytesPerSec = whole.bytesPerSec * share;
  p.memoryMib =
      static_cast<std::int64_t>(std::floor(static_cast<double>(whole.memoryMib) * share + 1e-9));
  const std::int64_t kvMib = p.memoryMib - model.weightsMib - model.overheadMib;
  if (kvMib <= 0 || model.kvBytesPerToken <= 0) {
    return fail(
        Error::invalid("model " + model.name + " does not fit on a " + std::to_string(share) +
                       " GPU share: " + std::to_string(p.memoryMib) + " MiB leave no KV cache"));
  }
  p.kvCapacityTokens = static_cast<std::int64_t>(static_cast<double>(kvMib) * kBytesPerMib /
                                                 static_cast<double>(model.kvBytesPerToken));
  return p;
}

model::PlacementRequest replicaRequest(const ServingModel& model, const ReplicaPerf& perf,
                                       const std::string& replicaId, const std::string& gpuType,
                                       const std::string& deployment, double share) {
  model::PlacementRequest r;
  r.replicaId = replicaId;
  r.deployment = deployment;
  r.gpuTypes = {gpuType};
  r.model.name = model.name;
  r.model.weightsMib = model.weightsMib;
  r.model.overheadMib = model.overheadMib;
  r.model.kvCacheMib = perf.memoryMib - model.weightsMib - model.overheadMib;
  r.model.gpusPerReplica = 1;
  if (share < 1) {
    r.model.computeMilli = static_cast<std::int32_t>(std::lround(share * 1000));
    r.model.sharing = static_cast<model::SharingModes>(model::SharingMode::kShared);
  } else {
    r.model.computeMilli = 1000;
    r.model.sharing = static_cast<model::SharingModes>(model::SharingMode::kExclusive);
  }
  return r;
}

}  // namespace tessera::sim
