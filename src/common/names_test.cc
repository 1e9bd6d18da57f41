// Kubernetes' name rules (common/names.h): what each kind accepts and refuses, and the reason.

#include "common/names.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera {
namespace {

TEST(Names, SubdomainsAndLabels) {
  for (const char* ok : {"node-a", "h100-a", "llama-3.1-8b-instruct", "a", "0", "x.y.z"}) {
    EXPECT_FALSE(checkName(ok, NameKind::kSubdomain)) << ok;
  }
  const std::string nul("a\0b", 3);
  for (const std::string& bad :
       {std::string("a/b"), std::string("../x"), std::string("sp ace"), std::string("\xc3\xa9"),
        std::string(300, 'a'), nul, std::string("Upper"), std::string(""), std::string("-a"),
        std::string("a-"), std::string("a..b"), std::string(".a"), std::string("a_b")}) {
    const auto why = checkName(bad, NameKind::kSubdomain);
    ASSERT_TRUE(why) << bad;
    EXPECT_NE(why->find("DNS-1123 subdomain"), std::string::npos) << *why;
  }
  EXPECT_NE(checkName(nul, NameKind::kSubdomain)->find("\\x00"), std::string::npos);
  EXPECT_FALSE(checkName(std::string(253, 'a'), NameKind::kSubdomain));
  EXPECT_TRUE(checkName(std::string(254, 'a'), NameKind::kSubdomain));
  EXPECT_TRUE(checkName(std::string(64, 'a'), NameKind::kSubdomain, 63));
  // Labels have no dots and stop at 63.
  EXPECT_FALSE(checkName("default", NameKind::kLabel));
  EXPECT_TRUE(checkName("a.b", NameKind::kLabel));
  EXPECT_TRUE(checkName(std::string(64, 'a'), NameKind::kLabel));
}

TEST(Names, ObjectKeysAreANameOrNamespaceSlashName) {
  EXPECT_FALSE(checkName("chat-0", NameKind::kObjectKey));
  EXPECT_FALSE(checkName("default/chat-7f9c-abcde", NameKind::kObjectKey));
  for (const char* bad : {"a/b/c", "/x", "x/", "my.ns/pod", "../x", "Default/pod"}) {
    EXPECT_TRUE(checkName(bad, NameKind::kObjectKey)) << bad;
  }
}

TEST(Names, ToSubdomainMakesAValidName) {
  EXPECT_EQ(toSubdomain("Meta-Llama-3.1-8B"), "meta-llama-3.1-8b");
  EXPECT_EQ(toSubdomain("Qwen2.5 7B_Instruct"), "qwen2.5-7b-instruct");
  EXPECT_EQ(toSubdomain("--x--"), "x");
  EXPECT_EQ(toSubdomain("___"), "model");
  EXPECT_EQ(toSubdomain("a..b"), "a.b");
  for (const std::string& s : {std::string("Meta-Llama-3.1-8B"), std::string("\xc3\xa9!"),
                               std::string("a.-b"), std::string("x-.y"), std::string(300, 'Z')}) {
    EXPECT_FALSE(checkName(toSubdomain(s), NameKind::kSubdomain)) << s << " → " << toSubdomain(s);
  }
}

}  // namespace
}  // namespace tessera
