#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sched/plugin.h"

namespace tessera::sched {
namespace {

class NeverFilter final : public FilterPlugin {
 public:
  std::string_view name() const override { return "Never"; }
  bool passGpu(const DecisionContext&, GpuId) const override { return false; }
  std::string whyGpu(const DecisionContext&, GpuId) const override { return "never"; }
};

Result<std::unique_ptr<FilterPlugin>> makeNever(const PluginArgs&) {
  return std::make_unique<NeverFilter>();
}

TEST(PluginRegistryTest, AddsAndMakesCustomPlugins) {
  PluginRegistry registry;
  ASSERT_TRUE(registry.addFilter("Never", makeNever));
  auto plugin = registry.makeFilter("Never", PluginArgs::object());
  ASSERT_TRUE(plugin);
  EXPECT_EQ((*plugin)->name(), "Never");
  EXPECT_EQ(registry.filterNames(), std::vector<std::string>{"Never"});
  EXPECT_TRUE(registry.scoreNames().empty());
}

TEST(PluginRegistryTest, RefusesDuplicatesEmptyNamesAndMissingFactories) {
  PluginRegistry registry;
  registerBuiltinPlugins(registry);
  auto dup = registry.addFilter("MemoryFit", makeNever);
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(dup.error().message, "filter plugin MemoryFit is already registered");
  EXPECT_FALSE(registry.addFilter("", makeNever));
  EXPECT_FALSE(registry.addScore("Empty", ScoreFactory()));
}

TEST(PluginRegistryTest, UnknownNamesListWhatExists) {
  PluginRegistry registry;
  ASSERT_TRUE(registry.addFilter("Never", makeNever));
  auto missing = registry.makeFilter("Sometimes", PluginArgs::object());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(missing.error().message, "unknown filter plugin 'Sometimes' (known: Never)");
  auto noScore = registry.makeScore("BestFit", PluginArgs::object());
  ASSERT_FALSE(noScore);
  EXPECT_EQ(noScore.error().message, "unknown score plugin 'BestFit' (known: none)");
}

TEST(PluginRegistryTest, FactoryErrorsAndNullResultsSurface) {
  PluginRegistry registry;
  registerBuiltinPlugins(registry);
  auto bad = registry.makeScore("ComputeHeadroom", PluginArgs{{"cap", 0}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("ComputeHeadroom: argument 'cap' must be in"),
            std::string::npos)
      << bad.error().message;
  ASSERT_TRUE(
      registry.addFilter("Null", [](const PluginArgs&) -> Result<std::unique_ptr<FilterPlugin>> {
        return std::unique_ptr<FilterPlugin>();
      }));
  auto null = registry.makeFilter("Null", PluginArgs::object());
  ASSERT_FALSE(null);
  EXPECT_EQ(null.error().code, ErrorCode::kInternal);
}

}  // namespace
}  // namespace tessera::sched
