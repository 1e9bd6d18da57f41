#include "engines/internal/http_call.h"

#include <gtest/gtest.h>

namespace tessera::engines::internal {
namespace {

TEST(ParseUrl, SplitsHostFromPathPrefix) {
  auto plain = parseUrl("http://127.0.0.1:8000");
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_EQ(plain->schemeHostPort, "http://127.0.0.1:8000");
  EXPECT_EQ(plain->pathPrefix, "");

  auto prefixed = parseUrl("https://gateway.local/triton/");
  ASSERT_TRUE(prefixed) << prefixed.error().message;
  EXPECT_EQ(prefixed->schemeHostPort, "https://gateway.local");
  EXPECT_EQ(prefixed->pathPrefix, "/triton");

  for (const char* bad : {"127.0.0.1:8000", "ftp://h", "http://", "http://:80", "http://h/x?y=1"}) {
    auto refused = parseUrl(bad);
    ASSERT_FALSE(refused) << bad;
    EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(refused.error().message.find(bad), std::string::npos) << refused.error().message;
  }
}

TEST(Encoding, UrlEncodeKeepsOnlyUnreservedCharacters) {
  EXPECT_EQ(urlEncode("resnet-50_v1.2~x"), "resnet-50_v1.2~x");
  EXPECT_EQ(urlEncode("a b/c?d"), "a%20b%2Fc%3Fd");
  EXPECT_EQ(urlEncode("\xc3\xa9"), "%C3%A9");
}

TEST(Excerpt, KeepsOneShortLine) {
  EXPECT_EQ(excerpt("a\nb\r\nc"), "a b  c");
  EXPECT_EQ(excerpt(std::string(300, 'x'), 10), "xxxxxxxxxx...");
}

TEST(StatusError, MapsStatusToCode) {
  EXPECT_EQ(statusError("w", 400, "m").code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(statusError("w", 422, "m").code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(statusError("w", 404, "m").code, ErrorCode::kNotFound);
  EXPECT_EQ(statusError("w", 500, "m").code, ErrorCode::kInternal);
  EXPECT_EQ(statusError("w", 503, "").message, "w: HTTP 503: (no message)");
}

}  // namespace
}  // namespace tessera::engines::internal
