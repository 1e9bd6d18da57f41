#include "config/yaml_field.h"

#include <gtest/gtest.h>

#include "config/yaml_json.h"

namespace tessera::config {
namespace {

// Keeps the parsed document alive next to the root Field that views it.
struct Doc {
  explicit Doc(const std::string& text) {
    auto parsed = parseYamlDocument(text, source);
    EXPECT_TRUE(parsed) << parsed.error().message;
    node = parsed.value_or(YAML::Node());
  }
  Field root() const { return Field::root(source, node); }
  Field operator[](std::string_view key) const { return root().child(key); }

  std::string source = "t.yaml";
  YAML::Node node;
};

template <typename T>
std::string errorOf(const Result<T>& result) {
  EXPECT_FALSE(result) << "expected an error";
  return result ? std::string() : result.error().message;
}

TEST(YamlField, PathsAndLinesFollowTheDocument) {
  const Doc doc("a:\n  b:\n    - x\n    - {c: 5}\n");
  const Field c = doc["a"].child("b").item(1).child("c");
  EXPECT_EQ(c.path(), "a.b[1].c");
  EXPECT_EQ(c.line(), 4);
  EXPECT_EQ(c.error("bad").message, "t.yaml:4: a.b[1].c: bad");
  EXPECT_EQ(doc.root().error("bad").message, "t.yaml:1: bad");
}

TEST(YamlField, MissingKeysReportTheMappingsLine) {
  const Doc doc("x: 1\nnode:\n  name: a\n");
  const Field missing = doc["node"].child("gpus");
  EXPECT_TRUE(missing.absent());
  EXPECT_EQ(missing.line(), 3);
  EXPECT_EQ(errorOf(require(missing)), "t.yaml:3: node.gpus: required");
}

TEST(YamlField, NullValuesReportTheirKeysLine) {
  // yaml-cpp marks a null value at the next token; the key's line is where the slip is.
  const Doc doc("a: 1\nb:\nc: 2\n");
  EXPECT_EQ(errorOf(readInt(doc["b"], 0, 10)), "t.yaml:2: b: must be an integer, got nothing");
}

TEST(YamlField, ReadsIntegers) {
  const Doc doc("a: 12\nb: -5\nc: +7\nd: 1.5\ne: '80'\nf: 0x10\ng: 99999999999999999999\nh: [1]\n");
  EXPECT_EQ(readInt(doc["a"], 0, 100).value(), 12);
  EXPECT_EQ(readInt(doc["c"], 0, 100).value(), 7);
  EXPECT_EQ(errorOf(readInt(doc["b"], 1, 100)), "t.yaml:2: b: must be > 0, got -5");
  EXPECT_EQ(errorOf(readInt(doc["b"], 0, 100)), "t.yaml:2: b: must be >= 0, got -5");
  EXPECT_EQ(errorOf(readInt(doc["a"], 0, 10)), "t.yaml:1: a: must be <= 10, got 12");
  EXPECT_EQ(errorOf(readInt(doc["d"], 0, 10)), "t.yaml:4: d: must be an integer, got 1.5");
  EXPECT_EQ(errorOf(readInt(doc["e"], 0, 100)),
            "t.yaml:5: e: must be an integer, got \"80\" (quoted text; remove the quotes)");
  EXPECT_EQ(errorOf(readInt(doc["f"], 0, 100)), "t.yaml:6: f: must be an integer, got 0x10");
  EXPECT_EQ(errorOf(readInt(doc["g"], 0, 100)),
            "t.yaml:7: g: must be an integer in 0..100, got 99999999999999999999");
  EXPECT_EQ(errorOf(readInt(doc["h"], 0, 100)), "t.yaml:8: h: must be an integer, got a list");
}

TEST(YamlField, ReadsNumbers) {
  const Doc doc("a: 1.25\nb: 3\nc: .inf\nd: nan\ne: 0.5\nf: 2e3\n");
  EXPECT_DOUBLE_EQ(readNumber(doc["a"], 0, 10).value(), 1.25);
  EXPECT_DOUBLE_EQ(readNumber(doc["b"], 0, 10).value(), 3);
  EXPECT_DOUBLE_EQ(readNumber(doc["f"], 0, 1e4).value(), 2000);
  EXPECT_EQ(errorOf(readNumber(doc["c"], 0, 10)), "t.yaml:3: c: must be a finite number, got .inf");
  EXPECT_EQ(errorOf(readNumber(doc["d"], 0, 10)), "t.yaml:4: d: must be a finite number, got nan");
  EXPECT_EQ(errorOf(readNumber(doc["e"], 1, 10)), "t.yaml:5: e: must be >= 1, got 0.5");
  EXPECT_EQ(errorOf(readNumber(doc["a"], 0, 1)), "t.yaml:1: a: must be <= 1, got 1.25");
}

TEST(YamlField, ReadsOnlyYaml12Booleans) {
  const Doc doc("a: true\nb: False\nc: yes\nd: 'true'\n");
  EXPECT_TRUE(readBool(doc["a"]).value());
  EXPECT_FALSE(readBool(doc["b"]).value());
  EXPECT_EQ(errorOf(readBool(doc["c"])), "t.yaml:3: c: must be true or false, got yes");
  EXPECT_EQ(errorOf(readBool(doc["d"])),
            "t.yaml:4: d: must be true or false, got \"true\" (quoted text; remove the quotes)");
}

TEST(YamlField, ReadsStringsListsAndMaps) {
  const Doc doc("a: 0\nb: ''\nc: [x, 1, y]\nd: {k: v, n: 2}\ne: x\nf:\ng: [a, [b]]\n");
  EXPECT_EQ(readString(doc["a"]).value(), "0");
  EXPECT_EQ(errorOf(readName(doc["b"])), "t.yaml:2: b: must not be empty");
  EXPECT_EQ(readStringList(doc["c"]).value(), (std::vector<std::string>{"x", "1", "y"}));
  const auto map = readStringMap(doc["d"]).value();
  EXPECT_EQ(map.at("k"), "v");
  EXPECT_EQ(map.at("n"), "2");
  EXPECT_EQ(errorOf(readStringList(doc["e"])), "t.yaml:5: e: must be a list, got x");
  EXPECT_TRUE(readStringList(doc["f"]).value().empty());
  EXPECT_TRUE(readStringMap(doc["f"]).value().empty());
  EXPECT_EQ(errorOf(readStringList(doc["g"])), "t.yaml:7: g[1]: must be text, got a list");
}

TEST(YamlField, UnknownKeysNameTheKeyTheAllowedOnesAndAGuess) {
  const Doc doc("name: a\nmemoryMB: 5\n");
  EXPECT_EQ(errorOf(expectMap(doc.root(), {"name", "memoryMib", "memory"})),
            "t.yaml:2: memoryMB: unknown key (did you mean \"memoryMib\"?); allowed: name, "
            "memoryMib, memory");
  const Doc nested("node:\n  name: a\n  zzz: 1\n");
  EXPECT_EQ(errorOf(expectMap(nested["node"], {"name", "gpus"})),
            "t.yaml:3: node.zzz: unknown key; allowed: name, gpus");
}

TEST(YamlField, DuplicateKeysAreErrors) {
  const Doc doc("name: a\ncount: 1\nname: b\n");
  EXPECT_EQ(errorOf(expectMap(doc.root(), {"name", "count"})),
            "t.yaml:3: name: duplicate key (first given on line 1)");
}

TEST(YamlField, ClosestKeyOnlySuggestsNearMisses) {
  const std::vector<std::string_view> keys = {"gpus", "cpuMilli", "hostMemoryMib", "labels"};
  EXPECT_EQ(closestKey("gpu", keys), "gpus");
  EXPECT_EQ(closestKey("cpumilli", keys), "cpuMilli");
  EXPECT_EQ(closestKey("hostMemoryMiB", keys), "hostMemoryMib");
  EXPECT_EQ(closestKey("lables", keys), "labels");
  EXPECT_EQ(closestKey("zone", keys), std::nullopt);
  // Sharing a prefix only breaks ties; it never makes a distant key a suggestion.
  EXPECT_EQ(closestKey("name", std::vector<std::string_view>{"nodes", "kind"}), std::nullopt);
}

TEST(YamlField, MemoryTakesMibOrAQuantityButNotBoth) {
  const MemoryField spec{.mibKey = "memoryMib",
                         .quantityKey = "memory",
                         .minMib = 1,
                         .maxMib = 16 * 1024 * 1024,
                         .capacity = true};
  const Doc doc(
      "a: {memoryMib: 81920}\nb: {memory: 40GB}\nc: {memoryMib: 1, memory: 1Gi}\n"
      "d: {memory: 80}\ne: {memory: 17Ti}\nf: {memoryMib: 0}\ng: {}\nh: {memory: 1MB}\n");
  EXPECT_EQ(readMemory(doc["a"], spec).value(), 81920);
  EXPECT_EQ(readMemory(doc["b"], spec).value(), 38146);  // a capacity rounds down
  EXPECT_EQ(readMemory(doc["g"], spec).value(), std::nullopt);
  EXPECT_EQ(errorOf(readMemory(doc["c"], spec)),
            "t.yaml:3: c.memory: give either memoryMib or memory, not both");
  EXPECT_EQ(errorOf(readMemory(doc["d"], spec)),
            "t.yaml:4: d.memory: needs a unit (Mi, MiB, Gi, GiB, Ti, TiB, MB, GB, TB), got \"80\"; "
            "or give plain MiB as memoryMib");
  EXPECT_EQ(errorOf(readMemory(doc["e"], spec)),
            "t.yaml:5: e.memory: must be <= 16777216 MiB (16 TiB), got \"17Ti\" = 17825792 MiB "
            "(17 TiB)");
  EXPECT_EQ(errorOf(readMemory(doc["f"], spec)), "t.yaml:6: f.memoryMib: must be > 0, got 0");
  EXPECT_EQ(errorOf(readMemory(doc["h"], spec)),
            "t.yaml:8: h.memory: must be > 0, got \"1MB\" = 0 MiB");
}

TEST(YamlField, CpuTakesMilliOrCores) {
  const Doc doc("a: {cpu: 0.5}\nb: {cpuMilli: 1500}\nc: {cpu: 1, cpuMilli: 1}\nd: {cpu: -1}\n");
  EXPECT_EQ(readCpu(doc["a"], 1'000'000).value(), 500);
  EXPECT_EQ(readCpu(doc["b"], 1'000'000).value(), 1500);
  EXPECT_EQ(errorOf(readCpu(doc["c"], 1'000'000)),
            "t.yaml:3: c.cpu: give either cpuMilli or cpu, not both");
  EXPECT_EQ(errorOf(readCpu(doc["d"], 1'000'000)), "t.yaml:4: d.cpu: must be >= 0, got -1");
}

TEST(YamlDocument, SyntaxErrorsNameTheLine) {
  EXPECT_EQ(errorOf(parseYamlDocument("a: 1\nb: [1, 2\nc: 3\n", "s.yaml")),
            "s.yaml:3: YAML syntax error: end of sequence flow not found");
  EXPECT_EQ(errorOf(parseYamlDocument("a: 1\n  b: 2\n", "s.yaml")),
            "s.yaml:2: YAML syntax error: illegal map value");
}

TEST(YamlDocument, OnlyOneDocumentIsAllowed) {
  EXPECT_EQ(errorOf(parseYamlDocument("a: 1\n---\nb: 2\n", "s.yaml")),
            "s.yaml:3: only one YAML document is allowed, found 2");
  EXPECT_TRUE(parseYamlDocument("", "s.yaml").value().IsNull());
}

TEST(YamlDocument, ApiHeaderIsCheckedWhenPresent) {
  const Doc ok("apiVersion: tessera.io/v1alpha1\nkind: Cluster\n");
  EXPECT_TRUE(checkApiHeader(ok.root(), "Cluster"));
  EXPECT_TRUE(checkApiHeader(Doc("nodes: []\n").root(), "Cluster"));
  EXPECT_EQ(errorOf(checkApiHeader(Doc("apiVersion: v1\n").root(), "Cluster")),
            "t.yaml:1: apiVersion: must be tessera.io/v1alpha1, got v1");
  EXPECT_EQ(errorOf(checkApiHeader(ok.root(), "PlacementProfile")),
            "t.yaml:2: kind: must be PlacementProfile, got Cluster (is this the right file?)");
}

TEST(YamlFile, MissingFilesNameThePath) {
  const auto text = readTextFile("/nonexistent/tessera/x.yaml");
  ASSERT_FALSE(text);
  EXPECT_EQ(text.error().message,
            "/nonexistent/tessera/x.yaml: cannot open: No such file or directory");
}

TEST(YamlJson, ConvertsScalarsByTheCoreSchema) {
  const Doc doc(
      "args:\n  i: 3\n  n: -4\n  f: 0.8\n  e: 1e-3\n  t: true\n  F: False\n  s: soft\n"
      "  q: '3'\n  z: ~\n  y: yes\n  x: 0x10\n  inf: .inf\n  l: [1, a, {b: 2}]\n  m: {k: [ ]}\n");
  const nlohmann::json json = yamlToJson(doc["args"]).value();
  EXPECT_EQ(json, nlohmann::json::parse(R"({"i": 3, "n": -4, "f": 0.8, "e": 0.001, "t": true,
      "F": false, "s": "soft", "q": "3", "z": null, "y": "yes", "x": "0x10", "inf": ".inf",
      "l": [1, "a", {"b": 2}], "m": {"k": []}})"));
  EXPECT_TRUE(json["i"].is_number_integer());
  EXPECT_TRUE(json["f"].is_number_float());
}

TEST(YamlJson, RejectsDuplicateKeys) {
  const Doc doc("args:\n  a: 1\n  a: 2\n");
  EXPECT_EQ(errorOf(yamlToJson(doc["args"])), "t.yaml:3: args.a: duplicate key");
}

}  // namespace
}  // namespace tessera::config
