// The built-in chat trace: deterministic for a seed, an hour long at the documented rates and
// lengths, a burst where it says, arrivals in order.

#include <gtest/gtest.h>

#include "sim/serving_trace.h"

namespace tessera::sim {
namespace {

TEST(BuiltinChatTrace, IsAnHourOfChatTrafficWithItsBurst) {
  const ServingTrace a = builtinChatTrace(1);
  const ServingTrace b = builtinChatTrace(1);
  const ServingTrace other = builtinChatTrace(2);
  ASSERT_EQ(a.requests.size(), b.requests.size());
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    ASSERT_EQ(a.requests[i].arrivalUs, b.requests[i].arrivalUs);
    ASSERT_EQ(a.requests[i].inputTokens, b.requests[i].inputTokens);
  }
  EXPECT_NE(a.requests.size(), other.requests.size());
  EXPECT_EQ(a.name, "builtin-chat");
  // Mean rate 5/s plus the burst's extra: about 19,000 requests in the hour.
  EXPECT_GT(a.requests.size(), 17'500u);
  EXPECT_LT(a.requests.size(), 21'000u);
  EXPECT_GT(a.spanUs(), 3590'000'000LL);
  EXPECT_LE(a.spanUs(), 3600'000'000LL);
  std::int64_t inBurst = 0, before = 0;
  double prompt = 0;
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    const ServingRequest& r = a.requests[i];
    if (i > 0) {
      ASSERT_GE(r.arrivalUs, a.requests[i - 1].arrivalUs);
    }
    ASSERT_GE(r.inputTokens, 16);
    ASSERT_LE(r.inputTokens, 16'000);
    ASSERT_GE(r.outputTokens, 1);
    ASSERT_LE(r.outputTokens, 2'000);
    prompt += r.inputTokens;
    const double t = static_cast<double>(r.arrivalUs) / 1e6;
    if (t >= 2400 && t < 2640) ++inBurst;
    if (t >= 2160 && t < 2400) ++before;
  }
  // The burst doubles the rate of the four minutes before it (within Poisson noise).
  EXPECT_GT(static_cast<double>(inBurst), 1.6 * static_cast<double>(before));
  const double meanPrompt = prompt / static_cast<double>(a.requests.size());
  EXPECT_GT(meanPrompt, 800);   // log-normal: the mean is above the 700 median
  EXPECT_LT(meanPrompt, 1400);
  // --time-scale 0.5: the same requests at twice the rate.
  const ServingTrace fast = builtinChatTrace(1, 0.5);
  ASSERT_EQ(fast.requests.size(), a.requests.size());
  EXPECT_NEAR(static_cast<double>(fast.spanUs()), 0.5 * static_cast<double>(a.spanUs()), 2);
}

}  // namespace
}  // namespace tessera::sim
