#include "model/gpu_catalog.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace tessera::model {
namespace {

const GpuCatalog& catalog() {
  static const GpuCatalog kCatalog = GpuCatalog::builtin();
  return kCatalog;
}

const GpuType& type(std::string_view name) {
  const GpuType* t = catalog().find(name);
  EXPECT_NE(t, nullptr) << name;
  static const GpuType kEmpty;
  return t ? *t : kEmpty;
}

std::vector<std::string> profileNames(const GpuType& t) {
  std::vector<std::string> out;
  for (const MigProfile& p : t.migProfiles) out.push_back(p.name);
  return out;
}

// A small valid custom type to break one field at a time.
GpuType customType() {
  GpuType t;
  t.name = "X1";
  t.aliases = {"Example X1"};
  t.architecture = "Example";
  t.memoryMib = 32768;
  t.smCount = 64;
  t.memoryBandwidthGBps = 1000;
  t.fp16Tflops = 200;
  t.migMemorySlots = 4;
  t.migProfiles = {{"1g.8gb", 1, 8192, 1, {0, 1, 2, 3}, 4}, {"4g.32gb", 4, 32768, 4, {0}, 1}};
  return t;
}

// The error of validateGpuType for `t`; fails the test when `t` is accepted.
std::string rejection(const GpuType& t) {
  auto result = validateGpuType(t);
  EXPECT_FALSE(result.has_value()) << "accepted: " << t.name;
  if (result) return "";
  EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
  return result.error().message;
}

TEST(GpuCatalogTest, BuiltinListsEveryTypeInOrder) {
  EXPECT_EQ(catalog().names(),
            (std::vector<std::string>{"P100-16GB", "V100-16GB", "V100-32GB", "T4", "A10", "A30",
                                      "A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "L4",
                                      "L40S", "G2", "G3"}));
  EXPECT_EQ(catalog().size(), 14);
}

TEST(GpuCatalogTest, EveryBuiltinTypePassesItsOwnValidation) {
  for (int i = 0; i < catalog().size(); ++i) {
    auto result = validateGpuType(catalog().at(i));
    EXPECT_TRUE(result.has_value()) << catalog().at(i).name << ": " << result.error().message;
  }
}

TEST(GpuCatalogTest, LookupIsCaseInsensitiveOverNamesAndAliases) {
  EXPECT_EQ(catalog().find("a100-80gb"), catalog().find("A100-80GB"));
  EXPECT_EQ(catalog().find("NVIDIA A100-SXM4-80GB"), catalog().find("A100-80GB"));
  EXPECT_EQ(catalog().find("nvidia a100-sxm4-80gb"), catalog().find("A100-80GB"));
  EXPECT_EQ(catalog().find("NVIDIA-A100-SXM4-80GB"), catalog().find("A100-80GB"));
  EXPECT_EQ(type("Tesla T4").name, "T4");
  EXPECT_EQ(type("tesla-t4").name, "T4");
  EXPECT_EQ(type("NVIDIA H100 80GB HBM3").name, "H100-80GB");
  EXPECT_EQ(type("NVIDIA H200").name, "H200-141GB");
  EXPECT_EQ(type("h200").name, "H200-141GB");
  EXPECT_EQ(type("V100M16").name, "V100-16GB");
  EXPECT_EQ(type("v100m32").name, "V100-32GB");
  EXPECT_EQ(type("P100").name, "P100-16GB");
  EXPECT_EQ(type("Tesla P100-PCIE-16GB").name, "P100-16GB");
  EXPECT_EQ(type("g2").name, "G2");
}

TEST(GpuCatalogTest, UnknownNamesAreNotFound) {
  EXPECT_EQ(catalog().find("B200"), nullptr);
  EXPECT_EQ(catalog().indexOf("B200"), -1);
  EXPECT_EQ(catalog().find(""), nullptr);
  EXPECT_EQ(catalog().indexOf("A100"), -1);          // ambiguous between 40 and 80 GB: not an alias
  EXPECT_EQ(catalog().find("A100-80GB "), nullptr);  // no trimming: the caller owns parsing
}

TEST(GpuCatalogTest, IndexOfAgreesWithAtAndFind) {
  for (int i = 0; i < catalog().size(); ++i) {
    const GpuType& t = catalog().at(i);
    EXPECT_EQ(catalog().indexOf(t.name), i);
    EXPECT_EQ(catalog().find(t.name), &t);
    for (const std::string& alias : t.aliases) EXPECT_EQ(catalog().indexOf(alias), i) << alias;
  }
}

TEST(GpuCatalogTest, NoNameOrAliasIsSharedBetweenTypes) {
  std::set<std::string> seen;
  for (int i = 0; i < catalog().size(); ++i) {
    std::vector<std::string> keys = catalog().at(i).aliases;
    keys.push_back(catalog().at(i).name);
    for (std::string key : keys) {
      for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      EXPECT_TRUE(seen.insert(key).second) << key;
    }
  }
}

TEST(GpuCatalogTest, DatasheetFigures) {
  const GpuType& a100 = type("A100-80GB");
  EXPECT_EQ(a100.architecture, "Ampere");
  EXPECT_EQ(a100.memoryMib, 81920);
  EXPECT_EQ(a100.smCount, 108);
  EXPECT_EQ(a100.memoryBandwidthGBps, 2039);
  EXPECT_EQ(a100.fp16Tflops, 312);
  EXPECT_EQ(a100.nvlinkGBps, 600);

  EXPECT_EQ(type("A100-40GB").memoryMib, 40960);
  EXPECT_EQ(type("A100-40GB").memoryBandwidthGBps, 1555);

  // 141 GB read as GiB: 141 x 1024 MiB.
  const GpuType& h200 = type("H200");
  EXPECT_EQ(h200.memoryMib, 144384);
  EXPECT_EQ(h200.memoryBandwidthGBps, 4800);
  EXPECT_EQ(h200.smCount, 132);
  EXPECT_EQ(h200.nvlinkGBps, 900);
  EXPECT_EQ(h200.architecture, "Hopper");

  const GpuType& h100 = type("H100-80GB");
  EXPECT_EQ(h100.memoryBandwidthGBps, 3350);
  EXPECT_DOUBLE_EQ(*h100.fp16Tflops, 989.5);

  EXPECT_EQ(type("P100").memoryMib, 16384);
  EXPECT_EQ(type("P100").memoryBandwidthGBps, 732);
  EXPECT_EQ(type("P100").architecture, "Pascal");
  EXPECT_EQ(type("V100M32").memoryMib, 32768);
  EXPECT_EQ(type("V100M16").memoryMib, 16384);
  EXPECT_EQ(type("V100M16").smCount, 80);
  EXPECT_EQ(type("V100M16").nvlinkGBps, 300);
  EXPECT_EQ(type("T4").memoryBandwidthGBps, 320);
  EXPECT_EQ(type("T4").fp16Tflops, 65);
  EXPECT_EQ(type("A10").smCount, 72);
  EXPECT_EQ(type("A30").memoryBandwidthGBps, 933);
  EXPECT_EQ(type("A30").fp16Tflops, 165);
  EXPECT_EQ(type("L4").memoryMib, 24576);
  EXPECT_EQ(type("L4").fp16Tflops, 121);
  EXPECT_EQ(type("L40S").memoryMib, 49152);
  EXPECT_EQ(type("L40S").smCount, 142);
  EXPECT_DOUBLE_EQ(*type("L40S").fp16Tflops, 362.05);
}

TEST(GpuCatalogTest, PcieCardsHaveNoNvlink) {
  for (const char* name : {"P100", "T4", "A10", "L4", "L40S"}) {
    EXPECT_FALSE(type(name).nvlinkGBps.has_value()) << name;
  }
}

TEST(GpuCatalogTest, EveryDisclosedTypeHasEveryFigure) {
  for (int i = 0; i < catalog().size(); ++i) {
    const GpuType& t = catalog().at(i);
    if (t.opaque) continue;
    EXPECT_TRUE(t.memoryMib && t.smCount && t.memoryBandwidthGBps && t.fp16Tflops) << t.name;
    EXPECT_FALSE(t.architecture.empty()) << t.name;
  }
}

TEST(GpuCatalogTest, UndisclosedTraceTypesReportNothing) {
  for (const char* name : {"G2", "G3"}) {
    const GpuType& t = type(name);
    EXPECT_TRUE(t.opaque) << name;
    EXPECT_FALSE(t.memoryMib.has_value()) << name;
    EXPECT_FALSE(t.smCount.has_value()) << name;
    EXPECT_FALSE(t.memoryBandwidthGBps.has_value()) << name;
    EXPECT_FALSE(t.fp16Tflops.has_value()) << name;
    EXPECT_FALSE(t.nvlinkGBps.has_value()) << name;
    EXPECT_TRUE(t.architecture.empty()) << name;
    EXPECT_FALSE(t.migCapable()) << name;
  }
}

TEST(GpuCatalogTest, ExactlyTheMigCardsAreMigCapable) {
  std::vector<std::string> mig;
  for (int i = 0; i < catalog().size(); ++i) {
    if (catalog().at(i).migCapable()) mig.push_back(catalog().at(i).name);
  }
  EXPECT_EQ(mig,
            (std::vector<std::string>{"A30", "A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"}));
  EXPECT_EQ(type("A30").migMemorySlots, 4);
  for (const char* name : {"A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"}) {
    EXPECT_EQ(type(name).migMemorySlots, 8) << name;
  }
}

TEST(GpuCatalogTest, A100_80GbMigProfiles) {
  const GpuType& t = type("A100-80GB");
  ASSERT_EQ(profileNames(t),
            (std::vector<std::string>{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb",
                                      "4g.40gb", "7g.80gb"}));
  const MigProfile* p = t.findMigProfile("1g.10gb");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->computeSlices, 1);
  EXPECT_EQ(p->slotCount, 1);
  EXPECT_EQ(p->memoryMib, 10240);
  EXPECT_EQ(p->allowedStarts, (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(p->maxInstances, 7);

  p = t.findMigProfile("1g.10gb+me");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->maxInstances, 1);
  EXPECT_EQ(p->allowedStarts, (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));

  p = t.findMigProfile("1g.20gb");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->computeSlices, 1);
  EXPECT_EQ(p->slotCount, 2);
  EXPECT_EQ(p->allowedStarts, (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(p->maxInstances, 4);

  p = t.findMigProfile("2g.20gb");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->allowedStarts, (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(p->maxInstances, 3);

  p = t.findMigProfile("3g.40gb");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->slotCount, 4);
  EXPECT_EQ(p->allowedStarts, (std::vector<int>{0, 4}));
  EXPECT_EQ(p->maxInstances, 2);

  p = t.findMigProfile("4g.40gb");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->slotCount, 4);
  EXPECT_EQ(p->allowedStarts, (std::vector<int>{0}));

  p = t.findMigProfile("7g.80gb");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->computeSlices, 7);
  EXPECT_EQ(p->slotCount, 8);
  EXPECT_EQ(p->memoryMib, 81920);
  EXPECT_EQ(p->allowedStarts, (std::vector<int>{0}));
  EXPECT_EQ(p->maxInstances, 1);
}

TEST(GpuCatalogTest, OtherMigCardsProfileNames) {
  EXPECT_EQ(profileNames(type("A100-40GB")),
            (std::vector<std::string>{"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb",
                                      "4g.20gb", "7g.40gb"}));
  EXPECT_EQ(profileNames(type("H100-80GB")), profileNames(type("A100-80GB")));
  EXPECT_EQ(profileNames(type("H200")),
            (std::vector<std::string>{"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb",
                                      "4g.71gb", "7g.141gb"}));
  EXPECT_EQ(profileNames(type("A30")),
            (std::vector<std::string>{"1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"}));
  const MigProfile* a30Two = type("A30").findMigProfile("2g.12gb");
  ASSERT_NE(a30Two, nullptr);
  EXPECT_EQ(a30Two->allowedStarts, (std::vector<int>{0, 2}));
  EXPECT_EQ(a30Two->maxInstances, 2);
  EXPECT_EQ(type("H200").findMigProfile("1g.18gb")->memoryMib, 18048);
}

// MIG memory is the card's memory times the guide's memory fraction, on every card.
TEST(GpuCatalogTest, MigMemoryIsTheMemoryFractionOfTheCard) {
  for (int i = 0; i < catalog().size(); ++i) {
    const GpuType& t = catalog().at(i);
    for (const MigProfile& p : t.migProfiles) {
      EXPECT_EQ(p.memoryMib * t.migMemorySlots, *t.memoryMib * p.slotCount)
          << t.name << " " << p.name;
    }
  }
}

TEST(GpuCatalogTest, FindMigProfileIsCaseInsensitive) {
  const GpuType& t = type("A100-40GB");
  ASSERT_NE(t.findMigProfile("3G.20GB"), nullptr);
  EXPECT_EQ(t.findMigProfile("3G.20GB")->name, "3g.20gb");
  EXPECT_EQ(t.findMigProfile("3g.40gb"), nullptr);
  EXPECT_EQ(type("T4").findMigProfile("1g.5gb"), nullptr);
}

// Every GPU model in the Alibaba 2023 trace's node list resolves; skipped without the data.
TEST(GpuCatalogTest, ResolvesEveryModelInTheAlibabaTrace) {
  const std::filesystem::path csv = std::filesystem::path(TESSERA_SHARED_DIR) /
                                    "data/alibaba-gpu-2023/openb_node_list_gpu_node.csv";
  std::ifstream in(csv);
  if (!in) GTEST_SKIP() << "no trace at " << csv;
  std::string line;
  std::getline(in, line);
  ASSERT_EQ(line, "sn,cpu_milli,memory_mib,gpu,model");
  std::set<std::string> models;
  while (std::getline(in, line)) {
    const std::string model = line.substr(line.rfind(',') + 1);
    if (!model.empty()) models.insert(model);
  }
  EXPECT_EQ(models, (std::set<std::string>{"A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"}));
  for (const std::string& model : models) EXPECT_NE(catalog().find(model), nullptr) << model;
}

TEST(GpuCatalogTest, BuiltinReturnsEqualCatalogues) {
  const GpuCatalog again = GpuCatalog::builtin();
  EXPECT_EQ(again.names(), catalog().names());
}

TEST(GpuCatalogTest, AddsACustomTypeAfterTheBuiltins) {
  GpuCatalog c = GpuCatalog::builtin();
  auto added = c.add(customType());
  ASSERT_TRUE(added.has_value()) << added.error().message;
  EXPECT_EQ(c.size(), catalog().size() + 1);
  EXPECT_EQ(c.indexOf("example x1"), c.size() - 1);
  EXPECT_EQ(c.find("X1")->migProfiles.size(), 2U);
  // The built-in catalogue itself is untouched.
  EXPECT_EQ(catalog().find("X1"), nullptr);
}

TEST(GpuCatalogTest, AddRejectsATakenNameOrAlias) {
  GpuCatalog c = GpuCatalog::builtin();
  GpuType clash = customType();
  clash.aliases = {"tesla t4"};
  auto result = c.add(clash);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kAlreadyExists);
  EXPECT_NE(result.error().message.find("\"T4\""), std::string::npos) << result.error().message;

  clash = customType();
  clash.name = "a100-80gb";
  result = c.add(clash);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(c.size(), catalog().size());
}

TEST(GpuCatalogTest, AddRejectsAnInvalidType) {
  GpuCatalog c;
  GpuType bad = customType();
  bad.smCount = 0;
  auto result = c.add(bad);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(c.size(), 0);
}

TEST(ValidateGpuTypeTest, AcceptsAValidCustomType) {
  auto result = validateGpuType(customType());
  EXPECT_TRUE(result.has_value()) << result.error().message;
}

TEST(ValidateGpuTypeTest, AcceptsATypeWithOnlySomeFigures) {
  GpuType t;
  t.name = "Partly known";
  t.memoryMib = 8192;
  EXPECT_TRUE(validateGpuType(t).has_value());
}

TEST(ValidateGpuTypeTest, RejectsAnEmptyName) {
  GpuType t = customType();
  t.name.clear();
  EXPECT_NE(rejection(t).find("name"), std::string::npos);
}

TEST(ValidateGpuTypeTest, RejectsEmptyOrRepeatedAliases) {
  GpuType t = customType();
  t.aliases = {"x1"};
  const std::string repeated = rejection(t);
  EXPECT_NE(repeated.find("\"X1\""), std::string::npos) << repeated;
  EXPECT_NE(repeated.find("aliases[0]"), std::string::npos) << repeated;
  t.aliases = {"a", ""};
  EXPECT_NE(rejection(t).find("aliases[1]"), std::string::npos);
}

TEST(ValidateGpuTypeTest, RejectsNonPositiveFigures) {
  struct Case {
    const char* field;
    void (*breakIt)(GpuType&);
  };
  const Case cases[] = {
      {"memoryMib", [](GpuType& t) { t.memoryMib = 0; }},
      {"smCount", [](GpuType& t) { t.smCount = -1; }},
      {"memoryBandwidthGBps", [](GpuType& t) { t.memoryBandwidthGBps = 0.0; }},
      {"memoryBandwidthGBps",
       [](GpuType& t) { t.memoryBandwidthGBps = std::numeric_limits<double>::quiet_NaN(); }},
      {"fp16Tflops", [](GpuType& t) { t.fp16Tflops = -3.5; }},
      {"fp16Tflops", [](GpuType& t) { t.fp16Tflops = std::numeric_limits<double>::infinity(); }},
      {"nvlinkGBps", [](GpuType& t) { t.nvlinkGBps = 0; }},
  };
  for (const Case& c : cases) {
    GpuType t = customType();
    c.breakIt(t);
    const std::string message = rejection(t);
    EXPECT_NE(message.find("\"X1\""), std::string::npos) << message;
    EXPECT_NE(message.find(c.field), std::string::npos) << c.field << ": " << message;
  }
}

TEST(ValidateGpuTypeTest, RejectsBadMigGeometry) {
  struct Case {
    const char* field;
    void (*breakIt)(GpuType&);
  };
  const Case cases[] = {
      {"migMemorySlots", [](GpuType& t) { t.migMemorySlots = 33; }},
      {"migMemorySlots", [](GpuType& t) { t.migMemorySlots = -1; }},
      {"migProfiles", [](GpuType& t) { t.migMemorySlots = 0; }},
      {"migProfiles", [](GpuType& t) { t.migProfiles.clear(); }},
      {"memoryMib", [](GpuType& t) { t.memoryMib.reset(); }},
      {"migProfiles[0].name", [](GpuType& t) { t.migProfiles[0].name.clear(); }},
      {"migProfiles[1] \"1G.8GB\".name", [](GpuType& t) { t.migProfiles[1].name = "1G.8GB"; }},
      {"migProfiles[0] \"1g.8gb\".computeSlices",
       [](GpuType& t) { t.migProfiles[0].computeSlices = 0; }},
      {"migProfiles[0] \"1g.8gb\".memoryMib", [](GpuType& t) { t.migProfiles[0].memoryMib = 0; }},
      {"migProfiles[1] \"4g.32gb\".memoryMib",
       [](GpuType& t) { t.migProfiles[1].memoryMib = 40000; }},
      {"migProfiles[0] \"1g.8gb\".slotCount", [](GpuType& t) { t.migProfiles[0].slotCount = 0; }},
      {"migProfiles[1] \"4g.32gb\".slotCount", [](GpuType& t) { t.migProfiles[1].slotCount = 5; }},
      {"migProfiles[0] \"1g.8gb\".allowedStarts",
       [](GpuType& t) {
         t.migProfiles[0].allowedStarts = {0, 4};
       }},
      {"migProfiles[0] \"1g.8gb\".allowedStarts",
       [](GpuType& t) { t.migProfiles[0].allowedStarts = {-1}; }},
      {"migProfiles[0] \"1g.8gb\".allowedStarts",
       [](GpuType& t) {
         t.migProfiles[0].allowedStarts = {1, 1};
       }},
      {"migProfiles[1] \"4g.32gb\".allowedStarts",
       [](GpuType& t) { t.migProfiles[1].allowedStarts.clear(); }},
      {"migProfiles[0] \"1g.8gb\".maxInstances",
       [](GpuType& t) { t.migProfiles[0].maxInstances = 0; }},
      {"migProfiles[0] \"1g.8gb\".maxInstances",
       [](GpuType& t) { t.migProfiles[0].maxInstances = 5; }},
      {"migProfiles[1] \"2g.16gb\".maxInstances",
       [](GpuType& t) {
         // Three starts, but three 2-slice instances cannot fit in 4 slices.
         t.migProfiles[1] = {"2g.16gb", 2, 16384, 2, {0, 1, 2}, 3};
       }},
  };
  for (const Case& c : cases) {
    GpuType t = customType();
    c.breakIt(t);
    const std::string message = rejection(t);
    EXPECT_NE(message.find("\"X1\""), std::string::npos) << message;
    EXPECT_NE(message.find(c.field), std::string::npos) << c.field << ": " << message;
  }
}

TEST(ValidateGpuTypeTest, RejectsAnOpaqueTypeWithFigures) {
  GpuType t;
  t.name = "G9";
  t.opaque = true;
  EXPECT_TRUE(validateGpuType(t).has_value());
  t.memoryMib = 1024;
  EXPECT_NE(rejection(t).find("opaque"), std::string::npos);
}

}  // namespace
}  // namespace tessera::model
