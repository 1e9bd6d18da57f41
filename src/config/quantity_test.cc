#include "config/quantity.h"

#include <gtest/gtest.h>

namespace tessera::config {
namespace {

std::int64_t mib(std::string_view text, Rounding rounding = Rounding::kUp) {
  auto value = parseMemoryQuantity(text, rounding);
  EXPECT_TRUE(value) << text << ": " << value.error().message;
  return value.value_or(-1);
}

std::string problem(std::string_view text) {
  auto value = parseMemoryQuantity(text, Rounding::kUp);
  EXPECT_FALSE(value) << text << " parsed as " << value.value_or(0);
  return value ? "" : value.error().message;
}

TEST(MemoryQuantity, BinaryUnitsAreExact) {
  EXPECT_EQ(mib("512Mi"), 512);
  EXPECT_EQ(mib("512MiB"), 512);
  EXPECT_EQ(mib("80Gi"), 81920);
  EXPECT_EQ(mib("80GiB"), 81920);
  EXPECT_EQ(mib("1.5Gi"), 1536);
  EXPECT_EQ(mib("2Ti"), 2 * 1024 * 1024);
  EXPECT_EQ(mib("0.5TiB"), 512 * 1024);
  EXPECT_EQ(mib("0Gi"), 0);
}

TEST(MemoryQuantity, DecimalUnitsRoundAsAsked) {
  // 40 GB = 40e9 bytes = 38146.97 MiB.
  EXPECT_EQ(mib("40GB", Rounding::kDown), 38146);
  EXPECT_EQ(mib("40GB", Rounding::kUp), 38147);
  // 1 MB = 0.95 MiB: a need rounds up to a whole MiB, a capacity down to nothing.
  EXPECT_EQ(mib("1MB", Rounding::kUp), 1);
  EXPECT_EQ(mib("1MB", Rounding::kDown), 0);
  EXPECT_EQ(mib("1TB", Rounding::kDown), 953674);
  // 2^20 bytes expressed in MB lands exactly: no rounding either way.
  EXPECT_EQ(mib("1.048576MB", Rounding::kUp), 1);
  EXPECT_EQ(mib("1.048576MB", Rounding::kDown), 1);
}

TEST(MemoryQuantity, SpacesAroundTheUnitAreAllowed) {
  EXPECT_EQ(mib("80 Gi"), 81920);
  EXPECT_EQ(mib(" 80Gi "), 81920);
}

TEST(MemoryQuantity, RejectsMissingOrUnknownUnits) {
  EXPECT_EQ(problem("80"), "needs a unit (Mi, MiB, Gi, GiB, Ti, TiB, MB, GB, TB), got \"80\"");
  EXPECT_EQ(problem("80gb"),
            "unknown unit \"gb\" in \"80gb\"; units: Mi, MiB, Gi, GiB, Ti, TiB, MB, GB, TB");
  EXPECT_EQ(problem("80Gb"),
            "unknown unit \"Gb\" in \"80Gb\"; units: Mi, MiB, Gi, GiB, Ti, TiB, MB, GB, TB");
  EXPECT_EQ(problem("80Ki"),
            "unknown unit \"Ki\" in \"80Ki\"; units: Mi, MiB, Gi, GiB, Ti, TiB, MB, GB, TB");
  EXPECT_EQ(problem("1.2.3Gi"),
            "unknown unit \".3Gi\" in \"1.2.3Gi\"; units: Mi, MiB, Gi, GiB, Ti, TiB, MB, GB, TB");
}

TEST(MemoryQuantity, RejectsSignsAndMissingNumbers) {
  EXPECT_EQ(problem("-5Gi"), "must not be negative, got \"-5Gi\"");
  EXPECT_EQ(problem("+5Gi"), "expected a number and a unit, got \"+5Gi\"");
  EXPECT_EQ(problem("Gi"), "expected a number and a unit, got \"Gi\"");
  EXPECT_EQ(problem(""), "expected a number and a unit, got \"\"");
  EXPECT_EQ(problem("1234567890123456789Gi"), "number too long in \"1234567890123456789Gi\"");
}

}  // namespace
}  // namespace tessera::config
