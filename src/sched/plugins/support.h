#pragma once
// Helpers shared by the built-in plugins: strict reading of plugin arguments, number
// formatting for explanations, and what an option does to one of its GPUs.

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/result.h"
#include "sched/cluster_state.h"
#include "sched/plugin.h"

namespace tessera::sched {

// Reads one plugin's arguments. Unknown keys and values of the wrong type or out of range are
// errors that name the plugin and the key, so a typo in a profile fails at start-up instead
// of silently running with defaults. A null value counts as "no arguments".
class ArgReader {
 public:
  static Result<ArgReader> open(std::string_view plugin, const PluginArgs& args,
                                std::initializer_list<std::string_view> known);

  // A number in [min, max]; `fallback` when the key is absent.
  Result<double> number(std::string_view key, double fallback, double min, double max) const;
  // An integer in [min, max]; `fallback` when the key is absent.
  Result<std::int64_t> integer(std::string_view key, std::int64_t fallback, std::int64_t min,
                               std::int64_t max) const;
  // One of `allowed` (exact spelling); `fallback` when the key is absent.
  Result<std::string> choice(std::string_view key, std::string_view fallback,
                             std::initializer_list<std::string_view> allowed) const;
  // The raw value, or nullptr when absent.
  const PluginArgs* find(std::string_view key) const;

  const std::string& plugin() const { return plugin_; }

 private:
  ArgReader(std::string plugin, const PluginArgs* args) : plugin_(std::move(plugin)), args_(args) {}
  std::string plugin_;
  const PluginArgs* args_;  // an object, or nullptr for "no arguments"
};

// Factory for a plugin that takes no arguments: any argument given is an error, so that a
// profile naming a non-existent option fails loudly.
template <typename Plugin, typename Base>
Result<std::unique_ptr<Base>> createWithoutArgs(const PluginArgs& args) {
  auto reader = ArgReader::open(Plugin::kName, args, {});
  if (!reader) return fail(reader.error());
  return std::make_unique<Plugin>();
}

// A decimal without trailing zeros ("0.8", "1.25", "3"), at most `maxDecimals` places.
std::string formatDecimal(double value, int maxDecimals = 2);

// "19661 MiB (16384 × 1.2)" — the per-GPU memory need with its derivation when the safety
// factor changed it.
std::string describeMemoryNeed(const Needs& needs);

// "node-a/3": how explanations name a GPU.
std::string gpuLabel(const ClusterState& state, GpuId gpu);

// The GPUs an option uses (its first gpuCount entries).
inline std::span<const GpuId> optionGpus(const Option& option) {
  const auto n = static_cast<std::size_t>(option.gpuCount < 0 ? 0 : option.gpuCount);
  return std::span<const GpuId>(option.gpus).first(n < option.gpus.size() ? n : option.gpus.size());
}

// What placing an option does to one of its GPUs: free memory and compute before and after.
// It follows what the engine books (PlacementEngine::toPlacement): a shared placement takes
// the per-GPU need; a MIG placement its slice's memory and its share of the SMs; an exclusive
// one everything still free. Values after placement are clamped at 0 so that scores stay
// meaningful even for options a filter would have rejected.
struct GpuEffect {
  std::int64_t freeMibBefore = 0;
  std::int64_t freeMibAfter = 0;
  std::int32_t freeComputeBefore = 0;
  std::int32_t freeComputeAfter = 0;
};
GpuEffect effectOn(const DecisionContext& ctx, const Option& option, GpuId gpu);

// Memory and compute an option takes on one of its GPUs (see effectOn).
std::int64_t memoryTakenMib(const DecisionContext& ctx, const Option& option, GpuId gpu);
std::int32_t computeTakenMilli(const DecisionContext& ctx, const Option& option, GpuId gpu);

// Inline: the score loops call it once per option GPU, and the shared case is two
// subtractions.
inline GpuEffect effectOn(const DecisionContext& ctx, const Option& option, GpuId gpu) {
  const GpuRecord& g = ctx.state.gpu(gpu);
  GpuEffect e;
  e.freeMibBefore = std::max<std::int64_t>(0, g.freeMemoryMib());
  e.freeComputeBefore = std::max<std::int32_t>(0, g.freeComputeMilli());
  if (option.mode == model::SharingMode::kExclusive) return e;  // nothing left after
  const bool shared = option.mode == model::SharingMode::kShared;
  const std::int64_t memory = shared ? ctx.needs.memoryMib : memoryTakenMib(ctx, option, gpu);
  const std::int32_t compute =
      shared ? ctx.needs.computeMilli : computeTakenMilli(ctx, option, gpu);
  e.freeMibAfter = std::max<std::int64_t>(0, e.freeMibBefore - memory);
  e.freeComputeAfter = std::max<std::int32_t>(0, e.freeComputeBefore - compute);
  return e;
}

}  // namespace tessera::sched
