// The request-body decoder: JSON without exceptions, and a bound on nesting.

#include "api/json_body.h"

#include <string>

#include <gtest/gtest.h>

namespace tessera::api {
namespace {

TEST(JsonBody, MeasuresNestingOutsideStrings) {
  EXPECT_EQ(jsonNestingDepth("1"), 0u);
  EXPECT_EQ(jsonNestingDepth(R"({"a":[1,{"b":[]}]})"), 4u);
  EXPECT_EQ(jsonNestingDepth(R"(["[[[[", "\"[[[["])"), 1u);  // brackets in strings, escapes
  EXPECT_EQ(jsonNestingDepth("]]]][["), 2u);                 // not a validator
}

TEST(JsonBody, RefusesNestingBeyondTheBoundNamingIt) {
  const std::string atBound = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parseJsonBody(atBound));
  const std::string deeper = "[" + atBound + "]";
  auto refused = parseJsonBody(deeper);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message, "body: arrays and objects nested deeper than 128 levels");
  // Regression (found while writing fuzz/): 100,000 levels used to reach the handlers, whose
  // copies and dumps recursed once per level and overflowed the stack.
  const std::string huge = std::string(100'000, '[') + std::string(100'000, ']');
  EXPECT_FALSE(parseJsonBody(huge));
  EXPECT_FALSE(parseJsonBody(std::string(100'000, '{')));
}

TEST(JsonBody, NamesTheByteOfASyntaxError) {
  auto bad = parseJsonBody(R"({"a": tru})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "body: not valid JSON (byte 10)");
  EXPECT_FALSE(parseJsonBody(""));
  // Regression (fuzz/extender_fuzz): a number beyond a double threw out_of_range, which the
  // server answered with a 500.
  auto huge = parseJsonBody(R"({"Pod": -42949E7297})");
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().message,
            "body: not valid JSON ([json.exception.out_of_range.406] number overflow parsing "
            "'-42949E7297')");
  auto good = parseJsonBody(R"({"Pod": {"metadata": {"name": "p"}}})");
  ASSERT_TRUE(good);
  EXPECT_EQ((*good)["Pod"]["metadata"]["name"], "p");
}

}  // namespace
}  // namespace tessera::api
