#include "common/text.h"

#include <cstdlib>
#include <iostream>
#include <random>
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

TEST(Base64, KnownVectorsFromRfc4648) {
  const std::pair<const char*, const char*> cases[] = {{"", ""},
                                                       {"f", "Zg=="},
                                                       {"fo", "Zm8="},
                                                       {"foo", "Zm9v"},
                                                       {"foob", "Zm9vYg=="},
                                                       {"fooba", "Zm9vYmE="},
                                                       {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : cases) {
    EXPECT_EQ(base64Encode(plain), coded) << plain;
    EXPECT_EQ(base64Decode(coded), std::optional<std::string>(plain)) << coded;
  }
  const std::string high("\xff\xfe\x00", 3);  // bytes above 0x7f and a NUL
  EXPECT_EQ(base64Encode(high), "//4A");
  EXPECT_EQ(base64Decode("//4A"), std::optional<std::string>(high));
}

TEST(Base64, RefusesWhatIsNotPaddedBase64) {
  for (const char* bad : {"Zg=", "Zg", "Z===", "Zm9v!A==", "Zg==Zg==", "=Zg=", "Zm=v"}) {
    EXPECT_EQ(base64Decode(bad), std::nullopt) << bad;
  }
}

// Random bytes of every length up to 64 survive a round trip. TESSERA_SEED=<seed> replays.
TEST(Base64, RoundTripsRandomBytes) {
  const char* given = std::getenv("TESSERA_SEED");
  const std::uint64_t seed = given ? std::strtoull(given, nullptr, 10) : std::random_device{}();
  std::cout << "[   SEED   ] Base64.RoundTripsRandomBytes: TESSERA_SEED=" << seed << std::endl;
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 200; ++round) {
    std::string bytes(static_cast<std::size_t>(rng() % 65), '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xFF);
    const std::string coded = base64Encode(bytes);
    EXPECT_EQ(coded.size() % 4, 0u);
    ASSERT_EQ(base64Decode(coded), std::optional<std::string>(bytes)) << "seed " << seed;
  }
}

}  // namespace
}  // namespace tessera
