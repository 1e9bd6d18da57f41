#include "common/text.h"

#include <string>

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(PercentEncode, KeepsUnreservedAndEncodesEverythingElse) {
  EXPECT_EQ(percentEncode("llama-3.1_8b~v2"), "llama-3.1_8b~v2");
  EXPECT_EQ(percentEncode("a b/c?d=e&f"), "a%20b%2Fc%3Fd%3De%26f");
  EXPECT_EQ(percentEncode("tessera.io/role=leader"), "tessera.io%2Frole%3Dleader");
  EXPECT_EQ(percentEncode(""), "");
  // Bytes above 0x7f (UTF-8) and control bytes, upper-case hex.
  EXPECT_EQ(percentEncode("\xc3\xa9\n"), "%C3%A9%0A");
  EXPECT_EQ(percentEncode(std::string("\0", 1)), "%00");
}

}  // namespace
}  // namespace tessera
