#pragma once
// GPU-level filters: whether one GPU of a node that passed the node filters can take its
// share of the replica. See docs/plugins.md for what each checks.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/gpu_catalog.h"
#include "sched/plugin.h"

namespace tessera::sched {

// The GPU's catalogue type is one of request.gpuTypes (names or aliases, any case).
class GpuTypeFilter final : public FilterPlugin {
 public:
  static constexpr std::string_view kName = "GpuType";
  static Result<std::unique_ptr<FilterPlugin>> create(const PluginArgs& args);

  std::string_view name() const override { return kName; }
  std::uint8_t checks() const override { return kGpuCheck; }
  bool passGpu(const DecisionContext& ctx, GpuId gpu) const override;
  std::string whyGpu(const DecisionContext& ctx, GpuId gpu) const override;

 private:
  // Which catalogue indices the current request accepts. Resolving names is string work,
  // so it is done once per distinct request and reused for every GPU of the decision.
  const std::vector<std::uint8_t>& allowedTypes(const DecisionContext& ctx) const;
  mutable const model::GpuCatalog* cachedCatalog_ = nullptr;
  mutable int cachedCatalogSize_ = -1;
  mutable std::vector<std::string> cachedNames_;
  mutable std::vector<std::uint8_t> allowed_;
};

// The per-GPU memory need fits: free memory on a plain GPU, the largest free or creatable
// instance on a MIG GPU. Exclusive-only requests need a GPU without replicas; a GPU held
// exclusively takes nothing else; a GPU of unknown capacity takes only memory-less requests.
class MemoryFitFilter final : public FilterPlugin {
 public:
  static constexpr std::string_view kName = "MemoryFit";
  static Result<std::unique_ptr<FilterPlugin>> create(const PluginArgs& args);

  std::string_view name() const override { return kName; }
  std::uint8_t checks() const override { return kGpuCheck; }
  bool passGpu(const DecisionContext& ctx, GpuId gpu) const override;
  std::string whyGpu(const DecisionContext& ctx, GpuId gpu) const override;
};

// Booked compute plus the replica's stays under a cap. mode=hard: cap × the card;
// mode=soft: only the card itself (the ComputeHeadroom score then penalises going past cap).
class ComputeCapFilter final : public FilterPlugin {
 public:
  static constexpr std::string_view kName = "ComputeCap";
  static Result<std::unique_ptr<FilterPlugin>> create(const PluginArgs& args);
  ComputeCapFilter(double cap, bool hard);

  std::string_view name() const override { return kName; }
  std::uint8_t checks() const override { return kGpuCheck; }
  bool passGpu(const DecisionContext& ctx, GpuId gpu) const override;
  std::string whyGpu(const DecisionContext& ctx, GpuId gpu) const override;

 private:
  std::int32_t limitMilli(std::int32_t cardMilli) const;
  double cap_;
  std::int64_t capPermille_;
  bool hard_;
};

// Booked memory bandwidth plus the replica's fits the card's, when both are known.
class BandwidthFilter final : public FilterPlugin {
 public:
  static constexpr std::string_view kName = "Bandwidth";
  static Result<std::unique_ptr<FilterPlugin>> create(const PluginArgs& args);

  std::string_view name() const override { return kName; }
  std::uint8_t checks() const override { return kGpuCheck; }
  bool passGpu(const DecisionContext& ctx, GpuId gpu) const override;
  std::string whyGpu(const DecisionContext& ctx, GpuId gpu) const override;
};

// The GPU's sharing mode suits the request: a MIG GPU needs a request that allows MIG and an
// acceptable free or creatable instance (chooseMigSlice); a plain GPU needs a request that
// allows shared or exclusive use.
class MigSliceFilter final : public FilterPlugin {
 public:
  static constexpr std::string_view kName = "MigSlice";
  static Result<std::unique_ptr<FilterPlugin>> create(const PluginArgs& args);

  std::string_view name() const override { return kName; }
  std::uint8_t checks() const override { return kGpuCheck; }
  bool passGpu(const DecisionContext& ctx, GpuId gpu) const override;
  std::string whyGpu(const DecisionContext& ctx, GpuId gpu) const override;
};

// A time-sliced GPU (timeSlicingReplicas > 0) holds fewer replicas than its limit.
class TimeSlicingFilter final : public FilterPlugin {
 public:
  static constexpr std::string_view kName = "TimeSlicing";
  static Result<std::unique_ptr<FilterPlugin>> create(const PluginArgs& args);

  std::string_view name() const override { return kName; }
  std::uint8_t checks() const override { return kGpuCheck; }
  bool passGpu(const DecisionContext& ctx, GpuId gpu) const override;
  std::string whyGpu(const DecisionContext& ctx, GpuId gpu) const override;
};

}  // namespace tessera::sched
