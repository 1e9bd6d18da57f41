#include "k8s/quantity.h"

#include <gtest/gtest.h>

namespace tessera::k8s {
namespace {

TEST(Quantity, ParsesEverySuffixKind) {
  struct Case {
    const char* text;
    double value;
  };
  for (const Case& c :
       {Case{"2", 2}, Case{"+3", 3}, Case{"1.5", 1.5}, Case{"500m", 0.5},
        Case{"4Gi", 4.0 * 1024 * 1024 * 1024}, Case{"512Mi", 512.0 * 1024 * 1024},
        Case{"1Ki", 1024}, Case{"1G", 1e9}, Case{"100k", 1e5}, Case{"1e3", 1000},
        Case{"25e-2", 0.25}, Case{"2Ti", 2.0 * 1024 * 1024 * 1024 * 1024}, Case{"0", 0}}) {
    auto v = parseQuantity(c.text);
    ASSERT_TRUE(v) << c.text << ": " << v.error().message;
    EXPECT_DOUBLE_EQ(*v, c.value) << c.text;
  }
}

TEST(Quantity, RefusesMalformedTextNamingIt) {
  for (const char* text : {"", "-1", "Gi", "1.2.3", "4GB", "1e", "1ex", "12 Mi", "1e999"}) {
    auto v = parseQuantity(text);
    ASSERT_FALSE(v) << text;
    EXPECT_NE(v.error().message.find(std::string("\"") + text + "\""), std::string::npos)
        << v.error().message;
  }
}

TEST(Quantity, ConvertsToSchedulerUnits) {
  EXPECT_EQ(*cpuMilli("250m"), 250);
  EXPECT_EQ(*cpuMilli("1.5"), 1500);
  EXPECT_EQ(*cpuMilli("0.1"), 100);
  EXPECT_EQ(*cpuMilli("1m"), 1);
  EXPECT_EQ(*bytesToMib("4Gi"), 4096);
  EXPECT_EQ(*bytesToMib("1G"), 954);  // 1e9 / 2^20 = 953.67, rounded up
  EXPECT_EQ(*bytesToMib("1Mi"), 1);
  EXPECT_EQ(*bytesToMib("1"), 1);  // a byte still needs a MiB of booking
  EXPECT_EQ(*wholeNumber("3"), 3);
  EXPECT_EQ(*wholeNumber("2k"), 2000);
  EXPECT_FALSE(wholeNumber("1.5"));
  EXPECT_FALSE(wholeNumber("500m"));
}

// Regression (fuzz/quantity_fuzz): parseQuantity accepts up to 9e18, and cpuMilli cast a
// thousand times that to int64 (undefined; INT64_MIN on x86), so "9e18" cores read as a
// negative CPU request.
// Regression (fuzz/quantity_fuzz): a suffix starting with 'E' was always read as an exponent,
// so "1Ei" (exbibytes, as documented) was refused as "bad exponent".
TEST(Quantity, ReadsExbiAsASuffixNotAnExponent) {
  auto v = parseQuantity("1Ei");
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_DOUBLE_EQ(*v, 1024.0 * 1024 * 1024 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(*parseQuantity("2E"), 2e18);
  EXPECT_DOUBLE_EQ(*parseQuantity("2E3"), 2e3);
  EXPECT_DOUBLE_EQ(*parseQuantity("2e-3"), 2e-3);
  EXPECT_EQ(*bytesToMib("4Ei"), std::int64_t{4} * 1024 * 1024 * 1024 * 1024);
}

TEST(Quantity, ConversionsRefuseWhatDoesNotFitAnInteger) {
  auto huge = cpuMilli("9e18");
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().message, "quantity \"9e18\": too large");
  EXPECT_EQ(*cpuMilli("9e15"), 9'000'000'000'000'000'000);
  EXPECT_GE(*bytesToMib("9e18"), 0);
  EXPECT_EQ(*wholeNumber("9e18"), 9'000'000'000'000'000'000);
}

}  // namespace
}  // namespace tessera::k8s
