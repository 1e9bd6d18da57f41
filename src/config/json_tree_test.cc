// JSON values read through jsonToYaml and the files' per-item decoders (config/items.h): how
// the API decodes its bodies. Errors name the field relative to the value, without lines, and
// every value reads as the same text in a YAML file would (the parity tests below compare the
// two on the same input: the JSON text parsed as YAML is what the API did before).

#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "config/items.h"
#include "config/model_yaml.h"
#include "config/yaml_field.h"
#include "config/yaml_json.h"

namespace tessera::config {
namespace json_tree_test {
namespace {

using nlohmann::json;

constexpr std::string_view kBody = "body";

template <typename T>
std::string errorOf(const Result<T>& result) {
  EXPECT_FALSE(result) << "expected an error";
  return result ? std::string() : result.error().message;
}

// Keeps the tree alive next to the Field that views it.
struct Tree {
  explicit Tree(const json& value) : node(jsonToYaml(value)) {}
  Field root() const { return Field::tree(kBody, node); }
  YAML::Node node;
};

const model::GpuCatalog& catalog() {
  static const model::GpuCatalog builtin = model::GpuCatalog::builtin();
  return builtin;
}

Result<model::NodeSpec> decodeNode(const Field& f) {
  return parseNodeEntry(f, catalog());
}
Result<model::ModelProfile> decodeModel(const Field& f) {
  return parseModelProfile(f);
}
Result<std::vector<model::PlacementRequest>> decodeRequest(const Field& f) {
  static const std::vector<model::ModelProfile> known = [] {
    model::ModelProfile small;
    small.name = "small";
    small.weightsMib = 1024;
    return std::vector<model::ModelProfile>{small};
  }();
  return parseRequestEntry(f, {&known}, &catalog());
}

template <typename Decoder>
auto fromJson(const json& body, Decoder decode) {
  const Tree tree(body);
  return decode(tree.root());
}

// ---- errors in a tree: paths, no lines --------------------------------------------------------

TEST(JsonTree, ErrorsNameThePathRelativeToTheValueAndTheSourceAtTheRoot) {
  const Tree tree(json{{"a", {{"b", json::array({1, {{"c", 5}}})}}}});
  const Field c = tree.root().child("a").child("b").item(1).child("c");
  EXPECT_FALSE(c.positioned());
  EXPECT_EQ(c.path(), "a.b[1].c");
  EXPECT_EQ(c.error("bad").message, "a.b[1].c: bad");
  EXPECT_EQ(c.locate(), "at a.b[1].c");
  EXPECT_EQ(tree.root().error("bad").message, "body: bad");
  EXPECT_EQ(errorOf(require(tree.root().child("a").child("missing"))), "a.missing: required");
  EXPECT_EQ(errorOf(expectMap(tree.root(), {"name"})),
            "a: unknown key; allowed: name");  // not "body:1: a: ..."
  // A parsed document still has its lines.
  auto parsed = parseYamlDocument("a:\n  b: 1\n", "f.yaml");
  ASSERT_TRUE(parsed);
  const Field b = Field::root("f.yaml", *parsed).child("a").child("b");
  EXPECT_TRUE(b.positioned());
  EXPECT_EQ(b.error("bad").message, "f.yaml:2: a.b: bad");
  EXPECT_EQ(b.locate(), "on line 2");
}

TEST(JsonTree, BuildsTheTreeAYamlParserWouldBuild) {
  const Tree tree(json{{"s", "12"},
                       {"i", -7},
                       {"u", 18446744073709551615ULL},
                       {"f", 1e3},
                       {"g", 0.25},
                       {"t", true},
                       {"n", nullptr},
                       {"e", ""},
                       {"l", json::array({1, "x"})},
                       {"m", json::object()}});
  const Field root = tree.root();
  EXPECT_TRUE(root.isMap());
  EXPECT_TRUE(root.child("s").isQuoted());
  EXPECT_EQ(root.child("s").describe(), "\"12\"");
  EXPECT_FALSE(root.child("i").isQuoted());
  EXPECT_EQ(root.child("i").describe(), "-7");
  EXPECT_EQ(root.child("u").describe(), "18446744073709551615");
  EXPECT_EQ(root.child("f").describe(), "1000.0");
  EXPECT_EQ(root.child("g").describe(), "0.25");
  EXPECT_EQ(root.child("t").describe(), "true");
  EXPECT_TRUE(root.child("n").isNull());
  EXPECT_FALSE(root.child("n").absent());
  EXPECT_TRUE(root.child("e").isQuoted());
  EXPECT_FALSE(root.child("e").isNull());
  EXPECT_EQ(root.child("l").size(), 2u);
  EXPECT_TRUE(root.child("l").item(1).isQuoted());
  EXPECT_TRUE(root.child("m").isMap());
  // And back: yamlToJson of the tree is the value.
  auto back = yamlToJson(root);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->at("s"), "12");
  EXPECT_EQ(back->at("i"), -7);
  EXPECT_EQ(back->at("f"), 1000.0);
  EXPECT_EQ(back->at("t"), true);
  EXPECT_TRUE(back->at("n").is_null());
}

// ---- numbers, strings and booleans: read as in a file
// --------------------------------------------

// Integers are JSON integers. A float is not one, even a whole one (1.0, 1e3), as `1.0` in a file
// is not: a count or a MiB figure written as a float is a slip worth a message.
TEST(JsonTree, IntegerFieldsTakeJsonIntegersOnly) {
  const json base = {{"name", "m"}, {"weightsMib", 1024}};
  auto ok = fromJson(base, decodeModel);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->weightsMib, 1024);
  json f = base;
  f["weightsMib"] = 1024.0;
  EXPECT_EQ(errorOf(fromJson(f, decodeModel)), "weightsMib: must be an integer, got 1024.0");
  f["weightsMib"] = 1e3;
  EXPECT_EQ(errorOf(fromJson(f, decodeModel)), "weightsMib: must be an integer, got 1000.0");
  f["weightsMib"] = "1024";
  EXPECT_EQ(errorOf(fromJson(f, decodeModel)),
            "weightsMib: must be an integer, got \"1024\" (quoted text; remove the quotes)");
  f = base;
  f["gpusPerReplica"] = 2.0;
  EXPECT_EQ(errorOf(fromJson(f, decodeModel)), "gpusPerReplica: must be an integer, got 2.0");
  f["gpusPerReplica"] = true;
  EXPECT_EQ(errorOf(fromJson(f, decodeModel)), "gpusPerReplica: must be an integer, got true");
  f["gpusPerReplica"] = 9223372036854775807LL;
  EXPECT_EQ(errorOf(fromJson(f, decodeModel)),
            "gpusPerReplica: must be <= 16, got 9223372036854775807");
  f["gpusPerReplica"] = 18446744073709551615ULL;
  EXPECT_EQ(errorOf(fromJson(f, decodeModel)),
            "gpusPerReplica: must be an integer in 1..16, got 18446744073709551615");
}

// Numbers take integers and floats, 1e3 included; never text.
TEST(JsonTree, NumberFieldsTakeIntegersAndFloats) {
  json body = {{"name", "m"}, {"weightsMib", 1024}, {"memoryBandwidthGBps", 1e3}, {"cpu", 1}};
  auto ok = fromJson(body, decodeModel);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->memoryBandwidthGBps, 1000.0);
  EXPECT_EQ(ok->cpuMilli, 1000);
  body["cpu"] = 0.25;
  EXPECT_EQ(fromJson(body, decodeModel)->cpuMilli, 250);
  body["cpu"] = "0.25";
  EXPECT_EQ(errorOf(fromJson(body, decodeModel)),
            "cpu: must be a number, got \"0.25\" (quoted text; remove the quotes)");
  body["cpu"] = 1e300;
  EXPECT_EQ(errorOf(fromJson(body, decodeModel)), "cpu: must be <= 10000, got 1e+300");
}

// Sizes: a quantity is text with a unit ("12Gi"); plain MiB go under the *Mib key. A bare
// number under the quantity key is the file's "80 what?".
TEST(JsonTree, QuantitiesAreTextWithAUnit) {
  json body = {{"name", "m"}, {"weights", "12Gi"}, {"kvCache", "1.5Gi"}};
  auto ok = fromJson(body, decodeModel);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->weightsMib, 12 * 1024);
  EXPECT_EQ(ok->kvCacheMib, 1536);
  body["weights"] = 12;
  EXPECT_EQ(errorOf(fromJson(body, decodeModel)).rfind("weights: needs a unit", 0), 0u)
      << errorOf(fromJson(body, decodeModel));
  body["weights"] = "12Gi";
  body["weightsMib"] = 1;
  EXPECT_EQ(errorOf(fromJson(body, decodeModel)),
            "weights: give either weightsMib or weights, not both");
}

TEST(JsonTree, BooleansAreJsonBooleansNotText) {
  json body = {{"name", "m"}, {"weightsMib", 1}, {"nvlinkRequired", true}};
  auto ok = fromJson(body, decodeModel);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_TRUE(ok->nvlinkRequired);
  body["nvlinkRequired"] = "true";
  EXPECT_EQ(errorOf(fromJson(body, decodeModel)),
            "nvlinkRequired: must be true or false, got \"true\" (quoted text; remove the quotes)");
  body["nvlinkRequired"] = 1;
  EXPECT_EQ(errorOf(fromJson(body, decodeModel)), "nvlinkRequired: must be true or false, got 1");
  body["nvlinkRequired"] = nullptr;
  EXPECT_EQ(errorOf(fromJson(body, decodeModel)),
            "nvlinkRequired: must be true or false, got nothing");
}

// Text fields take any scalar as written, as in a file (`id: 0` is the text "0").
TEST(JsonTree, TextFieldsTakeScalarsAsWritten) {
  const json body = {{"name", "n1"},
                     {"labels", {{"zone", 3}, {"ssd", true}}},
                     {"gpus", json::array({{{"id", 0}, {"type", "L4"}}})}};
  auto node = fromJson(body, decodeNode);
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ(node->labels.at("zone"), "3");
  EXPECT_EQ(node->labels.at("ssd"), "true");
  EXPECT_EQ(node->gpus.at(0).id, "0");
}

// ---- nested fields of each kind
// --------------------------------------------------------------------

TEST(JsonTree, NestedNodeErrorsNameTheirPath) {
  json body = {{"name", "n1"}, {"gpus", json::array({{{"type", "L4"}}, {{"type", "K9000"}}})}};
  EXPECT_EQ(
      errorOf(fromJson(body, decodeNode)).rfind("gpus[1].type: unknown GPU type \"K9000\"", 0), 0u);
  body["gpus"][1] = {{"type", "A100-80GB"},
                     {"migEnabled", true},
                     {"migInstances", json::array({{{"profile", "9g.99gb"}}})}};
  EXPECT_EQ(errorOf(fromJson(body, decodeNode)).rfind("gpus[1].migInstances[0].profile: ", 0), 0u)
      << errorOf(fromJson(body, decodeNode));
  body["gpus"] = json::array({{{"id", "a"}, {"type", "L4"}}, {{"id", "a"}, {"type", "L4"}}});
  EXPECT_EQ(errorOf(fromJson(body, decodeNode)),
            "gpus[1].id: duplicate GPU id \"a\" (first at gpus[0].id)");
  body["gpus"] =
      json::array({{{"uuid", "GPU-1"}, {"type", "L4"}}, {{"uuid", "GPU-1"}, {"type", "L4"}}});
  EXPECT_EQ(errorOf(fromJson(body, decodeNode)),
            "gpus[1].uuid: uuid GPU-1 is already used by n1 GPU 0");
  body["gpus"] = {{"type", "L4"}, {"count", 4}, {"nvlinkGroups", 3}};
  EXPECT_EQ(errorOf(fromJson(body, decodeNode)),
            "gpus.nvlinkGroups: count (4) must be a multiple of nvlinkGroups (3)");
  body["gpus"] = json::array();
  body["taints"] = json::array({{{"key", "k"}, {"effect", "Sometimes"}}});
  EXPECT_EQ(
      errorOf(fromJson(body, decodeNode)),
      "taints[0].effect: must be NoSchedule, PreferNoSchedule or NoExecute, got \"Sometimes\"");
  EXPECT_EQ(errorOf(fromJson(json{{"cpuMilli", 1}}, decodeNode)), "name: required");
  EXPECT_EQ(errorOf(fromJson(json{{"name", "Bad_Name"}}, decodeNode)).rfind("name: ", 0), 0u);
}

TEST(JsonTree, NestedModelAndRequestErrorsNameTheirPath) {
  EXPECT_EQ(errorOf(fromJson(json{{"name", "m"}}, decodeModel)),
            "body: needs GPU memory: weightsMib + kvCacheMib + overheadMib (or weights, kvCache, "
            "overhead) must add up to more than 0");
  EXPECT_EQ(
      errorOf(fromJson(json{{"name", "m"}, {"weightsMib", 1}, {"sharing", {"shared", "half"}}},
                       decodeModel)),
      "sharing[1]: unknown sharing mode \"half\"; allowed: exclusive, shared, mig");
  json request = {{"replicaId", "r-0"}, {"model", {{"name", "m"}, {"weights", "1Zi"}}}};
  EXPECT_EQ(errorOf(fromJson(request, decodeRequest)).rfind("model.weights: ", 0), 0u)
      << errorOf(fromJson(request, decodeRequest));
  request["model"] = "small";
  request["tolerations"] = json::array({{{"operator", "Exists"}}, {{"operator", "Maybe"}}});
  EXPECT_EQ(errorOf(fromJson(request, decodeRequest)),
            "tolerations[1].operator: must be Equal or Exists, got \"Maybe\"");
  request.erase("tolerations");
  request["gpuTypes"] = {"L4", "H100-80G"};
  EXPECT_EQ(errorOf(fromJson(request, decodeRequest)).rfind("gpuTypes[1]: unknown GPU type", 0), 0u)
      << errorOf(fromJson(request, decodeRequest));
  request.erase("gpuTypes");
  request["count"] = 2;
  EXPECT_EQ(errorOf(fromJson(request, decodeRequest)),
            "count: needs name (replicas are called name-0, name-1, ...), not replicaId");
  request.erase("replicaId");
  request["name"] = "r";
  auto two = fromJson(request, decodeRequest);
  ASSERT_TRUE(two) << two.error().message;
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1].replicaId, "r-1");
}

// ---- parity with the text route
// ------------------------------------------------------------------

// What a decoded value or its error comes to, for comparing two routes.
std::string fingerprint(const Result<model::NodeSpec>& r) {
  if (!r) return "error " + r.error().message;
  std::ostringstream out;
  out << r->name << " cpu=" << r->cpuMilli << " mem=" << r->hostMemoryMib
      << " healthy=" << r->healthy << " cordoned=" << r->cordoned
      << " rank=" << r->rank.value_or(-1) << " labels=" << r->labels.size()
      << " taints=" << r->taints.size() << " cached=" << r->cachedModels.size();
  for (const model::GpuSpec& g : r->gpus) {
    out << " [" << g.id << " " << g.type << " " << g.uuid << " " << g.memoryMib << " "
        << g.computeMilli << " " << g.numaNode << " " << g.nvlinkGroup << " " << g.migEnabled << " "
        << g.migInstances.size() << " " << g.healthy << "]";
  }
  return out.str();
}

std::string fingerprint(const Result<model::ModelProfile>& r) {
  if (!r) return "error " + r.error().message;
  std::ostringstream out;
  out << r->name << " " << r->weightsMib << " " << r->kvCacheMib << " " << r->overheadMib << " "
      << r->computeMilli << " " << r->memoryBandwidthGBps << " " << r->gpusPerReplica << " "
      << r->nvlinkRequired << " " << r->numaAligned << " " << r->priority << " " << r->sharing
      << " " << r->migProfile << " " << r->cpuMilli << " " << r->hostMemoryMib;
  return out.str();
}

std::string fingerprint(const Result<std::vector<model::PlacementRequest>>& r) {
  if (!r) return "error " + r.error().message;
  std::ostringstream out;
  for (const model::PlacementRequest& q : *r) {
    out << q.replicaId << " " << q.deployment << " "
        << fingerprint(Result<model::ModelProfile>(q.model)) << " types=" << q.gpuTypes.size()
        << " sel=" << q.nodeSelector.size() << " tol=" << q.tolerations.size() << ";";
  }
  return out.str();
}

// Where the first of two duplicates was: a line in a document, a path in a tree.
std::string withoutFirstPlace(std::string message) {
  if (const std::size_t at = message.find(" (first "); at != std::string::npos) message.resize(at);
  return message;
}
// The error of the text route without its "body:<line>: " (what the API's regex took off).
std::string withoutLine(std::string message) {
  message = withoutFirstPlace(std::move(message));
  if (!message.starts_with("error body:")) return message;
  const std::size_t colon = message.find(": ", 11);
  return colon == std::string::npos ? message : "error " + message.substr(colon + 2);
}
// The tree route's "body: " at the root, likewise.
std::string withoutBody(std::string message) {
  message = withoutFirstPlace(std::move(message));
  return message.starts_with("error body: ") ? "error " + message.substr(12) : message;
}

// Both routes on one value: the JSON text read as a YAML document (the API before), and the
// tree built from the value.
template <typename Decoder>
void expectSameOnBothRoutes(const json& body, Decoder decode) {
  const std::string text = body.dump(1);
  auto document = parseYamlDocument(text, kBody);
  ASSERT_TRUE(document) << text;
  const std::string viaText = withoutLine(fingerprint(decode(Field::root(kBody, *document))));
  const std::string viaTree = withoutBody(fingerprint(fromJson(body, decode)));
  EXPECT_EQ(viaTree, viaText) << text;
}

const std::vector<json>& oddValues() {
  static const std::vector<json> values = {nullptr,
                                           true,
                                           false,
                                           0,
                                           -1,
                                           1,
                                           7,
                                           1e3,
                                           1.0,
                                           0.5,
                                           -0.0,
                                           1e300,
                                           18446744073709551615ULL,
                                           -9223372036854775807LL - 1,
                                           "",
                                           "12",
                                           "12Gi",
                                           "1.5Gi",
                                           "40GB",
                                           "true",
                                           "null",
                                           "~",
                                           "0x10",
                                           "L4",
                                           "A100-80GB",
                                           "shared",
                                           "mig",
                                           "NoSchedule",
                                           "Exists",
                                           "a b",
                                           "x:",
                                           "- y",
                                           "#c",
                                           json::array(),
                                           json::array({"L4"}),
                                           json::array({1, 2}),
                                           json::object(),
                                           json{{"type", "L4"}, {"count", 2}}};
  return values;
}

// Every path to a value in `v` (object keys and array indices), pre-order.
void pathsOf(const json& v, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  out.push_back(at);
  if (v.is_object()) {
    for (const auto& [k, item] : v.items()) pathsOf(item, at / k, out);
  } else if (v.is_array()) {
    for (std::size_t i = 0; i < v.size(); ++i) pathsOf(v[i], at / i, out);
  }
}

std::uint64_t testSeed() {
  if (const char* env = std::getenv("TESSERA_SEED"); env != nullptr && *env != '\0') {
    return std::strtoull(env, nullptr, 10);
  }
  return std::random_device{}();
}

// Valid bodies of each kind, then each with one value somewhere replaced by an odd one, a key
// dropped or an unknown key added: the two routes agree on every one, success or message.
TEST(JsonTree, BodiesReadTheSameAsTheirJsonTextReadAsYaml) {
  const json node = {
      {"name", "gpu-a"},
      {"cpu", 64},
      {"hostMemory", "512Gi"},
      {"labels", {{"zone", "a"}}},
      {"taints", json::array({{{"key", "k"}, {"value", "v"}, {"effect", "NoSchedule"}}})},
      {"cachedModels", {"small"}},
      {"gpus", json::array({{{"id", "0"},
                             {"type", "A100-80GB"},
                             {"numaNode", 0},
                             {"migEnabled", true},
                             {"migInstances", json::array({{{"profile", "3g.40gb"}}})}},
                            {{"id", "1"}, {"type", "L4"}, {"uuid", "GPU-x"}}})}};
  const json shorthand = {{"name", "gpu-b"},
                          {"gpus", {{"type", "H100-80GB"}, {"count", 4}, {"nvlinkGroups", 2}}}};
  const json model = {{"name", "m"},
                      {"weights", "8Gi"},
                      {"kvCacheMib", 2048},
                      {"overhead", "1.5Gi"},
                      {"computeMilli", 400},
                      {"gpusPerReplica", 1},
                      {"sharing", {"shared", "mig"}},
                      {"migProfile", "1g.10gb"},
                      {"priority", 3},
                      {"memoryBandwidthGBps", 0.5},
                      {"cpu", 0.5},
                      {"nvlinkRequired", false}};
  const json request = {
      {"name", "r"},
      {"count", 2},
      {"model", "small"},
      {"deployment", "chat"},
      {"gpuTypes", {"L4"}},
      {"nodeSelector", {{"zone", "a"}}},
      {"tolerations",
       json::array(
           {{{"key", "k"}, {"operator", "Equal"}, {"value", "v"}, {"effect", "NoSchedule"}}})}};
  const json inlineRequest = {{"replicaId", "ns/r-0"}, {"model", model}};
  for (const json& body : {node, shorthand}) expectSameOnBothRoutes(body, decodeNode);
  expectSameOnBothRoutes(model, decodeModel);
  for (const json& body : {request, inlineRequest}) expectSameOnBothRoutes(body, decodeRequest);

  const std::uint64_t seed = testSeed();
  std::printf("JsonTree parity: TESSERA_SEED=%llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 random(seed);
  const auto pick = [&](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(random);
  };
  const std::vector<json> bodies = {node, shorthand, model, request, inlineRequest};
  for (int round = 0; round < 600; ++round) {
    const std::size_t kind = pick(bodies.size());
    json body = bodies[kind];
    std::vector<json::json_pointer> paths;
    pathsOf(body, json::json_pointer(), paths);
    const json::json_pointer at = paths[pick(paths.size())];
    switch (pick(3)) {
      case 0:
        body[at] = oddValues()[pick(oddValues().size())];
        break;
      case 1:
        if (!at.empty() && body[at.parent_pointer()].is_object()) {
          body[at.parent_pointer()].erase(at.back());
        }
        break;
      default:
        if (body[at].is_object()) body[at]["colour"] = "blue";
        break;
    }
    SCOPED_TRACE("round " + std::to_string(round) + ": " + body.dump());
    if (kind < 2) {
      expectSameOnBothRoutes(body, decodeNode);
    } else if (kind == 2) {
      expectSameOnBothRoutes(body, decodeModel);
    } else {
      expectSameOnBothRoutes(body, decodeRequest);
    }
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace json_tree_test
}  // namespace tessera::config
