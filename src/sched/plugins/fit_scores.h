#pragma once
// Score plugins about how full the option's GPUs end up: bin packing (BestFit), its
// opposite (Spread) and compute headroom. See docs/plugins.md.

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "common/result.h"
#include "sched/plugin.h"

namespace tessera::sched {

// Least memory left free on the option's GPUs after placement wins (packing keeps whole
// GPUs free for large models); free compute breaks ties. Min-max normalised.
class BestFitScore final : public ScorePlugin {
 public:
  static constexpr std::string_view kName = "BestFit";
  static Result<std::unique_ptr<ScorePlugin>> create(const PluginArgs& args);

  std::string_view name() const override { return kName; }
  void score(const DecisionContext& ctx, std::span<const Option> options,
             std::span<std::int64_t> out) const override;
  void normalize(std::span<std::int64_t> scores) const override;
};

// Most memory left free wins (then most compute): replicas land on the emptiest GPUs, so a
// GPU failure takes fewer of them down. Min-max normalised.
class SpreadScore final : public ScorePlugin {
 public:
  static constexpr std::string_view kName = "Spread";
  static Result<std::unique_ptr<ScorePlugin>> create(const PluginArgs& args);

  std::string_view name() const override { return kName; }
  void score(const DecisionContext& ctx, std::span<const Option> options,
             std::span<std::int64_t> out) const override;
  void normalize(std::span<std::int64_t> scores) const override;
};

// 100 while booked + needed compute stays within cap × the card, falling linearly to 0 at
// the full card; an option scores as its most loaded GPU. Pairs with ComputeCap mode=soft.
class ComputeHeadroomScore final : public ScorePlugin {
 public:
  static constexpr std::string_view kName = "ComputeHeadroom";
  static Result<std::unique_ptr<ScorePlugin>> create(const PluginArgs& args);
  explicit ComputeHeadroomScore(double cap);

  std::string_view name() const override { return kName; }
  void score(const DecisionContext& ctx, std::span<const Option> options,
             std::span<std::int64_t> out) const override;

 private:
  std::int64_t capPermille_;
};

}  // namespace tessera::sched
